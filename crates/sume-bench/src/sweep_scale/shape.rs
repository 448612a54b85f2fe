//! The two shapes `sume-bench sweep` measures, and the daemon's and the simulator's settings
//! for each: the issue's (600 jobs over 30 s, `POLL_MAX_INTERVAL=8s`) and the shipped settings'
//! ratios compressed sixty times (a minute of the day in a second).

use std::time::Duration;

use sume_inbox::config::{declared, Config, Values};
use sume_sim::{ListOrder, SimConfig};

/// The API key's name in `SUME_API_KEYS` and `sume.jobs.api_key`, and its secret at the
/// simulator.
pub const KEY_NAME: &str = "bench";
/// See [`KEY_NAME`].
pub const KEY_SECRET: &str = "sk_bench";

/// What a shape makes: jobs, when, how long they run, how many webhooks are lost.
#[derive(Debug, Clone)]
pub struct Shape {
    /// `issue` or `shipped`.
    pub name: &'static str,
    /// Jobs created, evenly spread over `creating`.
    pub jobs: usize,
    /// From the first create to the last.
    pub creating: Duration,
    /// Each job ends this long after its creation: uniform over the range (milliseconds).
    pub duration_ms: (u64, u64),
    /// The share of jobs whose webhook is never sent.
    pub lost: f64,
    /// Real seconds are this many seconds of the day (1 for the issue's shape, which is not
    /// scaled to a day).
    pub compression: f64,
    /// Reads counted for jobs per day from here to the end of `creating` (the steady part).
    pub warmup: Duration,
    /// The daemon's settings beside the defaults, as an operator would write them.
    pub settings: Vec<(&'static str, String)>,
}

/// The issue's shape: 600 jobs created over 30 s and registered at once, each ending 3-12 s
/// after creation, 3% of webhooks lost.
pub fn issue() -> Shape {
    Shape {
        name: "issue",
        jobs: 600,
        creating: Duration::from_secs(30),
        duration_ms: (3_000, 12_000),
        lost: 0.03,
        compression: 1.0,
        warmup: Duration::from_secs(8),
        settings: with_common(&[
            ("POLL_AFTER", "2s"),
            ("POLL_MAX_INTERVAL", "8s"),
            ("SWEEP_INTERVAL", "250ms"),
            ("INBOX_GRACE", "5s"),
        ]),
    }
}

/// The shipped settings sixty times faster: POLL_AFTER 2m, POLL_MAX_INTERVAL 30m and
/// SWEEP_INTERVAL 30s become 2s, 30s and 0.5s; jobs of 1-10 minutes run 1-10 s; 100,000 jobs a
/// day arrive at 69.4 a second; 1% of webhooks are lost. `creating` is the run's length.
pub fn shipped(creating: Duration) -> Shape {
    let rate = 100_000.0 / 86_400.0 * 60.0;
    Shape {
        name: "shipped",
        jobs: (rate * creating.as_secs_f64()).round() as usize,
        creating,
        duration_ms: (1_000, 10_000),
        lost: 0.01,
        compression: 60.0,
        warmup: Duration::from_secs(30).min(creating / 3),
        settings: with_common(&[
            ("POLL_AFTER", "2s"),
            ("POLL_MAX_INTERVAL", "30s"),
            ("SWEEP_INTERVAL", "500ms"),
            ("INBOX_GRACE", "5s"),
            ("POLL_GIVE_UP", "24m"),
        ]),
    }
}

/// What both shapes share: Sume's 100 reads a minute compressed to a second; a lease and a
/// call timeout that keep real-time margins (the database's and the loopback's latencies are
/// not compressed), SWEEP_LEASE more than twice SUME_TIMEOUT as the rule asks; the day's
/// allowance out of the way, since a UTC day cannot be compressed (the reads a day are
/// extrapolated from the run instead).
fn with_common(own: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let common = [
        ("SUME_READ_RATE", "100/1s"),
        ("SUME_TIMEOUT", "2s"),
        ("SWEEP_LEASE", "10s"),
        ("SUME_READ_DAILY", "2000000000"),
    ];
    own.iter()
        .chain(common.iter())
        .map(|(k, v)| (*k, (*v).to_owned()))
        .collect()
}

impl Shape {
    /// A setting's value in this shape.
    pub fn setting(&self, name: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// POLL_MAX_INTERVAL of this shape: the target of a lost webhook's delay.
    pub fn poll_max_interval(&self) -> Duration {
        self.setting("POLL_MAX_INTERVAL")
            .and_then(|v| humantime::parse_duration(v).ok())
            .unwrap_or(Duration::from_secs(1800))
    }

    /// The daemon's configuration: these settings and `extra` (LIST_WALKS) over the defaults,
    /// read and checked as the daemon reads its environment, with the simulator as Sume.
    pub fn daemon_config(
        &self,
        database_url: &str,
        api_url: &str,
        extra: &[(&'static str, String)],
    ) -> anyhow::Result<Config> {
        let mut values = Values::defaults();
        let keys = format!("{KEY_NAME}:{KEY_SECRET}");
        let fixed = [
            ("DATABASE_URL", database_url),
            ("SUME_WEBHOOK_SECRET", sume_sim::TEST_WEBHOOK_SECRET),
            ("SUME_API_URL", api_url),
            ("SUME_API_KEYS", keys.as_str()),
            ("LISTEN_ADDR", "127.0.0.1:0"),
            ("ADMIN_ADDR", "127.0.0.1:0"),
            ("SHUTDOWN_TIMEOUT", "5s"),
        ];
        let all = fixed
            .into_iter()
            .chain(self.settings.iter().map(|(k, v)| (*k, v.as_str())))
            .chain(extra.iter().map(|(k, v)| (*k, v.as_str())));
        for (name, value) in all {
            let setting = declared::find(name)
                .ok_or_else(|| anyhow::anyhow!("{name} is not a setting of sume-inbox"))?;
            values = values.with(setting, value);
        }
        Ok(Config::read(&values)?)
    }

    /// The simulator: Sume's 120 reads a minute compressed to a second, the list in `order`,
    /// every webhook to `webhook_url`, no fault but the lost webhooks each job's create asks
    /// for.
    pub fn sim_config(&self, webhook_url: &str, order: ListOrder) -> SimConfig {
        let mut c = SimConfig::for_tests()
            .with_key(KEY_NAME, KEY_SECRET, "mem_bench", "ws_bench")
            .with_webhook_url(webhook_url);
        c.limits.reads_per_window = 120;
        c.limits.rate_window = Duration::from_secs(1);
        c.log_capacity = 1_000;
        c.list_order = order;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_make_a_configuration_the_daemon_accepts() {
        for shape in [issue(), shipped(Duration::from_secs(120))] {
            let c = shape
                .daemon_config(
                    "postgres://u@127.0.0.1:1/db",
                    "http://127.0.0.1:9/v1",
                    &[("LIST_WALKS", "off".into())],
                )
                .unwrap_or_else(|e| panic!("{}: {e:#}", shape.name));
            assert!(!c.sweep.list_walks);
            assert_eq!(c.sweep.poll_after, Duration::from_secs(2));
            assert_eq!(c.sweep.poll_max_interval, shape.poll_max_interval());
        }
        assert_eq!(shipped(Duration::from_secs(120)).jobs, 8_333);
    }
}
