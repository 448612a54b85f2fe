//! The simulator's settings: one [`SimConfig`], every knob a flag with a `SIM_...` variable.
//!
//! The `sume-dev` binary flattens [`SimConfig`] into its `sim` subcommand; tests build one with
//! [`SimConfig::for_tests`] (millisecond timings, no faults) and adjust the public fields.
//! [`SimConfig::validate`] runs at start and names the setting it refuses.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

pub use crate::choices::{BodyShape, ListOrder, RetryTimestamp};
use crate::duration::{parse_duration, DurationRange};
use crate::faults::{probability, FaultError, Faults};
use crate::keys::{load_keys_file, KeyError, KeySpec, Keyring};
use crate::wire::Secret;

/// The webhook secret [`SimConfig::for_tests`] signs with.
pub const TEST_WEBHOOK_SECRET: &str = "whsec_sim_test";

/// Why the simulator refused to start.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// Neither `--key` nor `--keys-file` gave a key, so no request could ever be served.
    #[error("no API keys: pass --key NAME=SECRET@MEMBER/WORKSPACE (SIM_KEYS) or --keys-file")]
    NoKeys,
    /// A key spec or the keys file was refused; see [`KeyError`].
    #[error(transparent)]
    Keys(#[from] KeyError),
    /// No signing secret, so no webhook could be signed.
    #[error("no webhook secret: pass --webhook-secret (SIM_WEBHOOK_SECRET)")]
    NoWebhookSecret,
    /// `--webhook-url`, as given, is not an absolute `http` or `https` URL.
    #[error("--webhook-url {0:?} is not an http(s) URL")]
    BadWebhookUrl(String),
    /// A count or duration that must be positive is zero; holds the flag's name without `--`.
    #[error("--{0} must be at least 1")]
    Zero(&'static str),
    /// `--webhook-backoff-factor` is below 1 or not a finite number, so waits would shrink.
    #[error("--webhook-backoff-factor is {0}, it must be at least 1")]
    BadBackoffFactor(f64),
    /// A fault setting was refused; see [`FaultError`].
    #[error("fault settings: {0}")]
    Faults(#[from] FaultError),
}

/// How long jobs take: many short ones and a tail of long ones.
#[derive(clap::Args, Debug, Clone, PartialEq)]
#[command(next_help_heading = "Job durations")]
pub struct JobTiming {
    /// Duration of a short job, from creation to its terminal status (MIN..MAX or one value).
    #[arg(
        long,
        env = "SIM_DURATION_SHORT",
        default_value = "5s..45s",
        value_name = "MIN..MAX"
    )]
    pub duration_short: DurationRange,
    /// Share of jobs drawn from --duration-long instead.
    #[arg(long, env = "SIM_LONG_FRACTION", default_value_t = 0.1, value_name = "P", value_parser = probability)]
    pub long_fraction: f64,
    /// Duration of a long job.
    #[arg(
        long,
        env = "SIM_DURATION_LONG",
        default_value = "2m..8m",
        value_name = "MIN..MAX"
    )]
    pub duration_long: DurationRange,
    /// Share of a job's duration it spends `queued` before `running`.
    #[arg(long, env = "SIM_QUEUED_FRACTION", default_value_t = 0.2, value_name = "P", value_parser = probability)]
    pub queued_fraction: f64,
}

/// Per-key request budgets, reads and creates counted apart, in fixed windows.
#[derive(clap::Args, Debug, Clone, PartialEq)]
#[command(next_help_heading = "Rate limits")]
pub struct RateLimits {
    /// Reads (every GET under the API) a key may make per window.
    #[arg(long, env = "SIM_READS_PER_WINDOW", default_value_t = 120)]
    pub reads_per_window: u32,
    /// Creates (every POST under the API) a key may make per window.
    #[arg(long, env = "SIM_CREATES_PER_WINDOW", default_value_t = 10)]
    pub creates_per_window: u32,
    /// Length of a window; windows are aligned to the simulator's start.
    #[arg(long, env = "SIM_RATE_WINDOW", default_value = "60s", value_name = "DURATION", value_parser = parse_duration)]
    pub rate_window: Duration,
    /// Reads a key may make per day (Sume documents 10,000); past it, 429 until the day ends.
    #[arg(long, env = "SIM_READS_PER_DAY", default_value_t = 10_000)]
    pub reads_per_day: u32,
    /// Length of the daily cap's day (shorten it to reach its end in a test); aligned to the
    /// simulator's start.
    #[arg(long, env = "SIM_READ_DAY", default_value = "24h", value_name = "DURATION", value_parser = parse_duration)]
    pub read_day: Duration,
}

/// How webhooks are delivered and retried.
#[derive(clap::Args, Debug, Clone, PartialEq)]
#[command(next_help_heading = "Webhook delivery")]
pub struct DeliverySettings {
    /// Attempts per event before giving up (non-2xx and timeouts each spend one).
    #[arg(long, env = "SIM_WEBHOOK_ATTEMPTS", default_value_t = 10)]
    pub webhook_attempts: u32,
    /// Wait after the first failed attempt.
    #[arg(long, env = "SIM_WEBHOOK_BACKOFF_BASE", default_value = "5s", value_name = "DURATION", value_parser = parse_duration)]
    pub webhook_backoff_base: Duration,
    /// Each further wait is the previous one times this.
    #[arg(long, env = "SIM_WEBHOOK_BACKOFF_FACTOR", default_value_t = 2.0)]
    pub webhook_backoff_factor: f64,
    /// No wait is longer than this.
    #[arg(long, env = "SIM_WEBHOOK_BACKOFF_CAP", default_value = "1h", value_name = "DURATION", value_parser = parse_duration)]
    pub webhook_backoff_cap: Duration,
    /// An attempt that has no complete answer by then is a timeout.
    #[arg(long, env = "SIM_WEBHOOK_TIMEOUT", default_value = "15s", value_name = "DURATION", value_parser = parse_duration)]
    pub webhook_timeout: Duration,
    /// Pause between a delivered event and its duplicate (the duplicate fault).
    #[arg(long, env = "SIM_DUPLICATE_DELAY", default_value = "2s", value_name = "DURATION", value_parser = parse_duration)]
    pub duplicate_delay: Duration,
    /// Pause between the terminal event and the late `job.running` one.
    #[arg(long, env = "SIM_LATE_DELAY", default_value = "2s", value_name = "DURATION", value_parser = parse_duration)]
    pub late_delay: Duration,
    /// Attempts in flight at once, over all jobs.
    #[arg(long, env = "SIM_MAX_CONCURRENT_DELIVERIES", default_value_t = 512)]
    pub max_concurrent_deliveries: usize,
    /// The timestamp a retry is signed with: `fresh` (now, re-signed) or `first` (the first
    /// attempt's, the same signature); Sume's docs do not say which.
    #[arg(long, env = "SIM_RETRY_TIMESTAMP", value_enum, default_value = "fresh")]
    pub retry_timestamp: RetryTimestamp,
}

impl DeliverySettings {
    /// The wait after failed attempt number `attempt` (1-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(64) as i32;
        let secs = self.webhook_backoff_base.as_secs_f64() * self.webhook_backoff_factor.powi(exp);
        let cap = self.webhook_backoff_cap.as_secs_f64();
        Duration::from_secs_f64(secs.min(cap).max(0.0))
    }
}

fn parse_secret(s: &str) -> Result<Secret, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("an empty webhook secret".to_owned());
    }
    Ok(Secret::new(s))
}

/// Serve a simulator of Sume's API: jobs, rate limits, signed webhooks, injected faults.
///
/// Every setting is a flag and a `SIM_...` variable. `Debug` never prints a secret.
#[derive(clap::Args, Debug, Clone)]
pub struct SimConfig {
    /// Address the binary binds; `run` itself serves whatever listener it is given.
    #[arg(long, env = "SIM_LISTEN", default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// An API key, repeatable: NAME=SECRET@MEMBER/WORKSPACE (comma separated in SIM_KEYS).
    #[arg(
        long = "key",
        env = "SIM_KEYS",
        value_delimiter = ',',
        hide_env_values = true,
        value_name = "NAME=SECRET@MEMBER/WORKSPACE"
    )]
    pub keys: Vec<KeySpec>,
    /// A file of keys: JSON {"keys":[{"name","secret","member","workspace"}]}, or SIM_KEYS's
    /// NAME=SECRET@MEMBER/WORKSPACE, comma or line separated.
    #[arg(long, env = "SIM_KEYS_FILE")]
    pub keys_file: Option<PathBuf>,
    /// Where a job's webhook goes when its create body names no `webhook_url`.
    #[arg(long, env = "SIM_WEBHOOK_URL")]
    pub webhook_url: Option<String>,
    /// Webhook signing secrets, comma separated; every one signs (one `v1=` each).
    #[arg(long = "webhook-secret", env = "SIM_WEBHOOK_SECRET", value_delimiter = ',',
          value_parser = parse_secret, hide_env_values = true, value_name = "SECRET[,SECRET]")]
    pub webhook_secrets: Vec<Secret>,
    /// Webhook body shape: guide, envelope or mixed (per job).
    #[arg(long, env = "SIM_BODY_SHAPE", value_enum, default_value = "envelope")]
    pub body_shape: BodyShape,
    // Doc comments on flattened fields do not reach `--help`: each struct's own fields do.
    /// How long jobs take and how long they stay `queued`.
    #[command(flatten)]
    pub timing: JobTiming,
    /// Each key's read and create budgets.
    #[command(flatten)]
    pub limits: RateLimits,
    /// Webhook retries, timeouts and the pauses before duplicate and late events.
    #[command(flatten)]
    pub delivery: DeliverySettings,
    /// The fault probabilities at start; `PATCH /sim/faults` changes them while it runs.
    #[command(flatten)]
    pub faults: Faults,
    /// Entries kept by each inspection log (requests, deliveries); the oldest go first.
    #[arg(long, env = "SIM_LOG_CAPACITY", default_value_t = 1_000_000)]
    pub log_capacity: usize,
    /// The order of `GET /jobs`: newest (created) first, the assumption; oldest first; or most
    /// recently updated first.
    #[arg(long, env = "SIM_LIST_ORDER", value_enum, default_value = "newest")]
    pub list_order: ListOrder,
}

impl SimConfig {
    /// Millisecond timings, no faults, no rate limit in practice, no keys yet (add them with
    /// [`SimConfig::with_key`]), signing with [`TEST_WEBHOOK_SECRET`].
    pub fn for_tests() -> SimConfig {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            keys: Vec::new(),
            keys_file: None,
            webhook_url: None,
            webhook_secrets: vec![Secret::new(TEST_WEBHOOK_SECRET)],
            body_shape: BodyShape::Envelope,
            timing: JobTiming {
                duration_short: DurationRange::millis(20, 100),
                long_fraction: 0.0,
                duration_long: DurationRange::millis(300, 600),
                queued_fraction: 0.2,
            },
            limits: RateLimits {
                reads_per_window: 1_000_000,
                creates_per_window: 1_000_000,
                rate_window: Duration::from_secs(1),
                reads_per_day: 1_000_000_000,
                read_day: Duration::from_secs(86_400),
            },
            delivery: DeliverySettings {
                webhook_attempts: 10,
                webhook_backoff_base: Duration::from_millis(5),
                webhook_backoff_factor: 2.0,
                webhook_backoff_cap: Duration::from_millis(50),
                webhook_timeout: Duration::from_secs(2),
                duplicate_delay: Duration::from_millis(5),
                late_delay: Duration::from_millis(5),
                max_concurrent_deliveries: 256,
                retry_timestamp: RetryTimestamp::Fresh,
            },
            faults: Faults::none(),
            log_capacity: 1_000_000,
            list_order: ListOrder::Newest,
        }
    }

    /// Adds a key `name` with `secret`, owned by `member` of `workspace`.
    pub fn with_key(mut self, name: &str, secret: &str, member: &str, workspace: &str) -> Self {
        self.keys
            .push(KeySpec::new(name, secret, member, workspace));
        self
    }

    /// Sends each job's webhook to `url` unless its create body names its own `webhook_url`
    /// (a test points this at its receiver).
    pub fn with_webhook_url(mut self, url: impl Into<String>) -> Self {
        self.webhook_url = Some(url.into());
        self
    }

    /// Replaces the fault settings in force at start ([`SimConfig::for_tests`] has none).
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Checks every setting (reading --keys-file), so a bad one fails the start by name.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.keyring().map(drop)
    }

    /// Validates, and builds the keyring the API authenticates against.
    pub(crate) fn keyring(&self) -> Result<Keyring, ConfigError> {
        let mut specs = self.keys.clone();
        if let Some(path) = &self.keys_file {
            specs.extend(load_keys_file(path)?);
        }
        let ring = Keyring::new(&specs)?;
        if ring.is_empty() {
            return Err(ConfigError::NoKeys);
        }
        if self.webhook_secrets.is_empty() {
            return Err(ConfigError::NoWebhookSecret);
        }
        if let Some(url) = &self.webhook_url {
            if !is_http_url(url) {
                return Err(ConfigError::BadWebhookUrl(url.clone()));
            }
        }
        let counts = [
            ("reads-per-window", self.limits.reads_per_window as u128),
            ("creates-per-window", self.limits.creates_per_window as u128),
            ("rate-window", self.limits.rate_window.as_nanos()),
            ("reads-per-day", self.limits.reads_per_day as u128),
            ("read-day", self.limits.read_day.as_nanos()),
            ("webhook-attempts", self.delivery.webhook_attempts as u128),
            ("webhook-timeout", self.delivery.webhook_timeout.as_nanos()),
            (
                "max-concurrent-deliveries",
                self.delivery.max_concurrent_deliveries as u128,
            ),
            ("log-capacity", self.log_capacity as u128),
        ];
        if let Some((name, _)) = counts.iter().find(|(_, n)| *n == 0) {
            return Err(ConfigError::Zero(name));
        }
        let factor = self.delivery.webhook_backoff_factor;
        if !factor.is_finite() || factor < 1.0 {
            return Err(ConfigError::BadBackoffFactor(factor));
        }
        self.faults.validate()?;
        Ok(ring)
    }
}

/// Whether `url` parses as an absolute http or https URL.
pub fn is_http_url(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimConfig,
    }

    #[test]
    fn flags_parse_and_secrets_stay_hidden() {
        let cli = Cli::try_parse_from([
            "sim",
            "--key",
            "alice=sk_live_alice@mem_alice/ws_acme",
            "--key",
            "bob=sk_live_bob@mem_bob/ws_acme",
            "--webhook-secret",
            "whsec_new,whsec_old",
            "--duration-short",
            "20ms..200ms",
            "--rate-window",
            "2s",
            "--fault-status-429",
            "0.5",
        ])
        .unwrap();
        let c = cli.sim;
        assert_eq!(c.keys.len(), 2);
        assert_eq!(c.webhook_secrets.len(), 2);
        assert_eq!(c.timing.duration_short, DurationRange::millis(20, 200));
        assert_eq!(c.limits.rate_window, Duration::from_secs(2));
        assert_eq!(c.limits.reads_per_window, 120);
        assert_eq!(c.delivery.webhook_attempts, 10);
        assert_eq!(c.faults.status_429, 0.5);
        let shown = format!("{c:?}");
        for secret in ["sk_live_alice", "sk_live_bob", "whsec_new", "whsec_old"] {
            assert!(!shown.contains(secret), "Debug leaks {secret}");
        }
        c.validate().unwrap();
        assert!(Cli::try_parse_from(["sim", "--fault-drop", "1.5"]).is_err());
    }

    #[test]
    fn validation_names_the_setting() {
        let base = SimConfig::for_tests().with_key("a", "sk", "m", "w");
        assert!(matches!(
            SimConfig::for_tests().validate(),
            Err(ConfigError::NoKeys)
        ));
        let mut c = base.clone();
        c.webhook_secrets.clear();
        assert!(matches!(c.validate(), Err(ConfigError::NoWebhookSecret)));
        let mut c = base.clone();
        c.limits.reads_per_window = 0;
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("--reads-per-window"), "{err}");
        let c = base.clone().with_webhook_url("ftp://x");
        assert!(matches!(c.validate(), Err(ConfigError::BadWebhookUrl(_))));
        base.validate().unwrap();
    }

    #[test]
    fn backoff_grows_then_caps() {
        let d = SimConfig::for_tests().delivery;
        let waits: Vec<u128> = (1..=6).map(|n| d.backoff(n).as_millis()).collect();
        assert_eq!(waits, vec![5, 10, 20, 40, 50, 50]);
    }
}
