//! The checks between settings that no single value can show. A broken rule names the setting
//! the operator set (of the two, the one that was set; the first when both or neither were),
//! quotes both values as written and as read, and says what would work.

use std::time::Duration;

use super::declared::*;
use super::setting::{human, size_text, Setting};
use super::values::Values;
use super::{check_plaintext, Config, ConfigError};

/// A rule between `a` and `b` that does not hold: `why` says it, in words about both.
struct Broken {
    a: &'static Setting,
    b: &'static Setting,
    why: String,
}

impl Broken {
    /// The error, naming whichever of the two the operator set.
    fn error(self, v: &Values) -> ConfigError {
        let named = if v.is_set(self.a) || !v.is_set(self.b) {
            self.a
        } else {
            self.b
        };
        ConfigError::new(named.name, self.why)
    }
}

impl Config {
    /// The checks between settings, for a configuration built in code: the first setting of a
    /// broken rule is named.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check(&Values::defaults())
    }

    /// The checks between settings, naming the one `v` shows the operator set.
    pub fn check(&self, v: &Values) -> Result<(), ConfigError> {
        if self.webhook_secrets.is_empty() {
            return Err(ConfigError::new(
                SUME_WEBHOOK_SECRET.name,
                "is required: set SUME_WEBHOOK_SECRET (or SUME_WEBHOOK_SECRET_FILE) to the webhook signing secrets, comma separated",
            ));
        }
        self.check_admin(v)?;
        check_plaintext(&self.sume_api_url, self.sume_api_allow_plaintext)?;
        self.check_database()?;
        for rule in [
            Config::ports,
            Config::connections,
            Config::timeouts,
            Config::body_memory,
            Config::polls,
            Config::lease,
            Config::tolerance,
            Config::retention,
            Config::orphans,
            Config::waits,
        ] {
            if let Some(broken) = rule(self, v) {
                return Err(broken.error(v));
            }
        }
        Ok(())
    }

    fn check_admin(&self, v: &Values) -> Result<(), ConfigError> {
        if !self.admin_addr.ip().is_loopback() && self.admin_token.is_none() {
            return Err(ConfigError::new(
                ADMIN_TOKEN.name,
                format!(
                    "is required when {}: set ADMIN_TOKEN (16+ characters), or listen on a loopback address",
                    v.quote(&ADMIN_ADDR, &self.admin_addr.to_string())
                ),
            ));
        }
        match (&self.admin_token, &self.admin_app_token) {
            (None, Some(_)) => Err(ConfigError::new(
                ADMIN_APP_TOKEN.name,
                "requires ADMIN_TOKEN: without it the admin API asks for no token at all",
            )),
            (Some(op), Some(app)) if op.expose() == app.expose() => Err(ConfigError::new(
                ADMIN_APP_TOKEN.name,
                "must differ from ADMIN_TOKEN (the operator's)",
            )),
            _ => Ok(()),
        }
    }

    /// Refuses what cannot work behind a transaction pooler: a session's work (LISTEN, the
    /// migrations' advisory lock) sent to the pooler itself.
    fn check_database(&self) -> Result<(), ConfigError> {
        for (setting, url) in [
            (&MIGRATE_DATABASE_URL, &self.database.migrate_url),
            (&LISTEN_DATABASE_URL, &self.database.listen_url),
        ] {
            if let Some(url) = url {
                let database_url = self.database_url.expose();
                self.database
                    .pooler
                    .check_direct(setting.name, url.expose(), database_url)?;
            }
        }
        Ok(())
    }

    /// The two listeners cannot share a port: the second bind would fail at start with
    /// "address in use", which names no cause.
    fn ports(&self, v: &Values) -> Option<Broken> {
        let (listen, admin) = (self.listen_addr, self.admin_addr);
        share_a_port(listen, admin).then(|| Broken {
            a: &ADMIN_ADDR,
            b: &LISTEN_ADDR,
            why: format!(
                "{} and {} take the same port: the admin API needs a port of its own (the default is 127.0.0.1:9090)",
                v.quote(&ADMIN_ADDR, &admin.to_string()),
                v.quote(&LISTEN_ADDR, &listen.to_string()),
            ),
        })
    }

    /// Each request in flight holds a connection: with MAX_IN_FLIGHT not below MAX_CONNECTIONS
    /// its limit is never reached, and a newcomer that finds every connection busy is closed
    /// at once instead of answered 503 with `Retry-After`.
    fn connections(&self, v: &Values) -> Option<Broken> {
        let (connections, in_flight) = (self.port.max_connections, self.port.max_in_flight);
        let fix = match connections {
            0 | 1 => "raise MAX_CONNECTIONS above MAX_IN_FLIGHT".to_owned(),
            _ => format!(
                "set MAX_IN_FLIGHT to {} or less, or raise MAX_CONNECTIONS",
                connections - 1
            ),
        };
        (connections <= in_flight).then(|| Broken {
            a: &MAX_CONNECTIONS,
            b: &MAX_IN_FLIGHT,
            why: format!(
                "{} is not more than {}: each request in flight holds a connection, so MAX_IN_FLIGHT would never be reached, and a newcomer finding every connection busy would be closed instead of answered 503; {fix}",
                v.quote(&MAX_CONNECTIONS, &connections.to_string()),
                v.quote(&MAX_IN_FLIGHT, &in_flight.to_string()),
            ),
        })
    }

    fn timeouts(&self, v: &Values) -> Option<Broken> {
        let (idle, header) = (self.port.idle_timeout, self.port.header_timeout);
        (idle < header).then(|| Broken {
            a: &IDLE_TIMEOUT,
            b: &HEADER_TIMEOUT,
            why: format!(
                "{} is shorter than {}: IDLE_TIMEOUT must be at least HEADER_TIMEOUT (a client may pause before its next request longer than it takes to send one)",
                v.quote(&IDLE_TIMEOUT, &human(idle)),
                v.quote(&HEADER_TIMEOUT, &human(header)),
            ),
        })
    }

    fn body_memory(&self, v: &Values) -> Option<Broken> {
        let (memory, body) = (self.port.max_body_memory, self.max_body_bytes);
        (memory < body).then(|| Broken {
            a: &MAX_BODY_MEMORY,
            b: &MAX_BODY_BYTES,
            why: format!(
                "{} is less than {}: MAX_BODY_MEMORY must be at least MAX_BODY_BYTES, or a body of that size could never be read",
                v.quote(&MAX_BODY_MEMORY, &size_text(memory)),
                v.quote(&MAX_BODY_BYTES, &size_text(body)),
            ),
        })
    }

    fn polls(&self, v: &Values) -> Option<Broken> {
        let s = &self.sweep;
        let (after, cap, give_up) = (s.poll_after, s.poll_max_interval, s.poll_give_up);
        let quote = |setting, d| v.quote(setting, &human(d));
        if cap < after {
            return Some(Broken {
                a: &POLL_MAX_INTERVAL,
                b: &POLL_AFTER,
                why: format!(
                    "{} is shorter than {}: POLL_MAX_INTERVAL caps the growing interval between polls that starts at POLL_AFTER, so it must be at least POLL_AFTER",
                    quote(&POLL_MAX_INTERVAL, cap),
                    quote(&POLL_AFTER, after),
                ),
            });
        }
        (give_up <= after).then(|| Broken {
            a: &POLL_GIVE_UP,
            b: &POLL_AFTER,
            why: format!(
                "{} is not longer than {}: a job is given up after POLL_GIVE_UP, which must come after its first poll",
                quote(&POLL_GIVE_UP, give_up),
                quote(&POLL_AFTER, after),
            ),
        })
    }

    /// A request starts only while a whole request timeout, with as much again to spare,
    /// remains of its claim: a shorter lease would let no request start at all.
    fn lease(&self, v: &Values) -> Option<Broken> {
        let (lease, timeout) = (self.sweep.lease, self.sweep.request_timeout);
        (lease <= timeout.saturating_mul(2)).then(|| Broken {
            a: &SWEEP_LEASE,
            b: &SUME_TIMEOUT,
            why: format!(
                "{} is not more than twice {}: a claim must outlive the requests made under it",
                v.quote(&SWEEP_LEASE, &human(lease)),
                v.quote(&SUME_TIMEOUT, &human(timeout)),
            ),
        })
    }

    /// A delivery replayed within WEBHOOK_TOLERANCE must still find the event it duplicates:
    /// kept for RETENTION, which must be the longer (README, "Retries and timestamps").
    fn tolerance(&self, v: &Values) -> Option<Broken> {
        let (tolerance, retention) = (self.webhook_tolerance, self.sweep.retention);
        (tolerance >= retention).then(|| Broken {
            a: &WEBHOOK_TOLERANCE,
            b: &RETENTION,
            why: format!(
                "{} is not shorter than {}: a delivery replayed within the tolerance would no \
                 longer find the event it duplicates, and would be stored and applied again; \
                 keep RETENTION longer than WEBHOOK_TOLERANCE",
                v.quote(&WEBHOOK_TOLERANCE, &human(tolerance)),
                v.quote(&RETENTION, &human(retention)),
            ),
        })
    }

    fn retention(&self, v: &Values) -> Option<Broken> {
        let s = &self.sweep;
        let quote = |setting, d: Duration| v.quote(setting, &human(d));
        if let Some(dead) = s.dead_letter_retention.filter(|d| *d < s.retention) {
            return Some(Broken {
                a: &DEAD_LETTER_RETENTION,
                b: &RETENTION,
                why: format!(
                    "{} is shorter than {}: a dead letter is a delivery answered 2xx that nobody replayed yet; keep it at least as long (or `never`)",
                    quote(&DEAD_LETTER_RETENTION, dead),
                    quote(&RETENTION, s.retention),
                ),
            });
        }
        let keep = s.job_retention?;
        let (other, d, why) = if keep < s.retention {
            (
                &RETENTION,
                s.retention,
                "a closed job's row outlives the events applied to it",
            )
        } else if keep < s.poll_give_up {
            (
                &POLL_GIVE_UP,
                s.poll_give_up,
                "a give-up may still be superseded by Sume's own status",
            )
        } else {
            return None;
        };
        Some(Broken {
            a: &JOB_RETENTION,
            b: other,
            why: format!(
                "{} is shorter than {}: {why}; keep jobs at least as long (or `off`)",
                quote(&JOB_RETENTION, keep),
                quote(other, d),
            ),
        })
    }

    /// An event is asked about after INBOX_GRACE; it may leave the inbox only after that.
    fn orphans(&self, v: &Values) -> Option<Broken> {
        let s = &self.sweep;
        (s.orphan_retention <= s.inbox_grace).then(|| Broken {
            a: &ORPHAN_RETENTION,
            b: &INBOX_GRACE,
            why: format!(
                "{} is not longer than {}: an event must wait for its job row until Sume has been asked whose job it is",
                v.quote(&ORPHAN_RETENTION, &human(s.orphan_retention)),
                v.quote(&INBOX_GRACE, &human(s.inbox_grace)),
            ),
        })
    }

    fn waits(&self, v: &Values) -> Option<Broken> {
        let w = &self.wait;
        if w.poll_interval > w.max_wait {
            return Some(Broken {
                a: &WAIT_POLL_INTERVAL,
                b: &MAX_WAIT,
                why: format!(
                    "{} is longer than {}: a polled waiter could never be woken; it must be at most MAX_WAIT",
                    v.quote(&WAIT_POLL_INTERVAL, &human(w.poll_interval)),
                    v.quote(&MAX_WAIT, &human(w.max_wait)),
                ),
            });
        }
        (self.max_admin_connections <= w.max_waiters).then(|| Broken {
            a: &MAX_ADMIN_CONNECTIONS,
            b: &MAX_WAITERS,
            why: format!(
                "{} is not more than {}: each waiter holds a connection, and the other admin requests need some too",
                v.quote(&MAX_ADMIN_CONNECTIONS, &self.max_admin_connections.to_string()),
                v.quote(&MAX_WAITERS, &w.max_waiters.to_string()),
            ),
        })
    }
}

/// Whether binding both addresses would collide: the same port (not 0, which the system picks),
/// on the same address or where one is a wildcard that covers the other (`0.0.0.0` covers every
/// IPv4 address, `[::]` every address, IPv4 too on a dual-stack system).
fn share_a_port(a: std::net::SocketAddr, b: std::net::SocketAddr) -> bool {
    use std::net::IpAddr;
    if a.port() != b.port() || a.port() == 0 {
        return false;
    }
    let covers =
        |wide: IpAddr, other: IpAddr| wide.is_unspecified() && (wide.is_ipv6() || other.is_ipv4());
    a.ip() == b.ip() || covers(a.ip(), b.ip()) || covers(b.ip(), a.ip())
}

#[cfg(test)]
mod tests {
    use super::share_a_port;

    #[test]
    fn two_listeners_collide_on_one_port_where_their_addresses_meet() {
        let collide = |a: &str, b: &str| share_a_port(a.parse().unwrap(), b.parse().unwrap());
        assert!(collide("127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(collide("0.0.0.0:8080", "127.0.0.1:8080"));
        assert!(collide("127.0.0.1:8080", "0.0.0.0:8080"));
        assert!(collide("[::]:8080", "127.0.0.1:8080"));
        assert!(collide("[::]:8080", "[::1]:8080"));
        assert!(!collide("127.0.0.1:8080", "127.0.0.1:9090"));
        assert!(!collide("127.0.0.1:8080", "10.0.0.1:8080"));
        assert!(!collide("0.0.0.0:8080", "[::1]:8080"));
        assert!(!collide("127.0.0.1:0", "127.0.0.1:0"));
    }
}
