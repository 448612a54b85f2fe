//! What a daemon process sets up before it runs anything: the allocator's options and the async
//! runtime (WORKER_THREADS). Shared by `sume-inbox` and the benchmark's daemons, so that what
//! is measured starts the way the daemon does.

use tokio::runtime::Runtime;

use crate::cli::CliError;
use crate::config::worker_threads_from_env;

/// mimalloc's `purge_delay` (the option's number in the `mi_option_e` of the mimalloc this
/// build links, v3): how long freed pages are kept before they go back to the system.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed pages go back to the system after 100 ms instead of mimalloc's 1 s: at 256 connections
/// the peak resident set falls from 50 to 42 MiB for no measurable throughput, where purging at
/// once costs 5% (docs/benchmarks.md, "Freed memory back sooner"). `MIMALLOC_PURGE_DELAY` set
/// in the environment wins. For a binary whose global allocator is mimalloc, first thing in
/// `main`.
pub fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one option of the allocator by its number; mimalloc reads its options
        // atomically, so this is sound at any time, and first thing in `main` no purge has
        // happened yet.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 100) };
    }
}

/// The runtime with WORKER_THREADS worker threads (default 1; a bad value is a configuration
/// error, exit 78).
pub fn runtime() -> Result<Runtime, CliError> {
    let workers = worker_threads_from_env()?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))
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
        super::tune_allocator();
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
