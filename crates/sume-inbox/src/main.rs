//! The `sume-inbox` binary: tunes the allocator, reads `*_FILE` secrets, parses the command
//! line, starts logging and the runtime ([`sume_inbox::process`]) and hands over to
//! [`sume_inbox::cli::dispatch`]; the exit status comes from the error's kind
//! ([`sume_inbox::cli::CliError::exit_code`]).

use std::process::ExitCode;

use clap::error::ErrorKind;
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
    let args = sume_inbox::config::clap_args::negative_values_joined(std::env::args_os());
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return refused_usage(e),
    };
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

/// The last line (a line for each setting refused), in the log's format (`LOG_FORMAT=json`, or
/// `--log-format json`: one object, as a log shipper reads every other line), and never a panic if nobody reads stderr; none
/// when the reader of stdout went away (`| head`), which ends a command with 0.
fn fail(e: cli::CliError) -> ExitCode {
    let code = e.exit_code();
    if e.reader_gone() {
        return ExitCode::from(code);
    }
    // Settings refused together: one line (one JSON object) each, naming its setting.
    let lines = match &e {
        cli::CliError::Config(c) => c.each().iter().map(ToString::to_string).collect(),
        e => vec![e.to_string()],
    };
    for line in lines {
        write_refusal(&format!("sume-inbox: {line}"), code);
    }
    ExitCode::from(code)
}

/// The command line refused (an unknown flag, a value clap cannot read): clap's own text, or,
/// under `LOG_FORMAT=json`, that text as one line of JSON shaped as every other refusal, exit
/// 2 either way. What was asked for (`--help`, `--version`, the help shown when no command is
/// given) stays text.
fn refused_usage(e: clap::Error) -> ExitCode {
    let asked = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if asked || !json_requested() {
        e.exit();
    }
    let text = e.render().to_string();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let message = lines.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    let code = u8::try_from(e.exit_code()).unwrap_or(2);
    write_refusal(&format!("sume-inbox: {message}"), code);
    ExitCode::from(code)
}

/// Whether the log's format is JSON: `--log-format json` (or `=json`) on the command line, else
/// `LOG_FORMAT`, in any case; read from the raw arguments, as the line may be a refusal of
/// the command line itself.
fn json_requested() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let json = |v: &str| v.trim().eq_ignore_ascii_case("json");
    let flagged = args
        .windows(2)
        .any(|w| w[0] == "--log-format" && json(&w[1]))
        || args
            .iter()
            .any(|a| a.strip_prefix("--log-format=").is_some_and(json));
    flagged || std::env::var("LOG_FORMAT").is_ok_and(|f| json(&f))
}

/// Writes a refusal to stderr: one JSON object when the log is JSON, else the text.
fn write_refusal(message: &str, code: u8) {
    use std::io::Write;
    let line = if json_requested() {
        serde_json::json!({
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "level": "ERROR",
            "message": message,
            "exit_code": code,
        })
        .to_string()
    } else {
        message.to_owned()
    };
    let _ = writeln!(std::io::stderr(), "{line}");
}
