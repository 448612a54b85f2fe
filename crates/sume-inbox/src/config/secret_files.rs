//! `*_FILE` variables: a secret may be given as the path of a file holding it (a Docker or
//! Kubernetes secret mount, a systemd credential), e.g. `SUME_WEBHOOK_SECRET_FILE=/run/secrets/hook`.
//! The file's content, without its trailing newline, becomes the variable's value before the
//! command line is read. Every setting declared `secret` has one. A list's file may hold one
//! entry a line (`main:sk_1` and `batch:sk_2` on two lines): its lines become entries as
//! commas would (see `lists.rs`). A refusal of a value read from a file names the `_FILE`
//! variable ([`super::Values::named`]).

use std::sync::{Mutex, OnceLock};

use super::declared;
use super::setting::Setting;
use super::ConfigError;

/// The settings whose value [`load`] read from a file.
static LOADED: OnceLock<Vec<&'static str>> = OnceLock::new();

/// The settings read from a file whose flag was given too (see [`flag_given`]).
static FLAGGED: Mutex<Vec<(&'static str, &'static str)>> = Mutex::new(Vec::new());

/// Notes that `setting`'s flag `flag` was given although [`load`] read the setting from its
/// file: [`check_flags`] then refuses the start.
pub fn flag_given(setting: &'static str, flag: &'static str) {
    FLAGGED.lock().expect("flags").push((setting, flag));
}

/// Refuses a setting given both by its flag and by its `*_FILE` variable (the flag would win
/// silently); call once the command line is parsed.
pub fn check_flags() -> Result<(), ConfigError> {
    match FLAGGED.lock().expect("flags").first() {
        Some((name, flag)) => {
            let file_var = declared::find(name).map_or("", |s| s.file_name);
            Err(refused(
                file_var,
                format!("--{flag} and {file_var} are both set: set one of them"),
            ))
        }
        None => Ok(()),
    }
}

/// The settings that may come from a file, each with the variable that names the file.
pub fn file_variables() -> Vec<(&'static Setting, &'static str)> {
    declared::all()
        .filter_map(|s| s.file_variable().map(|f| (s, f)))
        .collect()
}

/// The settings [`load`] read from a file (none before it ran).
pub fn loaded() -> Vec<&'static str> {
    LOADED.get().cloned().unwrap_or_default()
}

/// Reads every `NAME_FILE` that is set into `NAME`. Call before any thread starts (it sets
/// environment variables). Errors name the variable and never include a file's content.
pub fn load() -> Result<(), ConfigError> {
    let mut loaded = Vec::new();
    for (setting, file_var) in file_variables() {
        let name = setting.name;
        let Some(path) = std::env::var_os(file_var).filter(|p| !p.is_empty()) else {
            continue;
        };
        if std::env::var_os(name).is_some_and(|v| !v.is_empty()) {
            return Err(refused(
                file_var,
                format!("{name} and {file_var} are both set: set one of them"),
            ));
        }
        let content = std::fs::read_to_string(&path).map_err(|e| {
            refused(
                file_var,
                format!("cannot read {}: {e}", path.to_string_lossy()),
            )
        })?;
        let value = content.trim_end_matches(['\n', '\r']);
        if value.trim().is_empty() {
            return Err(refused(
                file_var,
                format!("{} is empty", path.to_string_lossy()),
            ));
        }
        // A list's lines are its entries: said with commas, as every reader of the variable
        // (OpenTelemetry's too) takes them.
        match setting.form.is_list() {
            true => std::env::set_var(name, super::lists::comma_separated(value)),
            false => std::env::set_var(name, value),
        }
        loaded.push(name);
    }
    let _ = LOADED.set(loaded);
    Ok(())
}

/// An error naming a `*_FILE` variable.
fn refused(file_var: &'static str, problem: String) -> ConfigError {
    ConfigError::new(file_var, problem)
}
