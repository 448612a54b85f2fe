//! Logging: `LOG_FORMAT=json|pretty`, filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub fn init(format: &str) -> Result<(), String> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        "json" => builder.json().flatten_event(true).try_init(),
        "pretty" => builder.try_init(),
        other => return Err(format!("LOG_FORMAT: {other:?} is not json or pretty")),
    }
    .map_err(|e| e.to_string())
}
