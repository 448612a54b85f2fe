//! The process's open-file limit: raised at start to what the system allows, so MAX_CONNECTIONS
//! is not cut short by a soft limit left at a distribution's default (often 1024); and the
//! admin port's share of it, so that admin sockets can never take the descriptors the public
//! port and the pool need.

/// Descriptors counted beside the ports' connections and the pool: the listeners, the LISTEN
/// connections, Sume's client, the log and the runtime's own.
pub const SPARE: u64 = 256;

/// The fewest connections the admin port is left when the limit is short, so that an operator
/// can still read `/metrics` and the console.
const ADMIN_FLOOR: usize = 16;

/// Raises the soft RLIMIT_NOFILE to the hard limit; warns when the result cannot hold `needed`
/// descriptors. Answers the soft limit in force, `None` when it cannot be read.
pub fn raise(needed: u64) -> Option<u64> {
    match raise_to_hard() {
        Ok(limit) if limit < needed => {
            tracing::warn!(
                limit,
                needed,
                "the open-file limit cannot hold MAX_CONNECTIONS, MAX_ADMIN_CONNECTIONS and the pool: raise it (LimitNOFILE=, ulimit -n) or lower MAX_CONNECTIONS"
            );
            Some(limit)
        }
        Ok(limit) => {
            tracing::debug!(limit, "open-file limit");
            Some(limit)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise the open-file limit");
            None
        }
    }
}

/// The admin port's connection cap: `wanted` (MAX_ADMIN_CONNECTIONS), cut to what `limit`
/// leaves once `reserved` descriptors (the public port's MAX_CONNECTIONS, the pool, [`SPARE`])
/// are set aside, and never under 16 (or `wanted`, when smaller). An unknown
/// limit leaves `wanted` as it is.
pub fn admin_cap(limit: Option<u64>, reserved: u64, wanted: usize) -> usize {
    let Some(limit) = limit else {
        return wanted;
    };
    let room = usize::try_from(limit.saturating_sub(reserved)).unwrap_or(usize::MAX);
    wanted.min(room.max(ADMIN_FLOOR))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_port_gets_only_what_the_public_port_and_the_pool_leave() {
        // Room for everything: the setting as it is.
        assert_eq!(admin_cap(Some(65_536), 10_000 + 20 + SPARE, 1_100), 1_100);
        // A limit of 12,000 with the defaults' 10,276 set aside leaves 1,724: still enough.
        assert_eq!(admin_cap(Some(12_000), 10_276, 1_100), 1_100);
        // 11,000 leaves 724: the admin port is cut to it, the public port keeps its own.
        assert_eq!(admin_cap(Some(11_000), 10_276, 1_100), 724);
        // Nothing left: a floor for the operator, never more than asked.
        assert_eq!(admin_cap(Some(1_024), 10_276, 1_100), ADMIN_FLOOR);
        assert_eq!(admin_cap(Some(1_024), 10_276, 3), 3);
        assert_eq!(admin_cap(None, 10_276, 1_100), 1_100);
    }
}
