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
    let logging = cli
        .global
        .values()
        .choice(&sume_inbox::config::declared::LOG_FORMAT)
        .and_then(sume_inbox::process::logging::init);
    if let Err(e) = logging {
        return fail(cli::CliError::from(e));
    }
    let runtime = match sume_inbox::process::runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    match runtime.block_on(cli::dispatch(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(e: cli::CliError) -> ExitCode {
    eprintln!("sume-inbox: {e}");
    ExitCode::from(e.exit_code())
}
