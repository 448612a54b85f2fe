//! Logging: `LOG_FORMAT=json|pretty`, filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::ConfigError;

/// Installs the global subscriber: `json` (one object a line) or `pretty`, to stderr.
pub fn init(format: &str) -> Result<(), ConfigError> {
    let default = crate::config::declared::RUST_LOG.default.unwrap_or("info");
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        "json" => builder.json().flatten_event(true).try_init(),
        "pretty" => builder.try_init(),
        other => {
            return Err(ConfigError::new(
                "LOG_FORMAT",
                format!("{other:?} is not json or pretty"),
            ))
        }
    }
    .map_err(|e| ConfigError::new("LOG_FORMAT", format!("cannot install the logger: {e}")))
}
