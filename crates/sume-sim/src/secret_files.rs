//! `SIM_WEBHOOK_SECRET_FILE`, like the daemon's `*_FILE` variables: the signing secrets may be
//! given as the path of a file holding them (a Docker or Kubernetes secret, a systemd
//! credential). API keys already come from a file with `SIM_KEYS_FILE` (`--keys-file`), which
//! takes the JSON list or the `SIM_KEYS` syntax.

/// The settings that may come from a file, each with the variable naming the file.
pub const FILE_VARIABLES: [(&str, &str); 1] = [("SIM_WEBHOOK_SECRET", "SIM_WEBHOOK_SECRET_FILE")];

/// Reads every `NAME_FILE` that is set into `NAME`; call before any thread starts (it sets
/// environment variables). The error names the variable, never a file's content.
pub fn load() -> Result<(), String> {
    for (name, file_var) in FILE_VARIABLES {
        let Some(path) = std::env::var_os(file_var).filter(|p| !p.is_empty()) else {
            continue;
        };
        if std::env::var_os(name).is_some_and(|v| !v.is_empty()) {
            return Err(format!(
                "{file_var}: {name} and {file_var} are both set: set one of them"
            ));
        }
        let shown = path.to_string_lossy().into_owned();
        let content = std::fs::read_to_string(&path)
            .map_err(|e| format!("{file_var}: cannot read {shown}: {e}"))?;
        let value = content.trim_end_matches(['\n', '\r']);
        if value.trim().is_empty() {
            return Err(format!("{file_var}: {shown} is empty"));
        }
        std::env::set_var(name, value);
    }
    Ok(())
}
