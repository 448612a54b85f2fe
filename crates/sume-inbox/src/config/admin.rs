//! Settings of the admin API beyond its address: the rules its two tokens follow, and the
//! waiters of `GET /v1/jobs/{id}?wait=` (how many, how long, what wakes them).

use std::time::Duration;

use sume_wire::Secret;

use super::{parse_duration, ConfigError};

/// ADMIN_APP_TOKEN needs ADMIN_TOKEN (without it no token is asked for at all) and must differ
/// from it.
pub(super) fn check_admin_tokens(
    operator: Option<&Secret>,
    app: Option<&Secret>,
) -> Result<(), ConfigError> {
    match (operator, app) {
        (None, Some(_)) => Err(ConfigError::new(
            "ADMIN_APP_TOKEN",
            "requires ADMIN_TOKEN: without it the admin API asks for no token at all",
        )),
        (Some(op), Some(app)) if op.expose() == app.expose() => Err(ConfigError::new(
            "ADMIN_APP_TOKEN",
            "must differ from ADMIN_TOKEN (the operator's)",
        )),
        _ => Ok(()),
    }
}

/// What wakes the waiters of an instance when a job closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wakeup {
    /// One LISTEN `sume_job_closed` connection per instance, outside the pool; closes made by
    /// any instance wake it. While that connection cannot be had, the waiters are polled.
    Listen,
    /// No LISTEN (where notifications are unavailable, e.g. behind a transaction-pooling
    /// PgBouncer): one query per interval asks which waited-for jobs are closed.
    Poll,
}

/// WAIT_*, MAX_WAITERS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitConfig {
    /// MAX_WAITERS: requests waiting at once on this instance; beyond, 503 with Retry-After.
    pub max_waiters: usize,
    /// MAX_WAIT: the longest `wait` a request may ask for.
    pub max_wait: Duration,
    /// WAIT_WAKEUP: `listen` or `poll`.
    pub wakeup: Wakeup,
    /// WAIT_POLL_INTERVAL: how often the waiters are polled, when they are.
    pub poll_interval: Duration,
}

impl Default for WaitConfig {
    fn default() -> Self {
        WaitConfig {
            max_waiters: 1000,
            max_wait: Duration::from_secs(60),
            wakeup: Wakeup::Listen,
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// `listen` or `poll`.
pub fn parse_wakeup(name: &'static str, raw: &str) -> Result<Wakeup, ConfigError> {
    match raw.trim() {
        "listen" => Ok(Wakeup::Listen),
        "poll" => Ok(Wakeup::Poll),
        other => Err(ConfigError::new(
            name,
            format!("must be `listen` or `poll`, not {other:?}"),
        )),
    }
}

impl WaitConfig {
    /// Reads the four settings; a poll interval longer than MAX_WAIT could never wake a waiter.
    pub fn parse(
        max_waiters: &str,
        max_wait: &str,
        wakeup: &str,
        poll_interval: &str,
    ) -> Result<WaitConfig, ConfigError> {
        let config = WaitConfig {
            max_waiters: super::parse_count("MAX_WAITERS", max_waiters, 0)?,
            max_wait: parse_duration("MAX_WAIT", max_wait)?,
            wakeup: parse_wakeup("WAIT_WAKEUP", wakeup)?,
            poll_interval: parse_duration("WAIT_POLL_INTERVAL", poll_interval)?,
        };
        if config.poll_interval.is_zero() {
            return Err(ConfigError::new(
                "WAIT_POLL_INTERVAL",
                "must be more than 0",
            ));
        }
        if config.poll_interval > config.max_wait {
            return Err(ConfigError::new(
                "WAIT_POLL_INTERVAL",
                "must be at most MAX_WAIT, or a polled waiter could never be woken",
            ));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_settings_that_cannot_work_are_refused_by_name() {
        let ok = WaitConfig::parse("10", "30s", "poll", "1s").unwrap();
        assert_eq!(ok.wakeup, Wakeup::Poll);
        assert_eq!(ok.max_waiters, 10);
        for (args, name) in [
            (["x", "30s", "listen", "1s"], "MAX_WAITERS"),
            (["10", "soon", "listen", "1s"], "MAX_WAIT"),
            (["10", "30s", "notify", "1s"], "WAIT_WAKEUP"),
            (["10", "30s", "listen", "0s"], "WAIT_POLL_INTERVAL"),
            (["10", "30s", "listen", "1m"], "WAIT_POLL_INTERVAL"),
        ] {
            let e = WaitConfig::parse(args[0], args[1], args[2], args[3]).unwrap_err();
            assert_eq!(e.name, name, "{args:?}");
        }
    }
}
