//! `*_FILE` variables: a secret may be given as the path of a file holding it (a Docker or
//! Kubernetes secret mount, a systemd credential), e.g. `SUME_WEBHOOK_SECRET_FILE=/run/secrets/hook`.
//! The file's content, without its trailing newline, becomes the variable's value before the
//! command line is read.

use crate::config::ConfigError;

/// The settings that may come from a file, each with the variable that names the file.
pub const FILE_VARIABLES: [(&str, &str); 8] = [
    ("DATABASE_URL", "DATABASE_URL_FILE"),
    ("MIGRATE_DATABASE_URL", "MIGRATE_DATABASE_URL_FILE"),
    ("LISTEN_DATABASE_URL", "LISTEN_DATABASE_URL_FILE"),
    ("SUME_WEBHOOK_SECRET", "SUME_WEBHOOK_SECRET_FILE"),
    ("SUME_API_KEYS", "SUME_API_KEYS_FILE"),
    ("SUME_API_KEY", "SUME_API_KEY_FILE"),
    ("ADMIN_TOKEN", "ADMIN_TOKEN_FILE"),
    ("ADMIN_APP_TOKEN", "ADMIN_APP_TOKEN_FILE"),
];

/// Reads every `NAME_FILE` that is set into `NAME`. Call before any thread starts (it sets
/// environment variables). Errors name the variable and never include a file's content.
pub fn load() -> Result<(), ConfigError> {
    for (name, file_var) in FILE_VARIABLES {
        let Some(path) = std::env::var_os(file_var).filter(|p| !p.is_empty()) else {
            continue;
        };
        if std::env::var_os(name).is_some_and(|v| !v.is_empty()) {
            return Err(ConfigError::new(
                file_var,
                format!("{name} and {file_var} are both set: set one of them"),
            ));
        }
        let content = std::fs::read_to_string(&path).map_err(|e| {
            ConfigError::new(
                file_var,
                format!("cannot read {}: {e}", path.to_string_lossy()),
            )
        })?;
        let value = content.trim_end_matches(['\n', '\r']);
        if value.trim().is_empty() {
            return Err(ConfigError::new(
                file_var,
                format!("{} is empty", path.to_string_lossy()),
            ));
        }
        std::env::set_var(name, value);
    }
    Ok(())
}
