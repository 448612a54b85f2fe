//! The `sume-inbox` binary: tunes the allocator, reads `*_FILE` secrets, parses the command
//! line, starts logging and the runtime ([`sume_inbox::process`]) and hands over to
//! [`sume_inbox::cli::dispatch`]; the exit status comes from the error's kind
//! ([`sume_inbox::cli::CliError::exit_code`]).

use std::process::ExitCode;

use clap::Parser;
use sume_inbox::cli::{self, Cli};

/// A server's allocation pattern (many small, short-lived buffers per request, across threads)
/// is where glibc's allocator spends most: mimalloc halves that cost (see docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    sume_inbox::process::tune_allocator();
    // Before anything else runs: this sets environment variables.
    if let Err(e) = sume_inbox::config::secret_files::load() {
        return fail(cli::CliError::from(e));
    }
    let cli = Cli::parse();
    // A secret given both by its flag and by its `*_FILE` variable: neither wins silently.
    if let Err(e) = sume_inbox::config::secret_files::check_flags() {
        return fail(cli::CliError::from(e));
    }
    // Traces are the daemon's: only `serve` reads OTEL_*.
    let traces = match &cli.command {
        cli::Command::Serve(_) => sume_inbox::config::traces_from_env(),
        _ => Ok(sume_inbox::config::Traces::Off { because: None }),
    };
    let logging = traces.and_then(|traces| {
        let format = cli
            .global
            .values()
            .choice(&sume_inbox::config::declared::LOG_FORMAT)?;
        sume_inbox::process::logging::init_with_traces(format, &traces)
    });
    let exporting = match logging {
        Ok(exporting) => exporting,
        Err(e) => return fail(cli::CliError::from(e)),
    };
    let runtime = match sume_inbox::process::runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let ran = runtime.block_on(cli::dispatch(cli.command));
    if let Some(exporting) = exporting {
        exporting.shutdown(TRACES_FLUSH);
    }
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// How long the exit waits for the last spans to reach the collector.
const TRACES_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

/// The last line, in the log's format (`LOG_FORMAT=json`, or `--log-format json`: one object,
/// as a log shipper reads every other line), and never a panic if nobody reads stderr; none
/// when the reader of stdout went away (`| head`), which ends a command with 0.
fn fail(e: cli::CliError) -> ExitCode {
    use std::io::Write;
    let code = e.exit_code();
    if e.reader_gone() {
        return ExitCode::from(code);
    }
    let args: Vec<String> = std::env::args().collect();
    let flagged = args
        .windows(2)
        .any(|w| w[0] == "--log-format" && w[1] == "json")
        || args.iter().any(|a| a == "--log-format=json");
    let json = flagged || std::env::var("LOG_FORMAT").is_ok_and(|f| f.trim() == "json");
    let line = if json {
        serde_json::json!({
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "level": "ERROR",
            "message": format!("sume-inbox: {e}"),
            "exit_code": code,
        })
        .to_string()
    } else {
        format!("sume-inbox: {e}")
    };
    let _ = writeln!(std::io::stderr(), "{line}");
    ExitCode::from(code)
}
