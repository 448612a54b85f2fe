//! Settings of `sume-inbox serve`: read from the environment (flags mirror every variable),
//! validated once at start, with an error that names the setting at fault.
//!
//! Secrets (webhook secrets, API keys, the database URL's password, the admin token) are held
//! in [`Secret`] and never reach a log line or a `Debug` print.

use std::net::SocketAddr;
use std::time::Duration;

use sume_wire::Secret;
use thiserror::Error;

/// A setting that is missing or malformed. The message names it.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{name}: {problem}")]
pub struct ConfigError {
    pub name: &'static str,
    pub problem: String,
}

impl ConfigError {
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
    pub name: String,
    pub key: Secret,
}

/// Everything `serve` needs, validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub database_url: Secret,
    pub db_pool_size: usize,
    pub webhook_secrets: Vec<Secret>,
    pub sume_api_url: String,
    /// SUME_API_ALLOW_PLAINTEXT: an `http://` SUME_API_URL to another host than this one is
    /// refused unless this is set (the API keys would travel in clear).
    pub sume_api_allow_plaintext: bool,
    pub api_keys: Vec<ApiKey>,
    pub listen_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub admin_token: Option<Secret>,
    pub webhook_tolerance: Duration,
    pub max_body_bytes: usize,
    /// How the public port (LISTEN_ADDR) treats slow and numerous clients.
    pub port: PortConfig,
    pub ingest: IngestConfig,
    pub attach: AttachConfig,
    pub sweep: SweepConfig,
    pub shutdown_timeout: Duration,
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
            webhook_secrets: vec![Secret::new(webhook_secret)],
            sume_api_url: "https://www.sume.so/api/v1".into(),
            sume_api_allow_plaintext: false,
            api_keys: Vec::new(),
            listen_addr: loopback,
            admin_addr: loopback,
            admin_token: None,
            webhook_tolerance: Duration::from_secs(300),
            max_body_bytes: 1024 * 1024,
            port: PortConfig::default(),
            ingest: IngestConfig::default(),
            attach: AttachConfig::default(),
            sweep: SweepConfig::default(),
            shutdown_timeout: Duration::from_secs(20),
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
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_in_flight: 1024,
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
    pub count: u32,
    pub per: Duration,
}

impl Rate {
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
    /// Timeout of one status call.
    pub request_timeout: Duration,
    /// How long applied and set-aside events and dead letters are kept.
    pub retention: Duration,
    /// Rows one retention statement removes.
    pub retention_batch: usize,
}

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
            request_timeout: Duration::from_secs(10),
            retention: Duration::from_secs(14 * 86_400),
            retention_batch: 1000,
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

/// Reads `250ms`, `30s`, `5m`, `1h`, `14d` (and combinations such as `1m30s`).
pub fn parse_duration(name: &'static str, raw: &str) -> Result<Duration, ConfigError> {
    let d = humantime::parse_duration(raw.trim()).map_err(|e| {
        ConfigError::new(
            name,
            format!("{raw:?} is not a duration like 250ms, 30s or 5m ({e})"),
        )
    })?;
    Ok(d)
}

/// Reads a size in bytes: `1048576`, `512KiB`, `1MiB`, `1MB`.
pub fn parse_bytes(name: &'static str, raw: &str) -> Result<usize, ConfigError> {
    let s = raw.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: usize = digits.parse().map_err(|_| {
        ConfigError::new(name, format!("{raw:?} is not a size like 1048576 or 1MiB"))
    })?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "kib" | "k" => 1 << 10,
        "mb" => 1_000_000,
        "mib" | "m" => 1 << 20,
        _ => {
            return Err(ConfigError::new(
                name,
                format!("{raw:?}: unknown unit {unit:?}"),
            ))
        }
    };
    n.checked_mul(mult)
        .filter(|n| *n > 0)
        .ok_or_else(|| ConfigError::new(name, format!("{raw:?} is out of range")))
}

pub fn parse_addr(name: &'static str, raw: &str) -> Result<SocketAddr, ConfigError> {
    raw.trim()
        .parse()
        .map_err(|_| ConfigError::new(name, format!("{raw:?} is not an address like 0.0.0.0:8080")))
}

/// A comma-separated list of secrets; empty items are refused (a stray comma is a typo, and a
/// typo in a secret list must not pass silently).
pub fn parse_secrets(name: &'static str, raw: &str) -> Result<Vec<Secret>, ConfigError> {
    let items: Vec<&str> = raw.split(',').map(str::trim).collect();
    if items.iter().any(|s| s.is_empty()) {
        return Err(ConfigError::new(
            name,
            "has an empty item (check for stray commas)",
        ));
    }
    Ok(items.into_iter().map(Secret::new).collect())
}

/// `name:key,name:key`. Names are unique, made of letters, digits, `-`, `_`, `.`.
pub fn parse_api_keys(name: &'static str, raw: &str) -> Result<Vec<ApiKey>, ConfigError> {
    let mut keys: Vec<ApiKey> = Vec::new();
    for (i, item) in raw.split(',').map(str::trim).enumerate() {
        let (key_name, key) = item
            .split_once(':')
            .ok_or_else(|| ConfigError::new(name, format!("item {} is not name:key", i + 1)))?;
        let key_name = key_name.trim();
        let valid_name = !key_name.is_empty()
            && key_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !valid_name {
            return Err(ConfigError::new(
                name,
                format!(
                    "item {}: key name {key_name:?} must be letters, digits, - _ .",
                    i + 1
                ),
            ));
        }
        if key.trim().is_empty() {
            return Err(ConfigError::new(name, format!("key {key_name:?} is empty")));
        }
        if keys.iter().any(|k| k.name == key_name) {
            return Err(ConfigError::new(
                name,
                format!("key name {key_name:?} appears twice"),
            ));
        }
        keys.push(ApiKey {
            name: key_name.to_owned(),
            key: Secret::new(key.trim()),
        });
    }
    Ok(keys)
}

/// `100` (a minute), or `100/1m`, `20/10s`.
pub fn parse_rate(name: &'static str, raw: &str) -> Result<Rate, ConfigError> {
    let (count, per) = match raw.trim().split_once('/') {
        Some((c, w)) => (c, parse_duration(name, w)?),
        None => (raw.trim(), Duration::from_secs(60)),
    };
    let count: u32 = count
        .trim()
        .parse()
        .map_err(|_| ConfigError::new(name, format!("{raw:?} is not a rate like 100 or 100/1m")))?;
    if count == 0 || per.is_zero() {
        return Err(ConfigError::new(name, "must be more than 0"));
    }
    Ok(Rate { count, per })
}

pub fn parse_count(name: &'static str, raw: &str, min: usize) -> Result<usize, ConfigError> {
    let n: usize = raw
        .trim()
        .parse()
        .map_err(|_| ConfigError::new(name, format!("{raw:?} is not a whole number")))?;
    if n < min {
        return Err(ConfigError::new(name, format!("must be at least {min}")));
    }
    Ok(n)
}

/// The API base URL: http(s), no query, no trailing slash kept.
pub fn parse_api_url(name: &'static str, raw: &str) -> Result<String, ConfigError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let bad = |why: &str| ConfigError::new(name, format!("{raw:?} is not an http(s) URL: {why}"));
    let url = url::Url::parse(trimmed).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("no query or fragment allowed"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials belong in SUME_API_KEYS, not in the URL"));
    }
    Ok(trimmed.to_owned())
}

/// Reads a switch: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (any case).
pub fn parse_bool(name: &'static str, raw: &str) -> Result<bool, ConfigError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err(ConfigError::new(
            name,
            format!("{raw:?} is not 1/true/yes/on or 0/false/no/off"),
        )),
    }
}

pub fn check_database_url(raw: &str) -> Result<Secret, ConfigError> {
    crate::db::target(raw)
        .map_err(|e| ConfigError::new("DATABASE_URL", format!("cannot be read: {e}")))?;
    Ok(Secret::new(raw))
}

/// An `http://` API URL is refused unless it points at this machine or plaintext is allowed
/// explicitly: every status request carries an API key.
fn check_plaintext(api_url: &str, allowed: bool) -> Result<(), ConfigError> {
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
        // Timestamps are whole seconds: a tolerance under one would refuse every delivery.
        if self.webhook_tolerance < Duration::from_secs(1) {
            return Err(ConfigError::new(
                "WEBHOOK_TOLERANCE",
                "must be at least 1s (signed timestamps are whole seconds)",
            ));
        }
        check_plaintext(&self.sume_api_url, self.sume_api_allow_plaintext)?;
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
mod tests {
    use super::*;

    #[test]
    fn settings_that_cannot_work_are_refused_by_name() {
        let refused = |change: &dyn Fn(&mut Config)| {
            let mut c = Config::local("postgres://localhost/x", "whsec_x");
            change(&mut c);
            c.validate().unwrap_err().name
        };
        assert!(Config::local("postgres://localhost/x", "whsec_x")
            .validate()
            .is_ok());
        assert_eq!(
            refused(&|c| c.attach.scan_interval = Duration::ZERO),
            "ATTACH_SCAN_INTERVAL"
        );
        assert_eq!(
            refused(&|c| c.ingest.timeout = Duration::ZERO),
            "INGEST_TIMEOUT"
        );
        assert_eq!(
            refused(&|c| c.webhook_tolerance = Duration::from_millis(500)),
            "WEBHOOK_TOLERANCE"
        );
        assert_eq!(
            refused(&|c| c.port.header_timeout = Duration::ZERO),
            "HEADER_TIMEOUT"
        );
        assert_eq!(
            refused(&|c| c.port.body_timeout = Duration::ZERO),
            "BODY_TIMEOUT"
        );
        assert_eq!(
            refused(&|c| c.port.idle_timeout = Duration::from_secs(1)),
            "IDLE_TIMEOUT"
        );
        assert_eq!(
            refused(&|c| c.sweep.inbox_grace = Duration::ZERO),
            "INBOX_GRACE"
        );
        assert_eq!(
            refused(&|c| c.sweep.interval = Duration::ZERO),
            "SWEEP_INTERVAL"
        );
        assert_eq!(
            refused(&|c| c.shutdown_timeout = Duration::ZERO),
            "SHUTDOWN_TIMEOUT"
        );
        assert_eq!(
            refused(&|c| c.sweep.poll_max_interval = c.sweep.poll_after / 2),
            "POLL_MAX_INTERVAL"
        );
        assert_eq!(
            refused(&|c| c.sume_api_url = "http://sume.example/api/v1".into()),
            "SUME_API_URL"
        );
        for ok in [
            "http://127.0.0.1:8090/v1",
            "http://localhost:8090/v1",
            "http://[::1]:8090/v1",
        ] {
            let mut c = Config::local("postgres://localhost/x", "whsec_x");
            c.sume_api_url = ok.into();
            assert!(c.validate().is_ok(), "{ok}");
        }
        let mut c = Config::local("postgres://localhost/x", "whsec_x");
        c.sume_api_url = "http://sim:8090/v1".into();
        c.sume_api_allow_plaintext = true;
        assert!(c.validate().is_ok(), "allowed explicitly");
    }

    #[test]
    fn switches() {
        assert_eq!(parse_bool("X", "1"), Ok(true));
        assert_eq!(parse_bool("X", " TRUE "), Ok(true));
        assert_eq!(parse_bool("X", "off"), Ok(false));
        assert_eq!(parse_bool("X", ""), Ok(false));
        assert!(parse_bool("X", "maybe").is_err());
    }

    #[test]
    fn api_urls() {
        let ok = |raw: &str| parse_api_url("SUME_API_URL", raw);
        assert_eq!(
            ok("https://www.sume.so/api/v1/").as_deref(),
            Ok("https://www.sume.so/api/v1")
        );
        assert_eq!(
            ok(" http://127.0.0.1:8090/v1 ").as_deref(),
            Ok("http://127.0.0.1:8090/v1")
        );
        for bad in [
            "",
            "www.sume.so/api/v1",
            "ftp://sume.so/v1",
            "https://",
            "https://sume.so/v1?x=1",
            "https://sume.so/v1#x",
            "https://user:pw@sume.so/v1",
        ] {
            let e = ok(bad).unwrap_err();
            assert_eq!(e.name, "SUME_API_URL", "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("X", "250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("X", "30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("X", "5m"), Ok(Duration::from_secs(300)));
        assert_eq!(
            parse_duration("X", "14d"),
            Ok(Duration::from_secs(14 * 86400))
        );
        let err = parse_duration("WEBHOOK_TOLERANCE", "5 minutes please").unwrap_err();
        assert_eq!(err.name, "WEBHOOK_TOLERANCE");
        assert!(err.to_string().starts_with("WEBHOOK_TOLERANCE: "));
        assert!(parse_duration("X", "").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("M", "1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("M", "1MiB"), Ok(1 << 20));
        assert_eq!(parse_bytes("M", "64KiB"), Ok(64 << 10));
        assert_eq!(parse_bytes("M", "2MB"), Ok(2_000_000));
        assert!(parse_bytes("M", "0").is_err());
        assert!(parse_bytes("M", "lots").is_err());
        assert!(parse_bytes("M", "1GiB").is_err());
    }

    #[test]
    fn api_keys() {
        let keys = parse_api_keys("SUME_API_KEYS", "main:sk_1, other:sk_2").unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[1].name, "other");
        assert_eq!(keys[1].key.expose(), "sk_2");
        for bad in ["main", "main:", ":sk", "a:1,a:2", "bad name:sk"] {
            let err = parse_api_keys("SUME_API_KEYS", bad).unwrap_err();
            assert_eq!(err.name, "SUME_API_KEYS", "{bad}");
            assert!(!err.to_string().contains("sk_"), "never echo a key: {err}");
        }
    }

    #[test]
    fn a_lease_must_outlive_its_requests() {
        let mut config = Config::local("postgres://db/x", "s");
        config.sweep.request_timeout = Duration::from_secs(60);
        assert_eq!(config.validate().unwrap_err().name, "SWEEP_LEASE");
        let mut ok = config.clone();
        ok.sweep.request_timeout = Duration::from_secs(10);
        assert!(ok.validate().is_ok());
    }

    #[test]
    fn rates() {
        let r = parse_rate("SUME_READ_RATE", "100").unwrap();
        assert_eq!((r.count, r.per), (100, Duration::from_secs(60)));
        let r = parse_rate("SUME_READ_RATE", "20/10s").unwrap();
        assert_eq!((r.count, r.per), (20, Duration::from_secs(10)));
        assert!((r.per_second() - 2.0).abs() < 1e-9);
        for bad in ["0", "fast", "10/0s", "-1"] {
            assert_eq!(
                parse_rate("SUME_READ_RATE", bad).unwrap_err().name,
                "SUME_READ_RATE"
            );
        }
    }

    #[test]
    fn secrets() {
        assert_eq!(parse_secrets("S", "a, b").unwrap().len(), 2);
        assert!(parse_secrets("S", "a,,b").is_err());
        assert!(parse_secrets("S", "").is_err());
    }

    #[test]
    fn urls_and_addresses() {
        assert_eq!(
            parse_api_url("U", "https://www.sume.so/api/v1/").unwrap(),
            "https://www.sume.so/api/v1"
        );
        assert!(parse_api_url("U", "www.sume.so").is_err());
        assert!(parse_addr("A", "0.0.0.0:8080").is_ok());
        assert!(parse_addr("A", "localhost").is_err());
        assert!(check_database_url("postgres://u:p@127.0.0.1:5432/db").is_ok());
        assert!(check_database_url("postgres://u:p@127.0.0.1:notaport/db").is_err());
    }
}
