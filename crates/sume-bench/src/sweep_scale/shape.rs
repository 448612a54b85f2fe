//! The two shapes `sume-bench sweep` measures, and the daemon's and the simulator's settings
//! for each: the issue's (600 jobs over 30 s, `POLL_MAX_INTERVAL=8s`) and the shipped settings'
//! ratios compressed sixty times (a minute of the day in a second), some jobs running for hours
//! in the mix.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sume_inbox::config::{declared, Config, Values};
use sume_inbox::decisions::walk_choice::until_utc_midnight;
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
    /// Jobs that run far longer, mixed in (`None`: every job runs `duration_ms`).
    pub long: Option<LongJobs>,
    /// The share of jobs whose webhook is never sent.
    pub lost: f64,
    /// Real seconds are this many seconds of the day (1 for the issue's shape, which is not
    /// scaled to a day).
    pub compression: f64,
    /// Reads counted for jobs per day from here to the end of `creating` (the steady part).
    pub warmup: Duration,
    /// The reads a day per key the daemon keeps to, at `compression` (SUME_READ_DAILY as the
    /// compressed day sees it: [`Shape::read_daily`]); `None`: the day's allowance out of the
    /// way.
    pub reads_a_day: Option<u32>,
    /// The daemon's settings beside the defaults, as an operator would write them.
    pub settings: Vec<(&'static str, String)>,
}

/// Jobs running for hours among jobs of minutes: each walk that looks for one of them reads the
/// list back to it.
#[derive(Debug, Clone, Copy)]
pub struct LongJobs {
    /// One such job after every `every` of the others.
    pub every: usize,
    /// How long each runs: uniform over the range (milliseconds).
    pub duration_ms: (u64, u64),
}

/// The issue's shape: 600 jobs created over 30 s and registered at once, each ending 3-12 s
/// after creation, 3% of webhooks lost.
pub fn issue() -> Shape {
    Shape {
        name: "issue",
        jobs: 600,
        creating: Duration::from_secs(30),
        duration_ms: (3_000, 12_000),
        long: None,
        lost: 0.03,
        compression: 1.0,
        warmup: Duration::from_secs(8),
        reads_a_day: None,
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
/// day arrive at 69.4 a second, and one more after every 200 runs 1 to 3 hours (1-3 minutes);
/// 1% of webhooks are lost; the reads are paced to the shipped 9,000 a day. `creating` is the
/// run's length.
pub fn shipped(creating: Duration) -> Shape {
    let rate = 100_000.0 / 86_400.0 * 60.0;
    let long = LongJobs {
        every: 200,
        duration_ms: (60_000, 180_000),
    };
    let short = (rate * creating.as_secs_f64()).round() as usize;
    Shape {
        name: "shipped",
        jobs: short + short / long.every,
        creating,
        duration_ms: (1_000, 10_000),
        long: Some(long),
        lost: 0.01,
        compression: 60.0,
        warmup: Duration::from_secs(30).min(creating / 3),
        reads_a_day: Some(9_000),
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
/// not compressed), SWEEP_LEASE more than twice SUME_TIMEOUT as the rule asks. The day's
/// allowance is set for each trial ([`Shape::read_daily`]).
fn with_common(own: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let common = [
        ("SUME_READ_RATE", "100/1s"),
        ("SUME_TIMEOUT", "2s"),
        ("SWEEP_LEASE", "10s"),
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

    /// The longest a planned job runs.
    pub fn longest(&self) -> Duration {
        let long = self.long.map_or(0, |l| l.duration_ms.1);
        Duration::from_millis(self.duration_ms.1.max(long))
    }

    /// SUME_READ_DAILY for a trial that starts at `now`. The daemon's walks keep to the reads
    /// left today over the time to UTC midnight, which no compression shortens; so the
    /// allowance is [`Shape::reads_a_day`] for each compressed day left until midnight, and
    /// the pace is the one the shipped allowance sets over a whole day. Without
    /// `reads_a_day`, out of the way: 2,000,000,000.
    pub fn read_daily(&self, now: DateTime<Utc>) -> u64 {
        match self.reads_a_day {
            Some(a_day) => {
                let days = until_utc_midnight(now).as_secs_f64() * self.compression / 86_400.0;
                (f64::from(a_day) * days).ceil() as u64
            }
            None => 2_000_000_000,
        }
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
        assert_eq!(shipped(Duration::from_secs(120)).jobs, 8_333 + 41);
    }

    #[test]
    fn the_shipped_allowance_keeps_the_pace_of_a_compressed_day() {
        let at = |t: &str| format!("2026-12-01T{t}Z").parse::<DateTime<Utc>>().unwrap();
        let shipped = shipped(Duration::from_secs(120));
        // Twelve hours to midnight are 30 days sixty times faster: 9,000 reads each.
        assert_eq!(shipped.read_daily(at("12:00:00")), 270_000);
        assert_eq!(shipped.read_daily(at("23:00:00")), 22_500);
        assert_eq!(issue().read_daily(at("12:00:00")), 2_000_000_000);
    }
}
