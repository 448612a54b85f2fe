//! The parts of [`Config`]: what each actor and surface reads, as values (durations, counts,
//! addresses), built from the declared settings by `read.rs` and checked by `rules.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use sume_wire::Secret;

use super::{ApiKey, DatabaseRoutes, Rate};

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
    /// MAX_ADMIN_CONNECTIONS: open connections on ADMIN_ADDR.
    pub max_admin_connections: usize,
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
    pub fleet: FleetConfig,
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
    /// GIVE_UP_RECHECK: how long a give-up made without an answer about the job is asked
    /// about again (`None`: never).
    pub give_up_recheck: Option<Duration>,
    /// KEY_CHECK_MAX_AGE: how long a passed key check lets 404s count as verdicts.
    pub key_check_max_age: Duration,
    /// LIST_WALKS: whether a key's list may be walked where that costs fewer reads.
    pub list_walks: bool,
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
    /// How long an event whose job has no row waits before it moves to the dead letters.
    pub orphan_retention: Duration,
    /// Rows one retention statement removes.
    pub retention_batch: usize,
    /// How long closed jobs are kept (`None`, the default: for ever; the rows are the
    /// application's).
    pub job_retention: Option<Duration>,
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
    /// MAX_WAIT: the longest a request waits; a longer `wait` waits this long.
    pub max_wait: Duration,
    /// WAIT_WAKEUP: `listen` or `poll`.
    pub wakeup: Wakeup,
    /// WAIT_POLL_INTERVAL: how often the waiters are polled, when they are.
    pub poll_interval: Duration,
}

/// How often the heartbeat and the counts of the fleet's picture are written (no setting).
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// The flush interval: a minute in production (the writes land on minute boundaries);
    /// tests shorten it.
    pub interval: Duration,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            interval: Duration::from_secs(60),
        }
    }
}

/// OTEL_*: whether spans are exported, and where.
#[derive(Debug, Clone, PartialEq)]
pub enum Traces {
    /// No export, and no span made: no endpoint is set, or the operator turned export off
    /// (`because`: OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER=none), which the log says at start.
    Off {
        /// The setting that turned export off, as written in the log line.
        because: Option<&'static str>,
    },
    /// Spans exported as set.
    On(TracesConfig),
}

impl Traces {
    /// The export's settings, when it is on.
    pub fn config(&self) -> Option<&TracesConfig> {
        match self {
            Traces::On(config) => Some(config),
            Traces::Off { .. } => None,
        }
    }
}

/// OTEL_*: where spans go and which are kept, when export is on.
#[derive(Debug, Clone, PartialEq)]
pub struct TracesConfig {
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as written, else OTEL_EXPORTER_OTLP_ENDPOINT's
    /// `/v1/traces`.
    pub traces_url: String,
    /// The variable `traces_url` comes from, for messages.
    pub endpoint_setting: &'static str,
    /// OTEL_SERVICE_NAME.
    pub service_name: String,
    /// OTEL_TRACES_SAMPLER, as spelt there.
    pub sampler: &'static str,
    /// OTEL_TRACES_SAMPLER_ARG, for the ratio samplers.
    pub ratio: f64,
    /// OTEL_RESOURCE_ATTRIBUTES, decoded, in order.
    pub resource: Vec<(String, String)>,
    /// OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else OTEL_EXPORTER_OTLP_TIMEOUT: how long one export
    /// may take.
    pub timeout: std::time::Duration,
}
