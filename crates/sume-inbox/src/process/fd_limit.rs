//! The process's open-file limit: raised at start to what the system allows, so MAX_CONNECTIONS
//! is not cut short by a soft limit left at a distribution's default (often 1024).

/// Raises the soft RLIMIT_NOFILE to the hard limit; warns when the result cannot hold `needed`
/// descriptors (the public port's connections, the pool, the admin port and some to spare).
pub fn raise(needed: u64) {
    match raise_to_hard() {
        Ok(limit) if limit < needed => tracing::warn!(
            limit,
            needed,
            "the open-file limit cannot hold MAX_CONNECTIONS and the pool: raise it (LimitNOFILE=, ulimit -n) or lower MAX_CONNECTIONS"
        ),
        Ok(limit) => tracing::debug!(limit, "open-file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot read or raise the open-file limit"),
    }
}

/// Sets the soft limit to the hard one; answers the soft limit in force afterwards.
fn raise_to_hard() -> std::io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read or write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            lim = raised;
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux, not everywhere
    Ok(lim.rlim_cur as u64)
}
