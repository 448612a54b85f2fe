//! Settings of `sume-inbox serve`: read from the environment (flags mirror every variable),
//! validated once at start, with an error that names the setting at fault.
//!
//! Secrets (webhook secrets, API keys, the database URL's password, the admin token) are held
//! in [`Secret`] and never reach a log line or a `Debug` print.

use std::net::SocketAddr;
use std::time::Duration;

use sume_wire::Secret;
use thiserror::Error;

mod admin;
mod database;
mod parse;
mod retention;
pub mod secret_files;
use admin::check_admin_tokens;
pub use admin::{parse_wakeup, WaitConfig, Wakeup};
pub use database::*;
pub use parse::*;
pub use retention::*;

/// A setting that is missing or malformed. The message names it.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{name}: {problem}")]
pub struct ConfigError {
    /// The setting's name as the user sets it (`WEBHOOK_TOLERANCE`, `--older-than`).
    pub name: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl ConfigError {
    /// A problem with the setting `name`.
    pub fn new(name: &'static str, problem: impl Into<String>) -> Self {
        ConfigError {
            name,
            problem: problem.into(),
        }
    }
}

/// A named Sume API key. The name is what `sume.jobs.api_key` holds; the key never leaves
/// memory except in an `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The name jobs carry (`sume.jobs.api_key`) and logs and metrics use.
    pub name: String,
    /// The key itself.
    pub key: Secret,
}

/// Everything `serve` needs, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// DATABASE_URL (it may hold a password).
    pub database_url: Secret,
    /// DB_POOL_SIZE: connections in this instance's pool.
    pub db_pool_size: usize,
    /// DB_POOLER, MIGRATE_DATABASE_URL, LISTEN_DATABASE_URL.
    pub database: DatabaseRoutes,
    /// SUME_WEBHOOK_SECRET: any of them verifies a delivery (rotation).
    pub webhook_secrets: Vec<Secret>,
    /// SUME_API_URL: the base of Sume's API, without a trailing `/`.
    pub sume_api_url: String,
    /// SUME_API_ALLOW_PLAINTEXT: an `http://` SUME_API_URL to another host than this one is
    /// refused unless this is set (the API keys would travel in clear).
    pub sume_api_allow_plaintext: bool,
    /// SUME_API_KEYS (or SUME_API_KEY as `default`); none: the sweep asks Sume nothing.
    pub api_keys: Vec<ApiKey>,
    /// LISTEN_ADDR: the webhook and the health checks.
    pub listen_addr: SocketAddr,
    /// ADMIN_ADDR: the admin API and `/metrics`.
    pub admin_addr: SocketAddr,
    /// ADMIN_TOKEN: the bearer token of the admin API; required off loopback.
    pub admin_token: Option<Secret>,
    /// ADMIN_APP_TOKEN: a token for the application's share of the admin API only (register,
    /// read, wait, the feed); requires ADMIN_TOKEN.
    pub admin_app_token: Option<Secret>,
    /// ADMIN_HOSTS: the `Host` names the admin API answers besides its own address.
    pub admin_hosts: Vec<String>,
    /// WEBHOOK_TOLERANCE: how far a signed timestamp may be from now.
    pub webhook_tolerance: Duration,
    /// MAX_BODY_BYTES: the largest webhook body taken (413 beyond).
    pub max_body_bytes: usize,
    /// How the public port (LISTEN_ADDR) treats slow and numerous clients.
    pub port: PortConfig,
    /// The ingest writers.
    pub ingest: IngestConfig,
    /// The attach task.
    pub attach: AttachConfig,
    /// The sweep's services.
    pub sweep: SweepConfig,
    /// SHUTDOWN_TIMEOUT: how long shutdown waits for in-flight work.
    pub shutdown_timeout: Duration,
    /// The waiters of `GET /v1/jobs/{id}?wait=`.
    pub wait: WaitConfig,
    /// The heartbeat and per-minute counters (no setting: a minute; tests shorten it).
    pub fleet: crate::actors::heartbeat::FleetConfig,
}

impl Config {
    /// A daemon on this machine with `serve`'s defaults: both listeners on a free loopback
    /// port, the given database and webhook secret, no Sume keys (so no sweep requests). Tests,
    /// the demo and the benchmark start from this and change what they study.
    pub fn local(database_url: &str, webhook_secret: &str) -> Config {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        Config {
            database_url: Secret::new(database_url),
            db_pool_size: 16,
            database: DatabaseRoutes::default(),
            webhook_secrets: vec![Secret::new(webhook_secret)],
            sume_api_url: "https://www.sume.so/api/v1".into(),
            sume_api_allow_plaintext: false,
            api_keys: Vec::new(),
            listen_addr: loopback,
            admin_addr: loopback,
            admin_token: None,
            admin_app_token: None,
            admin_hosts: Vec::new(),
            webhook_tolerance: Duration::from_secs(300),
            max_body_bytes: 1024 * 1024,
            port: PortConfig::default(),
            ingest: IngestConfig::default(),
            attach: AttachConfig::default(),
            sweep: SweepConfig::default(),
            shutdown_timeout: Duration::from_secs(20),
            wait: WaitConfig::default(),
            fleet: crate::actors::heartbeat::FleetConfig::default(),
        }
    }
}

/// The public port's timeouts and limits (see [`crate::http::server`] for how each is kept).
#[derive(Debug, Clone)]
pub struct PortConfig {
    /// HEADER_TIMEOUT: from a connection's accept, or from the first byte of a later request on
    /// a kept-alive connection, until that request's headers are complete.
    pub header_timeout: Duration,
    /// BODY_TIMEOUT: from the handler's start until the whole webhook body has arrived; also how
    /// long a response may wait for a client that does not read it.
    pub body_timeout: Duration,
    /// IDLE_TIMEOUT: from the end of a response until the first byte of the next request on a
    /// kept-alive connection.
    pub idle_timeout: Duration,
    /// MAX_CONNECTIONS: open connections on the public port.
    pub max_connections: usize,
    /// MAX_IN_FLIGHT: requests being handled at once; beyond, 503 at once.
    pub max_in_flight: usize,
    /// MAX_BODY_MEMORY: bytes of webhook bodies held at once; beyond, 503 at once.
    pub max_body_memory: usize,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_in_flight: 1024,
            max_body_memory: 64 << 20,
        }
    }
}

/// Tuning of the ingest writers.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// Writer tasks: while one commits, the next collects its batch.
    pub writers: usize,
    /// The most events one transaction takes.
    pub batch_max: usize,
    /// How long a request waits for its commit before answering 503.
    pub timeout: Duration,
    /// `Retry-After` (seconds) sent with a 503.
    pub retry_after_secs: u64,
}

/// Tuning of the attach task.
#[derive(Debug, Clone)]
pub struct AttachConfig {
    /// How often the catch-up scan looks for waiting events whose job row exists.
    pub scan_interval: Duration,
    /// The most jobs one attach transaction takes.
    pub batch_max: usize,
}

/// A number of requests per time window, e.g. `100/1m`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Requests...
    pub count: u32,
    /// ...per this window.
    pub per: Duration,
}

impl Rate {
    /// The rate as requests a second.
    pub fn per_second(&self) -> f64 {
        self.count as f64 / self.per.as_secs_f64()
    }
}

/// Tuning of the status sweep.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// Time between passes.
    pub interval: Duration,
    /// How long an event may wait without a job row before Sume is asked about it: longer than
    /// the longest submit transaction.
    pub inbox_grace: Duration,
    /// How long after registration an open job is first polled.
    pub poll_after: Duration,
    /// The longest interval between two polls of one job.
    pub poll_max_interval: Duration,
    /// When an open job is closed as `expired` without a terminal status.
    pub poll_give_up: Duration,
    /// The most jobs (and inbox checks) one pass claims.
    pub batch: usize,
    /// How long a claim holds; a crashed instance's claims return after it.
    pub lease: Duration,
    /// Status calls in flight at once.
    pub concurrency: usize,
    /// The fleet's budget per API key.
    pub read_rate: Rate,
    /// The fleet's reads per API key and UTC day (Sume allows 10,000; leave some to the
    /// application that shares the key).
    pub daily_reads: u32,
    /// Timeout of one status call.
    pub request_timeout: Duration,
    /// How long applied and set-aside events are kept.
    pub retention: Duration,
    /// How long dead letters are kept (`None`: never removed). Long: each is a verified
    /// delivery answered 2xx that nobody replayed yet.
    pub dead_letter_retention: Option<Duration>,
    /// Rows one retention statement removes.
    pub retention_batch: usize,
    /// How long closed jobs are kept (`None`, the default: for ever; the rows are the
    /// application's).
    pub job_retention: Option<Duration>,
}

/// SUME_READ_DAILY's default: under Sume's 10,000 reads a key and day, so the application that
/// shares the key keeps a tenth of them.
pub const DEFAULT_DAILY_READS: u32 = 9_000;

impl Default for SweepConfig {
    fn default() -> Self {
        SweepConfig {
            interval: Duration::from_secs(30),
            inbox_grace: Duration::from_secs(300),
            poll_after: Duration::from_secs(120),
            poll_max_interval: Duration::from_secs(1800),
            poll_give_up: Duration::from_secs(86_400),
            batch: 100,
            lease: Duration::from_secs(120),
            concurrency: 4,
            read_rate: Rate {
                count: 100,
                per: Duration::from_secs(60),
            },
            daily_reads: DEFAULT_DAILY_READS,
            request_timeout: Duration::from_secs(10),
            retention: Duration::from_secs(14 * 86_400),
            dead_letter_retention: Some(Duration::from_secs(90 * 86_400)),
            retention_batch: 1000,
            job_retention: None,
        }
    }
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            writers: 2,
            batch_max: 512,
            timeout: Duration::from_secs(10),
            retry_after_secs: 5,
        }
    }
}

impl Default for AttachConfig {
    fn default() -> Self {
        AttachConfig {
            scan_interval: Duration::from_secs(5),
            batch_max: 512,
        }
    }
}

/// An `http://` API URL is refused unless it points at this machine or plaintext is allowed
/// explicitly: every status request carries an API key.
pub fn check_plaintext(api_url: &str, allowed: bool) -> Result<(), ConfigError> {
    let Ok(url) = url::Url::parse(api_url) else {
        return Ok(()); // parse_api_url has refused it already
    };
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if url.scheme() == "http" && !loopback && !allowed {
        return Err(ConfigError::new(
            "SUME_API_URL",
            format!(
                "{api_url} is plain http to another host: the API keys would travel in clear; use https, or set SUME_API_ALLOW_PLAINTEXT=1 for a private network"
            ),
        ));
    }
    Ok(())
}

impl Config {
    /// Cross-setting checks that a single value cannot show.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.webhook_secrets.is_empty() {
            return Err(ConfigError::new("SUME_WEBHOOK_SECRET", "is required"));
        }
        if !self.admin_addr.ip().is_loopback() && self.admin_token.is_none() {
            return Err(ConfigError::new(
                "ADMIN_TOKEN",
                format!(
                    "is required when ADMIN_ADDR ({}) is not a loopback address",
                    self.admin_addr
                ),
            ));
        }
        check_admin_tokens(self.admin_token.as_ref(), self.admin_app_token.as_ref())?;
        // Timestamps are whole seconds: a tolerance under one would refuse every delivery.
        if self.webhook_tolerance < Duration::from_secs(1) {
            return Err(ConfigError::new(
                "WEBHOOK_TOLERANCE",
                "must be at least 1s (signed timestamps are whole seconds)",
            ));
        }
        check_plaintext(&self.sume_api_url, self.sume_api_allow_plaintext)?;
        self.database.validate(&self.database_url)?;
        check_job_retention(&self.sweep)?;
        let s = &self.sweep;
        for (name, d) in [
            ("INGEST_TIMEOUT", self.ingest.timeout),
            ("ATTACH_SCAN_INTERVAL", self.attach.scan_interval),
            ("SHUTDOWN_TIMEOUT", self.shutdown_timeout),
            ("HEADER_TIMEOUT", self.port.header_timeout),
            ("BODY_TIMEOUT", self.port.body_timeout),
            ("IDLE_TIMEOUT", self.port.idle_timeout),
            ("SWEEP_INTERVAL", s.interval),
            ("INBOX_GRACE", s.inbox_grace),
            ("POLL_AFTER", s.poll_after),
            ("POLL_MAX_INTERVAL", s.poll_max_interval),
            ("SWEEP_LEASE", s.lease),
            ("SUME_TIMEOUT", s.request_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::new(name, "must be more than 0"));
            }
        }
        if self.port.idle_timeout < self.port.header_timeout {
            return Err(ConfigError::new(
                "IDLE_TIMEOUT",
                "must be at least HEADER_TIMEOUT (a client may pause before its next request longer than it takes to send one)",
            ));
        }
        if self.port.max_body_memory < self.max_body_bytes {
            return Err(ConfigError::new(
                "MAX_BODY_MEMORY",
                format!(
                    "must be at least MAX_BODY_BYTES ({} bytes), or a body of that size could never be read",
                    self.max_body_bytes
                ),
            ));
        }
        if self.port.max_body_memory > u32::MAX as usize {
            return Err(ConfigError::new("MAX_BODY_MEMORY", "must be under 4GiB"));
        }
        if s.poll_max_interval < s.poll_after {
            return Err(ConfigError::new(
                "POLL_MAX_INTERVAL",
                "must be at least POLL_AFTER (it caps the growing interval that starts there)",
            ));
        }
        // A request starts only while a whole request timeout, with as much again to spare,
        // remains of its claim: a shorter lease would let no request start at all.
        if s.lease <= s.request_timeout * 2 {
            return Err(ConfigError::new(
                "SWEEP_LEASE",
                "must be more than twice SUME_TIMEOUT, so a claim outlives the requests made under it",
            ));
        }
        if s.retention < Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "RETENTION",
                "must be at least 1h: applied events are the memory that makes a redelivery a duplicate",
            ));
        }
        if s.dead_letter_retention.is_some_and(|d| d < s.retention) {
            return Err(ConfigError::new(
                "DEAD_LETTER_RETENTION",
                "must be at least RETENTION (or `never`): a dead letter is a delivery answered 2xx that nobody replayed yet",
            ));
        }
        if s.poll_give_up <= s.poll_after {
            return Err(ConfigError::new(
                "POLL_GIVE_UP",
                "must be longer than POLL_AFTER",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
