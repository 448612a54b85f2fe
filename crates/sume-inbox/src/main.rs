//! The `sume-inbox` binary: reads `*_FILE` secrets, parses the command line, starts logging
//! and the runtime (WORKER_THREADS) and hands over to [`sume_inbox::cli::dispatch`]; the exit status comes from the error's
//! kind ([`sume_inbox::cli::CliError::exit_code`]).

use std::process::ExitCode;

use clap::Parser;
use sume_inbox::cli::{self, Cli};

/// A server's allocation pattern (many small, short-lived buffers per request, across threads)
/// is where glibc's allocator spends most: mimalloc halves that cost (see docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` (the option's number in the `mi_option_e` of the mimalloc this
/// build links, v3): how long freed pages are kept before they go back to the system.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed pages go back to the system after 100 ms instead of mimalloc's 1 s: at 256 connections
/// the peak resident set falls from 50 to 42 MiB for no measurable throughput, where purging at
/// once costs 5% (docs/benchmarks.md, "Freed memory back sooner"). `MIMALLOC_PURGE_DELAY`
/// set in the environment wins.
fn allocator_options() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one option of the allocator by its number; called before any other
        // thread exists.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 100) };
    }
}

fn main() -> ExitCode {
    allocator_options();
    // Before anything else runs: this sets environment variables.
    if let Err(e) = sume_inbox::secrets_from_files::load() {
        return fail(cli::CliError::from(e));
    }
    let cli = Cli::parse();
    if let Err(e) = sume_inbox::telemetry::init(&cli.log_format) {
        return fail(cli::CliError::from(e));
    }
    let workers = match sume_inbox::config::worker_threads_from_env() {
        Ok(n) => n,
        Err(e) => return fail(cli::CliError::from(e)),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sume-inbox: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
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

#[cfg(test)]
mod tests {
    use std::ffi::{c_char, c_void, CStr};

    extern "C" {
        /// mimalloc's own listing of its options, `option 'name': value` a line.
        fn mi_options_print_out(
            out: unsafe extern "C" fn(msg: *const c_char, arg: *mut c_void),
            arg: *mut c_void,
        );
    }

    unsafe extern "C" fn collect(msg: *const c_char, arg: *mut c_void) {
        let text = &mut *(arg as *mut String);
        text.push_str(&CStr::from_ptr(msg).to_string_lossy());
    }

    /// The option's number is mimalloc's: its own listing names the option set.
    #[test]
    fn the_purge_delay_is_set_by_its_number() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return; // the environment's value wins, by design
        }
        super::allocator_options();
        let mut text = String::new();
        // SAFETY: `collect` appends each message to the String behind `arg`, which outlives
        // the call.
        unsafe { mi_options_print_out(collect, &mut text as *mut String as *mut c_void) };
        assert!(
            text.lines()
                .any(|l| l.trim() == "option 'purge_delay': 100"),
            "{text}"
        );
    }
}
