//! The process's open-file limit: raised at start to what the system allows, so MAX_CONNECTIONS
//! is not cut short by a soft limit left at a distribution's default (often 1024); and the
//! ports' shares of it ([`fit`]), so that sockets can never take every descriptor: a process
//! out of them accepts nothing more, on either port, and genuine deliveries wait behind
//! whoever holds the connections until BODY_TIMEOUT frees some.

/// Descriptors counted beside the ports' connections and the pool: the listeners, the LISTEN
/// connections, Sume's client, the log, the runtime's own, and the connections shed at a cap
/// still to close ([`crate::http::conns::MAX_CLOSING`] a port at most).
pub const SPARE: u64 = 256;

/// The fewest connections the admin port is left when the limit is short, so that an operator
/// can still read `/metrics` and the console.
const ADMIN_FLOOR: usize = 16;

/// The fewest connections the public port is left when the limit is short.
const PUBLIC_FLOOR: usize = 16;

/// The ports' caps: what the settings ask, or what the open-file limit leaves ([`fit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// The public port's connection cap (MAX_CONNECTIONS).
    pub connections: usize,
    /// The public port's requests in flight (MAX_IN_FLIGHT).
    pub in_flight: usize,
    /// The admin port's connection cap (MAX_ADMIN_CONNECTIONS).
    pub admin_connections: usize,
}

/// The ports' caps as the open-file `limit` lets them be, beside a pool of `pool` connections:
/// the public port gets what the pool, [`SPARE`] and the admin port's floor leave (at least
/// 16, or MAX_CONNECTIONS when smaller), and a cap so cut keeps its requests in flight below it
/// (as the settings must: a newcomer needs a connection to be answered 503 on); the admin port
/// gets what the public port leaves, at least 16. An unknown limit leaves `wanted` as it is.
pub fn fit(limit: Option<u64>, pool: usize, wanted: Caps) -> Caps {
    let Some(limit) = limit else {
        return wanted;
    };
    let pool = pool as u64;
    let room = limit.saturating_sub(pool + SPARE + ADMIN_FLOOR as u64);
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    let connections = wanted.connections.min(room.max(PUBLIC_FLOOR));
    let in_flight = if connections < wanted.connections {
        wanted.in_flight.min(connections - 1)
    } else {
        wanted.in_flight
    };
    let reserved = connections as u64 + pool + SPARE;
    Caps {
        connections,
        in_flight,
        admin_connections: admin_cap(Some(limit), reserved, wanted.admin_connections),
    }
}

/// Raises the soft RLIMIT_NOFILE to the hard limit; warns when the result cannot hold `needed`
/// descriptors. Answers the soft limit in force, `None` when it cannot be read.
pub fn raise(needed: u64) -> Option<u64> {
    match raise_to_hard() {
        Ok(limit) if limit < needed => {
            tracing::warn!(
                limit,
                needed,
                "the open-file limit cannot hold MAX_CONNECTIONS, MAX_ADMIN_CONNECTIONS and the pool: the ports' caps are cut to fit it; raise it (LimitNOFILE=, ulimit -n) or lower MAX_CONNECTIONS (and MAX_IN_FLIGHT below it)"
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
/// leaves once `reserved` descriptors (the public port's cap, the pool, [`SPARE`]) are set
/// aside, and never under 16 (or `wanted`, when smaller). An unknown limit leaves `wanted` as
/// it is.
fn admin_cap(limit: Option<u64>, reserved: u64, wanted: usize) -> usize {
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

    #[test]
    fn the_public_port_gets_what_the_pool_the_spare_and_the_admin_floor_leave() {
        let defaults = Caps {
            connections: 10_000,
            in_flight: 1_024,
            admin_connections: 1_100,
        };
        // Room for everything: the settings as they are.
        assert_eq!(fit(Some(65_536), 16, defaults), defaults);
        assert_eq!(fit(None, 16, defaults), defaults);
        // `ulimit -n 400`: 400 - 16 - 256 - 16 leaves 112 connections, 111 of them in flight,
        // and the admin port its floor.
        let cut = Caps {
            connections: 112,
            in_flight: 111,
            admin_connections: ADMIN_FLOOR,
        };
        assert_eq!(fit(Some(400), 16, defaults), cut);
        // 1,024: 736 connections; MAX_IN_FLIGHT kept below them.
        let fitted = fit(Some(1_024), 16, defaults);
        assert_eq!((fitted.connections, fitted.in_flight), (736, 735));
        // 4,096: 3,808 connections, MAX_IN_FLIGHT whole (below them already).
        let fitted = fit(Some(4_096), 16, defaults);
        assert_eq!((fitted.connections, fitted.in_flight), (3_808, 1_024));
        // 12,000: the public port whole, the admin port cut to what is left.
        let fitted = fit(Some(12_000), 16, defaults);
        assert_eq!(
            (fitted.connections, fitted.admin_connections),
            (10_000, 1_100)
        );
        let fitted = fit(Some(11_000), 16, defaults);
        assert_eq!(
            (fitted.connections, fitted.admin_connections),
            (10_000, 728)
        );
        // Nothing left: floors, never more than asked.
        let fitted = fit(Some(256), 16, defaults);
        assert_eq!((fitted.connections, fitted.in_flight), (PUBLIC_FLOOR, 15));
        let small = Caps {
            connections: 8,
            in_flight: 4,
            admin_connections: 3,
        };
        assert_eq!(fit(Some(256), 16, small), small);
    }
}
