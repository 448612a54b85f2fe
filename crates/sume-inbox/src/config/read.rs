//! [`Config`] built from the declared settings: each part reads its settings through
//! [`Values`]' typed readers, and every default comes from a declaration, so `Default` of a
//! part is that part read from nothing set.

use std::net::SocketAddr;

use super::declared::*;
use super::model::*;
use super::setting::human;
use super::values::Values;
use super::{ApiKey, ConfigError, DatabaseRoutes, Pooler};

/// `ATTACH_SCAN_INTERVAL` behind a transaction pooler without LISTEN: the catch-up scan is then
/// how attach learns of a job row committed after its events.
pub const SCAN_INTERVAL_WITHOUT_LISTEN: std::time::Duration = std::time::Duration::from_secs(1);

/// `MAX_ADMIN_CONNECTIONS` when unset: the waiters, and room for the other requests.
pub const ADMIN_CONNECTIONS_BESIDE_WAITERS: usize = 100;

impl Config {
    /// Every `serve` setting read and checked, one value and then the rules between two; a
    /// problem is reported by the name the operator set, with every other setting's that
    /// reading each alone finds (`problems.rs`).
    pub fn read(v: &Values) -> Result<Config, ConfigError> {
        Config::read_to_first(v).map_err(|first| super::problems::with_every_problem(v, first))
    }

    /// [`Config::read`], stopping at the first problem.
    fn read_to_first(v: &Values) -> Result<Config, ConfigError> {
        let database = DatabaseRoutes::read(v)?;
        let wait = WaitConfig::read(v)?;
        let config = Config {
            database_url: v.postgres_url(&DATABASE_URL)?,
            db_pool_size: v.count(&DB_POOL_SIZE)?,
            webhook_secrets: v.secrets(&SUME_WEBHOOK_SECRET)?,
            sume_api_url: v.http_url(&SUME_API_URL)?,
            sume_api_allow_plaintext: v.switch(&SUME_API_ALLOW_PLAINTEXT)?,
            api_keys: api_keys(v)?,
            listen_addr: v.address(&LISTEN_ADDR)?,
            admin_addr: v.address(&ADMIN_ADDR)?,
            admin_token: v.token(&ADMIN_TOKEN)?,
            admin_app_token: v.token(&ADMIN_APP_TOKEN)?,
            admin_hosts: v.names(&ADMIN_HOSTS)?,
            max_admin_connections: v
                .optional_count(&MAX_ADMIN_CONNECTIONS)?
                .unwrap_or(wait.max_waiters + ADMIN_CONNECTIONS_BESIDE_WAITERS),
            webhook_tolerance: v.duration(&WEBHOOK_TOLERANCE)?,
            max_body_bytes: v.size(&MAX_BODY_BYTES)?,
            port: PortConfig::read(v)?,
            ingest: IngestConfig::read(v)?,
            attach: AttachConfig::read(v, &database)?,
            sweep: SweepConfig::read(v)?,
            shutdown_timeout: v.duration(&SHUTDOWN_TIMEOUT)?,
            wait,
            database,
            fleet: FleetConfig::default(),
        };
        v.named(config.check(v))?;
        Ok(config)
    }

    /// A daemon on this machine with `serve`'s defaults: both listeners on a free loopback
    /// port, the given database and webhook secret, no Sume keys (so no sweep requests). Tests,
    /// the demo and the benchmark start from this and change what they study.
    pub fn local(database_url: &str, webhook_secret: &str) -> Config {
        let values = Values::defaults()
            .with(&DATABASE_URL, database_url)
            .with(&SUME_WEBHOOK_SECRET, webhook_secret)
            .with(&LISTEN_ADDR, "127.0.0.1:0")
            .with(&ADMIN_ADDR, "127.0.0.1:0");
        Config::read(&values).expect("the declared defaults are a working configuration")
    }
}

/// SUME_API_KEYS, else SUME_API_KEY as `default`, else none.
pub fn api_keys(v: &Values) -> Result<Vec<ApiKey>, ConfigError> {
    let keys = v.api_keys(&SUME_API_KEYS)?;
    if !keys.is_empty() {
        return Ok(keys);
    }
    Ok(v.secret(&SUME_API_KEY)?
        .map(|key| ApiKey {
            name: "default".to_owned(),
            key,
        })
        .into_iter()
        .collect())
}

/// What an operator may not have meant by the two key settings: SUME_API_KEY beside
/// SUME_API_KEYS (it is not read), or written in SUME_API_KEYS's `name:key` form (it is one
/// key, used whole, named `default`). Warnings, not refusals: both forms work as documented.
pub fn api_key_doubts(v: &Values) -> Vec<String> {
    let Some(single) = v.text(&SUME_API_KEY) else {
        return Vec::new();
    };
    if v.is_set(&SUME_API_KEYS) {
        return vec![format!(
            "{} is ignored: {} is set, and only its keys are used",
            SUME_API_KEY.name, SUME_API_KEYS.name
        )];
    }
    let named = single.split_once(':').is_some_and(|(name, key)| {
        !name.is_empty()
            && !key.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    });
    if named {
        return vec![format!(
            "{} is one key, used whole and named default; its `name:` prefix is part of the key \
             sent to Sume: for a named key, set {}=name:key instead",
            SUME_API_KEY.name, SUME_API_KEYS.name
        )];
    }
    Vec::new()
}

/// SUME_READ_RATE and SUME_READ_DAILY above Sume's documented limits (120 reads a minute,
/// 10,000 a day, per key): one warning each, naming the setting and the limit. Warnings, not
/// refusals: a workspace may have a raised limit. A value that does not read is left to its
/// refusal.
pub fn rate_doubts(v: &Values) -> Vec<String> {
    let mut doubts = Vec::new();
    if let Ok(rate) = v.rate(&SUME_READ_RATE) {
        let most = rate.most_in_a_minute();
        if most > f64::from(SUME_READS_A_MINUTE) {
            doubts.push(format!(
                "{} lets the fleet read up to {most:.0} times a minute per key (a burst of {} \
                 and {:.0} a minute), above Sume's documented {SUME_READS_A_MINUTE} a minute: \
                 expect 429s, unless this workspace's limit was raised",
                v.quote(
                    &SUME_READ_RATE,
                    &format!("{}/{}", rate.count, human(rate.per))
                ),
                rate.burst(),
                rate.per_second() * 60.0,
            ));
        }
    }
    if let Ok(daily) = v.count(&SUME_READ_DAILY) {
        if daily > SUME_READS_A_DAY {
            doubts.push(format!(
                "{} is above Sume's documented {SUME_READS_A_DAY} reads a day per key (UTC): \
                 expect 429s once they are spent, unless this workspace's limit was raised",
                v.quote(&SUME_READ_DAILY, &daily.to_string()),
            ));
        }
    }
    doubts
}

/// Durations written with an `M`, which the parser reads as months (`SWEEP_INTERVAL=1M`, a
/// month, where a minute was likely meant): one warning each, saying how it was read. A rule
/// between settings catches some (`POLL_AFTER`), not all.
pub fn month_doubts(v: &Values) -> Vec<String> {
    super::declared::all()
        .filter(|s| {
            matches!(
                s.form,
                super::Form::Duration { .. } | super::Form::DurationOr { .. }
            )
        })
        .filter_map(|s| {
            let raw = v.text(s)?;
            let read = humantime::parse_duration(raw.trim()).ok()?;
            (!super::months_hint(raw).is_empty()).then(|| {
                format!(
                    "{}: {}: write m if minutes were meant",
                    s.name,
                    super::read_as(raw, read)
                )
            })
        })
        .collect()
}

/// DB_POOLER as its value.
pub fn pooler(v: &Values) -> Result<Pooler, ConfigError> {
    Ok(match v.choice(&DB_POOLER)? {
        "transaction" => Pooler::Transaction,
        _ => Pooler::None,
    })
}

impl DatabaseRoutes {
    /// DB_POOLER, MIGRATE_DATABASE_URL, LISTEN_DATABASE_URL.
    pub fn read(v: &Values) -> Result<DatabaseRoutes, ConfigError> {
        Ok(DatabaseRoutes {
            pooler: pooler(v)?,
            migrate_url: v.optional_postgres_url(&MIGRATE_DATABASE_URL)?,
            listen_url: v.optional_postgres_url(&LISTEN_DATABASE_URL)?,
        })
    }
}

impl PortConfig {
    /// The public port's settings.
    pub fn read(v: &Values) -> Result<PortConfig, ConfigError> {
        Ok(PortConfig {
            header_timeout: v.duration(&HEADER_TIMEOUT)?,
            body_timeout: v.duration(&BODY_TIMEOUT)?,
            idle_timeout: v.duration(&IDLE_TIMEOUT)?,
            max_connections: v.count(&MAX_CONNECTIONS)?,
            max_in_flight: v.count(&MAX_IN_FLIGHT)?,
            max_body_memory: v.size(&MAX_BODY_MEMORY)?,
        })
    }
}

impl IngestConfig {
    /// The ingest writers' settings.
    pub fn read(v: &Values) -> Result<IngestConfig, ConfigError> {
        Ok(IngestConfig {
            writers: v.count(&INGEST_WRITERS)?,
            batch_max: v.count(&INGEST_BATCH_MAX)?,
            timeout: v.duration(&INGEST_TIMEOUT)?,
            retry_after_secs: 5,
        })
    }
}

impl AttachConfig {
    /// The attach task's settings; the scan is shorter where no LISTEN connection can be had.
    pub fn read(v: &Values, database: &DatabaseRoutes) -> Result<AttachConfig, ConfigError> {
        let no_listen = database.pooler == Pooler::Transaction && database.listen_url.is_none();
        let scan_interval = if no_listen && !v.is_set(&ATTACH_SCAN_INTERVAL) {
            SCAN_INTERVAL_WITHOUT_LISTEN
        } else {
            v.duration(&ATTACH_SCAN_INTERVAL)?
        };
        Ok(AttachConfig {
            scan_interval,
            batch_max: 512,
        })
    }
}

impl SweepConfig {
    /// The sweep's and retention's settings, and SUME_READ_RATE, SUME_READ_DAILY, SUME_TIMEOUT.
    pub fn read(v: &Values) -> Result<SweepConfig, ConfigError> {
        Ok(SweepConfig {
            interval: v.duration(&SWEEP_INTERVAL)?,
            inbox_grace: v.duration(&INBOX_GRACE)?,
            poll_after: v.duration(&POLL_AFTER)?,
            poll_max_interval: v.duration(&POLL_MAX_INTERVAL)?,
            poll_give_up: v.duration(&POLL_GIVE_UP)?,
            give_up_recheck: v.duration_or_none(&GIVE_UP_RECHECK)?,
            key_check_max_age: v.duration(&KEY_CHECK_MAX_AGE)?,
            list_walks: v.choice(&LIST_WALKS)? == "auto",
            batch: v.count(&SWEEP_BATCH)?,
            lease: v.duration(&SWEEP_LEASE)?,
            concurrency: v.count(&SWEEP_CONCURRENCY)?,
            read_rate: v.rate(&SUME_READ_RATE)?,
            daily_reads: v.count(&SUME_READ_DAILY)? as u32,
            request_timeout: v.duration(&SUME_TIMEOUT)?,
            retention: v.duration(&RETENTION)?,
            dead_letter_retention: v.duration_or_none(&DEAD_LETTER_RETENTION)?,
            orphan_retention: v.duration(&ORPHAN_RETENTION)?,
            retention_batch: v.count(&RETENTION_BATCH)?,
            job_retention: v.duration_or_none(&JOB_RETENTION)?,
        })
    }
}

impl WaitConfig {
    /// MAX_WAITERS, MAX_WAIT, WAIT_WAKEUP, WAIT_POLL_INTERVAL.
    pub fn read(v: &Values) -> Result<WaitConfig, ConfigError> {
        Ok(WaitConfig {
            max_waiters: v.count(&MAX_WAITERS)?,
            max_wait: v.duration(&MAX_WAIT)?,
            wakeup: match v.choice(&WAIT_WAKEUP)? {
                "poll" => Wakeup::Poll,
                _ => Wakeup::Listen,
            },
            poll_interval: v.duration(&WAIT_POLL_INTERVAL)?,
        })
    }
}

/// `Default` of a part: the part read from nothing set, i.e. its declared defaults.
macro_rules! declared_default {
    ($($part:ty),*) => {$(
        impl Default for $part {
            fn default() -> Self {
                <$part>::read(&Values::defaults()).expect("the declared defaults read")
            }
        }
    )*};
}
declared_default!(PortConfig, IngestConfig, SweepConfig, WaitConfig);

impl Default for AttachConfig {
    fn default() -> Self {
        AttachConfig::read(&Values::defaults(), &DatabaseRoutes::default())
            .expect("the declared defaults read")
    }
}

/// The worker threads of the runtime (WORKER_THREADS), read from the environment before the
/// runtime, and so before the command line, exists.
pub fn worker_threads_from_env() -> Result<usize, ConfigError> {
    Values::from_env(&[&WORKER_THREADS])?.count(&WORKER_THREADS)
}

/// LISTEN_ADDR as `healthcheck` reads it: an unspecified address (0.0.0.0) is reached on
/// loopback.
pub fn local_listen_addr(v: &Values) -> Result<SocketAddr, ConfigError> {
    let mut addr = v.address(&LISTEN_ADDR)?;
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    Ok(addr)
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
