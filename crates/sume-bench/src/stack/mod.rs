//! What a run stands on: a throwaway PostgreSQL (`scripts/devpg`), the daemon and the baseline
//! as child processes, their memory from `/proc`, and enough file descriptors.
//!
//! Every process started here is stopped when its guard drops (SIGTERM, then SIGKILL after a
//! grace period), and is told by the kernel to stop if this process dies first.
//!
//! `postgres.rs` runs the cluster, `process.rs` the servers, `usage.rs` reads what they use;
//! this file raises the open-file limit.

mod postgres;
mod process;
mod usage;

use anyhow::bail;

pub use postgres::{postmaster_pid, quietly, run_devpg, start_fresh, Postgres};
pub use process::{
    daemon_settings, free_port, spawn_baseline, spawn_daemon, Proc, DAEMON_TUNABLES,
};
pub use usage::{cluster_cpu_time, cpu_time, memory, Memory};

/// Raises the open-file limit to what `needed` descriptors take (children inherit it).
pub fn ensure_fd_limit(needed: u64) -> anyhow::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read only the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            bail!("getrlimit(RLIMIT_NOFILE) failed");
        }
        if lim.rlim_cur < needed {
            lim.rlim_cur = needed.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    if lim.rlim_cur < needed {
        bail!(
            "the open-file limit is {} and this run needs about {needed}: raise it (`ulimit -n {needed}`)",
            lim.rlim_cur
        );
    }
    Ok(lim.rlim_cur)
}
