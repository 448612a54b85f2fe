//! `sume-inbox serve` (the daemon) and `sume-inbox migrate`.

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::config::{self, Config, ConfigError};
use crate::{db, run, Listeners};

/// `serve`: binds both listeners, then runs the daemon until SIGTERM or SIGINT.
pub async fn serve(args: ServeArgs) -> Result<(), CliError> {
    let config = args.into_config()?;
    let bind = |setting: &'static str, addr: std::net::SocketAddr| async move {
        crate::process::sockets::bind(addr).map_err(|source| CliError::Bind {
            setting,
            addr,
            source,
        })
    };
    let listeners = Listeners {
        webhook: bind("LISTEN_ADDR", config.listen_addr).await?,
        admin: bind("ADMIN_ADDR", config.admin_addr).await?,
    };
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            crate::process::signal::terminated().await;
            crate::process::systemd::stopping();
            shutdown.cancel();
        }
    });
    run(config, listeners, shutdown).await?;
    Ok(())
}

/// `migrate`: applies the embedded migrations and says where the schema stands. It runs on
/// MIGRATE_DATABASE_URL when set, else DATABASE_URL, which must then not be a transaction
/// pooler (the migrations hold a session advisory lock).
pub async fn migrate(args: MigrateArgs) -> Result<(), CliError> {
    let url = match (&args.migrate_database_url, &args.database_url) {
        (Some(url), _) if !url.trim().is_empty() => url,
        _ if config::parse_pooler(&args.db_pooler)? == config::Pooler::Transaction => {
            return Err(ConfigError::new(
                "MIGRATE_DATABASE_URL",
                "is required with DB_POOLER=transaction: migrations need a direct connection",
            )
            .into())
        }
        (_, Some(url)) => url,
        (_, None) => return Err(ConfigError::new("DATABASE_URL", "is required").into()),
    };
    let mut client = db::connect(url).await?;
    let applied = db::migrate::migrate(&mut client).await?;
    println!(
        "schema at version {} (applied now: {:?})",
        db::migrate::latest(),
        applied
    );
    Ok(())
}

/// `migrate`'s settings.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// A direct connection, preferred to DATABASE_URL when set.
    #[arg(long, env = "MIGRATE_DATABASE_URL", hide_env_values = true)]
    pub migrate_database_url: Option<String>,
    /// `transaction` when DATABASE_URL is a transaction pooler: MIGRATE_DATABASE_URL is then
    /// required.
    #[arg(long, env = "DB_POOLER", default_value = "none")]
    pub db_pooler: String,
}

/// `serve`'s settings, as text: [`ServeArgs::into_config`] reads and checks them.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// PostgreSQL connection URL (postgres://user:pass@host:port/db?sslmode=...).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Connections in this instance's pool.
    #[arg(long, env = "DB_POOL_SIZE", default_value = "16")]
    pub db_pool_size: String,
    /// `transaction` when DATABASE_URL is a pooler in transaction mode (PgBouncer): unnamed
    /// statements only, no LISTEN or migrations through it. `none` otherwise.
    #[arg(long, env = "DB_POOLER", default_value = "none")]
    pub db_pooler: String,
    /// A direct connection for the migrations at start (with DB_POOLER=transaction, without
    /// it the schema must be current: run `sume-inbox migrate` first).
    #[arg(long, env = "MIGRATE_DATABASE_URL", hide_env_values = true)]
    pub migrate_database_url: Option<String>,
    /// A direct connection for attach's LISTEN (with DB_POOLER=transaction, without it attach
    /// does without LISTEN).
    #[arg(long, env = "LISTEN_DATABASE_URL", hide_env_values = true)]
    pub listen_database_url: Option<String>,
    /// Webhook signing secrets, comma separated; any of them verifies (rotation).
    #[arg(long, env = "SUME_WEBHOOK_SECRET", hide_env_values = true)]
    pub webhook_secret: Option<String>,
    /// Base URL of Sume's API.
    #[arg(
        long,
        env = "SUME_API_URL",
        default_value = "https://www.sume.so/api/v1"
    )]
    pub sume_api_url: String,
    /// Allow an `http://` SUME_API_URL to another host (`1`/`true`): the API keys then travel
    /// in clear, so only on a private network (e.g. a simulator in compose).
    #[arg(long, env = "SUME_API_ALLOW_PLAINTEXT", default_value = "0")]
    pub sume_api_allow_plaintext: String,
    /// API keys as name:key,name:key (the names are what sume.jobs.api_key holds).
    #[arg(long, env = "SUME_API_KEYS", hide_env_values = true)]
    pub sume_api_keys: Option<String>,
    /// A single API key, named `default` (when SUME_API_KEYS is not set).
    #[arg(long, env = "SUME_API_KEY", hide_env_values = true)]
    pub sume_api_key: Option<String>,
    /// Where Sume's webhooks and the health checks are served.
    #[arg(long, env = "LISTEN_ADDR", default_value = "0.0.0.0:8080")]
    pub listen_addr: String,
    /// Where the admin API is served; loopback unless ADMIN_TOKEN is set.
    #[arg(long, env = "ADMIN_ADDR", default_value = "127.0.0.1:9090")]
    pub admin_addr: String,
    /// Bearer token every admin request must carry (the operator's: every route).
    #[arg(long, env = "ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Bearer token of the application's routes only (register, read, wait, the feed).
    #[arg(long, env = "ADMIN_APP_TOKEN", hide_env_values = true)]
    pub admin_app_token: Option<String>,
    /// Host names (`name` or `name:port`) the admin API answers besides its own address.
    #[arg(long, env = "ADMIN_HOSTS", default_value = "")]
    pub admin_hosts: String,
    /// How far a webhook's timestamp may be from now.
    #[arg(long, env = "WEBHOOK_TOLERANCE", default_value = "5m")]
    pub webhook_tolerance: String,
    /// The largest webhook body accepted (413 beyond).
    #[arg(long, env = "MAX_BODY_BYTES", default_value = "1MiB")]
    pub max_body_bytes: String,
    /// Time a client has to send a request's headers: from the accept, or from the first byte
    /// of a later request on a kept-alive connection.
    #[arg(long, env = "HEADER_TIMEOUT", default_value = "5s")]
    pub header_timeout: String,
    /// Time a client has to send a webhook's whole body, and to take a response.
    #[arg(long, env = "BODY_TIMEOUT", default_value = "30s")]
    pub body_timeout: String,
    /// How long a kept-alive connection may sit idle between requests (at least HEADER_TIMEOUT).
    #[arg(long, env = "IDLE_TIMEOUT", default_value = "60s")]
    pub idle_timeout: String,
    /// Open connections on LISTEN_ADDR; beyond, the oldest still sending its headers is closed.
    #[arg(long, env = "MAX_CONNECTIONS", default_value = "10000")]
    pub max_connections: String,
    /// Requests handled at once on LISTEN_ADDR; beyond, 503 with Retry-After at once.
    #[arg(long, env = "MAX_IN_FLIGHT", default_value = "1024")]
    pub max_in_flight: String,
    /// Bytes of webhook bodies held at once on LISTEN_ADDR (at least MAX_BODY_BYTES); beyond,
    /// 503 with Retry-After at once.
    #[arg(long, env = "MAX_BODY_MEMORY", default_value = "64MiB")]
    pub max_body_memory: String,
    /// Requests waiting at once for a job to close (`?wait=`); beyond, 503 with Retry-After.
    #[arg(long, env = "MAX_WAITERS", default_value = "1000")]
    pub max_waiters: String,
    /// The longest `wait` a request may ask for.
    #[arg(long, env = "MAX_WAIT", default_value = "60s")]
    pub max_wait: String,
    /// What wakes waiters: `listen` (LISTEN sume_job_closed) or `poll`.
    #[arg(long, env = "WAIT_WAKEUP", default_value = "listen")]
    pub wait_wakeup: String,
    /// How often waiters are polled (WAIT_WAKEUP=poll, or while LISTEN is unavailable).
    #[arg(long, env = "WAIT_POLL_INTERVAL", default_value = "1s")]
    pub wait_poll_interval: String,
    /// Ingest writer tasks.
    #[arg(long, env = "INGEST_WRITERS", default_value = "2")]
    pub ingest_writers: String,
    /// The most events one ingest transaction takes.
    #[arg(long, env = "INGEST_BATCH_MAX", default_value = "512")]
    pub ingest_batch_max: String,
    /// How long a webhook waits for its commit before it is answered 503.
    #[arg(long, env = "INGEST_TIMEOUT", default_value = "10s")]
    pub ingest_timeout: String,
    /// How often attach scans for waiting events whose job row exists (lost notifications);
    /// 5s, or 1s with DB_POOLER=transaction and no LISTEN_DATABASE_URL.
    #[arg(long, env = "ATTACH_SCAN_INTERVAL")]
    pub attach_scan_interval: Option<String>,
    /// Time between sweep passes.
    #[arg(long, env = "SWEEP_INTERVAL", default_value = "30s")]
    pub sweep_interval: String,
    /// How long an event may wait with no job row before Sume is asked whose job it is
    /// (longer than your longest submit transaction).
    #[arg(long, env = "INBOX_GRACE", default_value = "5m")]
    pub inbox_grace: String,
    /// How long after registration an open job is first polled.
    #[arg(long, env = "POLL_AFTER", default_value = "2m")]
    pub poll_after: String,
    /// The longest interval between two polls of one job.
    #[arg(long, env = "POLL_MAX_INTERVAL", default_value = "30m")]
    pub poll_max_interval: String,
    /// When an open job with no terminal status is closed as expired.
    #[arg(long, env = "POLL_GIVE_UP", default_value = "24h")]
    pub poll_give_up: String,
    /// Requests per API key for the whole fleet: `100` (a minute) or `100/1m`.
    #[arg(long, env = "SUME_READ_RATE", default_value = "100")]
    pub sume_read_rate: String,
    /// Reads per API key and UTC day for the whole fleet (Sume allows 10,000 a day; the rest
    /// is left to the application sharing the key). Spent on the most overdue work first.
    #[arg(long, env = "SUME_READ_DAILY", default_value = "9000")]
    pub sume_read_daily: String,
    /// Timeout of one call to Sume's API.
    #[arg(long, env = "SUME_TIMEOUT", default_value = "10s")]
    pub sume_timeout: String,
    /// The most jobs (and inbox checks) one sweep pass claims.
    #[arg(long, env = "SWEEP_BATCH", default_value = "100")]
    pub sweep_batch: String,
    /// How long a sweep claim holds (a crashed instance's claims return after it).
    #[arg(long, env = "SWEEP_LEASE", default_value = "2m")]
    pub sweep_lease: String,
    /// Status calls in flight at once, per instance.
    #[arg(long, env = "SWEEP_CONCURRENCY", default_value = "4")]
    pub sweep_concurrency: String,
    /// How long applied and set-aside events are kept (longer than Sume's
    /// whole retry horizon, so a redelivery is still recognised as a duplicate).
    #[arg(long, env = "RETENTION", default_value = "14d")]
    pub retention: String,
    /// How long dead letters are kept: a duration of at least RETENTION, or `never`.
    #[arg(long, env = "DEAD_LETTER_RETENTION", default_value = "90d")]
    pub dead_letter_retention: String,
    /// Rows one retention statement removes.
    #[arg(long, env = "RETENTION_BATCH", default_value = "1000")]
    pub retention_batch: String,
    /// How long closed jobs are kept: `off` (the default: the rows are the application's) or
    /// a duration of at least RETENTION and POLL_GIVE_UP.
    #[arg(long, env = "JOB_RETENTION", default_value = "off")]
    pub job_retention: String,
    /// How long shutdown waits for in-flight work.
    #[arg(long, env = "SHUTDOWN_TIMEOUT", default_value = "20s")]
    pub shutdown_timeout: String,
}

impl ServeArgs {
    /// Reads and validates every setting; the first bad one is reported by name.
    pub fn into_config(self) -> Result<Config, ConfigError> {
        use config::*;
        let (webhook_secrets, api_keys, admin_token) = self.secrets()?;
        let database = DatabaseRoutes {
            pooler: parse_pooler(&self.db_pooler)?,
            migrate_url: parse_optional_url(
                "MIGRATE_DATABASE_URL",
                self.migrate_database_url.as_deref(),
            )?,
            listen_url: parse_optional_url(
                "LISTEN_DATABASE_URL",
                self.listen_database_url.as_deref(),
            )?,
        };
        let scan_default = match (database.pooler, &database.listen_url) {
            (Pooler::Transaction, None) => SCAN_INTERVAL_WITHOUT_LISTEN,
            _ => "5s",
        };
        let config = Config {
            database_url: check_database_url(&self.database_url)?,
            db_pool_size: parse_count("DB_POOL_SIZE", &self.db_pool_size, 2)?,
            database,
            webhook_secrets,
            sume_api_url: parse_api_url("SUME_API_URL", &self.sume_api_url)?,
            sume_api_allow_plaintext: parse_bool(
                "SUME_API_ALLOW_PLAINTEXT",
                &self.sume_api_allow_plaintext,
            )?,
            api_keys,
            listen_addr: parse_addr("LISTEN_ADDR", &self.listen_addr)?,
            admin_addr: parse_addr("ADMIN_ADDR", &self.admin_addr)?,
            admin_token,
            admin_app_token: token("ADMIN_APP_TOKEN", &self.admin_app_token)?,
            admin_hosts: self
                .admin_hosts
                .split(',')
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            webhook_tolerance: parse_duration("WEBHOOK_TOLERANCE", &self.webhook_tolerance)?,
            max_body_bytes: parse_bytes("MAX_BODY_BYTES", &self.max_body_bytes)?,
            port: PortConfig {
                header_timeout: parse_duration("HEADER_TIMEOUT", &self.header_timeout)?,
                body_timeout: parse_duration("BODY_TIMEOUT", &self.body_timeout)?,
                idle_timeout: parse_duration("IDLE_TIMEOUT", &self.idle_timeout)?,
                max_connections: parse_count("MAX_CONNECTIONS", &self.max_connections, 1)?,
                max_in_flight: parse_count("MAX_IN_FLIGHT", &self.max_in_flight, 1)?,
                max_body_memory: parse_bytes("MAX_BODY_MEMORY", &self.max_body_memory)?,
            },
            ingest: IngestConfig {
                writers: parse_count("INGEST_WRITERS", &self.ingest_writers, 1)?,
                batch_max: parse_count("INGEST_BATCH_MAX", &self.ingest_batch_max, 1)?,
                timeout: parse_duration("INGEST_TIMEOUT", &self.ingest_timeout)?,
                ..IngestConfig::default()
            },
            attach: AttachConfig {
                scan_interval: parse_duration(
                    "ATTACH_SCAN_INTERVAL",
                    self.attach_scan_interval.as_deref().unwrap_or(scan_default),
                )?,
                ..AttachConfig::default()
            },
            sweep: self.sweep()?,
            shutdown_timeout: parse_duration("SHUTDOWN_TIMEOUT", &self.shutdown_timeout)?,
            wait: WaitConfig::parse(
                &self.max_waiters,
                &self.max_wait,
                &self.wait_wakeup,
                &self.wait_poll_interval,
            )?,
            fleet: crate::actors::heartbeat::FleetConfig::default(),
        };
        config.validate()?;
        Ok(config)
    }

    /// The webhook secrets, the API keys and the admin token. An optional variable set to
    /// nothing (`SUME_API_KEYS=` in a compose file) is unset.
    #[allow(clippy::type_complexity)]
    fn secrets(
        &self,
    ) -> Result<
        (
            Vec<sume_wire::Secret>,
            Vec<config::ApiKey>,
            Option<sume_wire::Secret>,
        ),
        ConfigError,
    > {
        use config::*;
        let given = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        let webhook_secrets = match given(&self.webhook_secret).as_deref() {
            Some(raw) => parse_secrets("SUME_WEBHOOK_SECRET", raw)?,
            None => return Err(ConfigError::new("SUME_WEBHOOK_SECRET", "is required")),
        };
        let api_keys = match (given(&self.sume_api_keys), given(&self.sume_api_key)) {
            (Some(raw), _) => parse_api_keys("SUME_API_KEYS", &raw)?,
            (None, Some(key)) => vec![ApiKey {
                name: "default".to_owned(),
                key: sume_wire::Secret::new(key.trim()),
            }],
            (None, None) => Vec::new(),
        };
        let admin_token = token("ADMIN_TOKEN", &self.admin_token)?;
        Ok((webhook_secrets, api_keys, admin_token))
    }

    /// The sweep's settings.
    fn sweep(&self) -> Result<config::SweepConfig, ConfigError> {
        use config::*;
        Ok(config::SweepConfig {
            interval: parse_duration("SWEEP_INTERVAL", &self.sweep_interval)?,
            inbox_grace: parse_duration("INBOX_GRACE", &self.inbox_grace)?,
            poll_after: parse_duration("POLL_AFTER", &self.poll_after)?,
            poll_max_interval: parse_duration("POLL_MAX_INTERVAL", &self.poll_max_interval)?,
            poll_give_up: parse_duration("POLL_GIVE_UP", &self.poll_give_up)?,
            batch: parse_count("SWEEP_BATCH", &self.sweep_batch, 1)?,
            lease: parse_duration("SWEEP_LEASE", &self.sweep_lease)?,
            concurrency: parse_count("SWEEP_CONCURRENCY", &self.sweep_concurrency, 1)?,
            read_rate: parse_rate("SUME_READ_RATE", &self.sume_read_rate)?,
            daily_reads: parse_count("SUME_READ_DAILY", &self.sume_read_daily, 1)?
                .min(i32::MAX as usize) as u32,
            request_timeout: parse_duration("SUME_TIMEOUT", &self.sume_timeout)?,
            retention: parse_duration("RETENTION", &self.retention)?,
            dead_letter_retention: match self.dead_letter_retention.trim() {
                "never" => None,
                raw => Some(parse_duration("DEAD_LETTER_RETENTION", raw)?),
            },
            retention_batch: parse_count("RETENTION_BATCH", &self.retention_batch, 1)?,
            job_retention: parse_job_retention(Some(&self.job_retention))?,
        })
    }
}

/// A bearer token: unset when empty, else at least 16 characters.
fn token(
    name: &'static str,
    raw: &Option<String>,
) -> Result<Option<sume_wire::Secret>, ConfigError> {
    match raw.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) if t.len() < 16 => Err(ConfigError::new(name, "must be at least 16 characters")),
        Some(t) => Ok(Some(sume_wire::Secret::new(t))),
        None => Ok(None),
    }
}
