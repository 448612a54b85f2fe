//! `*_FILE` variables: a secret may be given as the path of a file holding it (a Docker or
//! Kubernetes secret mount, a systemd credential), e.g. `SUME_WEBHOOK_SECRET_FILE=/run/secrets/hook`.
//! The file's content, without its trailing newline, becomes the variable's value before the
//! command line is read.

/// The settings that may come from a file.
pub const FILE_VARIABLES: &[&str] = &[
    "DATABASE_URL",
    "SUME_WEBHOOK_SECRET",
    "SUME_API_KEYS",
    "SUME_API_KEY",
    "ADMIN_TOKEN",
];

/// Reads every `NAME_FILE` that is set into `NAME`. Call before any thread starts (it sets
/// environment variables). Errors name the variable and never include a file's content.
pub fn load() -> Result<(), String> {
    for name in FILE_VARIABLES {
        let file_var = format!("{name}_FILE");
        let Some(path) = std::env::var_os(&file_var).filter(|p| !p.is_empty()) else {
            continue;
        };
        if std::env::var_os(name).is_some_and(|v| !v.is_empty()) {
            return Err(format!(
                "{name} and {file_var} are both set: set one of them"
            ));
        }
        let content = std::fs::read_to_string(&path)
            .map_err(|e| format!("{file_var}: cannot read {}: {e}", path.to_string_lossy()))?;
        let value = content.trim_end_matches(['\n', '\r']);
        if value.trim().is_empty() {
            return Err(format!("{file_var}: {} is empty", path.to_string_lossy()));
        }
        std::env::set_var(name, value);
    }
    Ok(())
}
