//! Logging: `LOG_FORMAT=json|pretty`, filtered by `RUST_LOG` (default `info`); with traces
//! exported ([`super::traces`]), the exporter's layer beside it, and each JSON line written
//! inside a traced span opens with that span's `trace_id` and `span_id`.

use std::fmt;
use std::io::IsTerminal;

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use super::traces::{self, Exporting};
use crate::config::{ConfigError, Traces};

/// Installs the global subscriber: `json` (one object a line) or `pretty`, to stderr. A line
/// that cannot be written (stderr a pipe whose reader went away) is lost, and nothing else:
/// the subscriber's own report of it would go to the same stderr, and `eprintln!` panics
/// there, in whatever task was logging (the one that hears SIGTERM, say).
pub fn init(format: &str) -> Result<(), ConfigError> {
    init_with_traces(format, &Traces::Off { because: None }).map(|_| ())
}

/// As [`init`], and with traces on, the exporter too: keep the answer, and shut it down at
/// exit. Traces turned off by a setting (OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER) are said in
/// an INFO line.
pub fn init_with_traces(format: &str, traces: &Traces) -> Result<Option<Exporting>, ConfigError> {
    let exporting = install(format, traces)?;
    if let Traces::Off {
        because: Some(because),
    } = traces
    {
        tracing::info!("traces: {because}, no spans are made or exported");
    }
    Ok(exporting)
}

/// The subscriber of [`init_with_traces`].
fn install(format: &str, traces: &Traces) -> Result<Option<Exporting>, ConfigError> {
    if !matches!(format, "json" | "pretty") {
        return Err(ConfigError::new(
            "LOG_FORMAT",
            format!("{format:?} is not json or pretty"),
        ));
    }
    let default = crate::config::declared::RUST_LOG.default.unwrap_or("info");
    let filter = match std::env::var("RUST_LOG") {
        Ok(text) if !text.trim().is_empty() => filter_of(&text)?,
        _ => EnvFilter::new(default),
    };
    let cannot = |e: tracing_subscriber::util::TryInitError| {
        ConfigError::new("LOG_FORMAT", format!("cannot install the logger: {e}"))
    };
    let Some(traces) = traces.config() else {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .log_internal_errors(false)
            .with_ansi(std::io::stderr().is_terminal());
        let installed = match format {
            "json" => builder.json().flatten_event(true).try_init(),
            _ => builder.try_init(),
        };
        return installed.map(|()| None).map_err(|e| {
            ConfigError::new("LOG_FORMAT", format!("cannot install the logger: {e}"))
        });
    };
    // The traced spans are in every log line's scope, whatever RUST_LOG says of their module.
    let filter = filter.add_directive(
        format!("{}=info", traces::TARGET)
            .parse()
            .expect("a valid directive"),
    );
    let (otel, exporting) = traces::install(traces)?;
    let registry = tracing_subscriber::registry().with(otel);
    let base = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        "json" => registry
            .with(
                base.json()
                    .flatten_event(true)
                    .map_event_format(WithTraceIds)
                    .with_filter(filter),
            )
            .try_init(),
        _ => registry.with(base.with_filter(filter)).try_init(),
    }
    .map_err(cannot)?;
    Ok(Some(exporting))
}

/// `RUST_LOG`'s filter. A word alone is a module's name to the filter (that module at every
/// level, nothing else): one a letter or two from a level's name (`inof`, `wran`, `warning`) is refused
/// as the misspelled level it is, as it would otherwise silence every line.
fn filter_of(text: &str) -> Result<EnvFilter, ConfigError> {
    let refused = |why: String| {
        ConfigError::new(
            "RUST_LOG",
            format!(
                "{text:?} {why}: write a level (info, warn) or level,module=level such as \
                 info,sume_inbox::actors::sweep=debug"
            ),
        )
    };
    for word in text.split(',').map(str::trim) {
        if let Some(level) = misspelled_level(word) {
            let whole = if word == text.trim() {
                String::new()
            } else {
                format!("in {text:?}, ")
            };
            return Err(ConfigError::new(
                "RUST_LOG",
                format!(
                    "{whole}{word:?} reads as a module's name, which would silence every other \
                     line: did you mean {level}?"
                ),
            ));
        }
    }
    EnvFilter::try_new(text).map_err(|e| refused(format!("is not a filter ({e})")))
}

/// The level `word` is a near miss of, when it is a short bare word and no level itself.
fn misspelled_level(word: &str) -> Option<&'static str> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let lower = word.to_ascii_lowercase();
    if word.len() > 7 || !lower.chars().all(|c| c.is_ascii_lowercase()) {
        return None;
    }
    match lower.as_str() {
        "warning" => return Some("warn"),
        "tracing" => return None, // the crate
        word if LEVELS.contains(&word) => return None,
        _ => {}
    }
    LEVELS
        .into_iter()
        .filter(|level| level.len() > 3)
        .map(|level| (strsim::damerau_levenshtein(&lower, level), level))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, level)| level)
}

/// A JSON event format whose lines, inside a traced span, open with its ids.
struct WithTraceIds<F>(F);

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let ids = ctx.event_scope().and_then(|scope| {
            scope.into_iter().find_map(|span| {
                let extensions = span.extensions();
                let data = extensions.get::<tracing_opentelemetry::OtelData>()?;
                Some((data.trace_id()?, data.span_id()?))
            })
        });
        let Some((trace_id, span_id)) = ids else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => {
                let comma = if rest.starts_with('}') { "" } else { "," };
                write!(
                    writer,
                    "{{\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\"{comma}{rest}"
                )
            }
            None => writer.write_str(&line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelled_level_is_refused_and_a_module_is_not() {
        for (word, meant) in [("inof", "info"), ("wran", "warn"), ("WARNING", "warn")] {
            assert_eq!(misspelled_level(word), Some(meant), "{word}");
            let e = filter_of(&format!("{word},hyper=warn"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("did you mean {meant}?")), "{e}");
        }
        for fine in [
            "info",
            "DEBUG",
            "off",
            "tracing",
            "sume_inbox",
            "hyper",
            "2",
        ] {
            assert_eq!(misspelled_level(fine), None, "{fine}");
            assert!(filter_of(fine).is_ok(), "{fine}");
        }
        assert!(filter_of("info,sume_inbox::actors::sweep=debug").is_ok());
    }
}
