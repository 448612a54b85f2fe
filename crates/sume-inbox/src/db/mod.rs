//! The database: the connection pool, migrations, and every statement the actors run.
//!
//! The actors call only [`Store`] methods. The files here mirror `sql/queries/`, one per table
//! (`jobs.rs` runs the statements of `jobs.sql`); a method that runs one statement is named as
//! its `.sql` entry (`jobs_claim_due`), a method that runs a whole transaction is named for
//! what it does and lives with the concern it serves (`close.rs`: the transactions that fold
//! observations onto jobs; `retention.rs`). Statements are run only through [`Statement`]
//! (named in errors; prepared once per connection, or unnamed behind a transaction-mode pooler,
//! see `session.rs`); the only SQL text in Rust is the migration runner's. Every write is safe to repeat and safe beside another instance: inserts are
//! `on conflict do nothing`, updates are guarded by the state they expect, and jobs are changed
//! only under their row lock.

pub mod clock;
mod close_transactions;
mod connection;
mod dead_letters;
mod disagreements;
mod events;
mod give_up_rechecks;
pub mod grants;
mod hosts;
mod inbox_batch;
mod inbox_checks;
mod instance_minutes;
mod instances;
mod job_closes;
mod job_polls;
mod jobs;
mod jobs_list;
mod jobs_poll;
mod json_columns;
mod key_sweeps;
pub mod migrate;
mod notifications;
mod pages;
mod pools;
mod rate_buckets;
pub mod reach;
mod retention_deletes;
mod statement;
mod stats;
pub mod tls;
pub mod url_parts;
mod value_names;

use std::time::Duration;

use deadpool_postgres::{Pool, PoolError};
use thiserror::Error;

pub use clock::Clock;
pub use close_transactions::{AttachReport, ReconcileObservation};
pub use connection::{spoils_session, Conn, Protocol, Session, Tx};
pub use dead_letters::{DeadLetterBody, DeadLetterRow, NewDeadLetter};
pub use disagreements::DisagreementRow;
pub use events::{
    AskAgainStep, Attachable, EventRow, Inserted, NewEvent, StoredDelivery, WaitingEvent,
};
pub use give_up_rechecks::ClaimedRecheck;
pub use inbox_checks::{CheckRow, ClaimedCheck, Concluded, Verdict};
pub use instance_minutes::{FleetMinute, MinuteCounts};
pub use instances::{Heartbeat, InstanceRow, PendingMinute};
pub use job_closes::{BadCursor, ClosesListener, FeedCursor, FeedEntry, FeedPage};
pub use job_polls::{kept_answer, PollRow, PolledCall, ANSWER_MAX_CHARS, POLL_HISTORY};
pub use jobs::{JobDetail, JobRow, JobsListener, NewJob, Registered};
pub use jobs_list::JobFilter;
pub use jobs_poll::{Claim, ClaimedJob, GiveUp, PollDone};
pub use key_sweeps::{KeyLoad, KeySweep};
pub use notifications::Listener;
pub use pages::{AuditEntry, Disagreement, Orphan, PageKey, SetAsideEvent, PAGE_LIMIT_MAX};
pub(crate) use pools::pool_message;
pub use pools::CONNECTION_LIFETIME;
pub use rate_buckets::{KeyReadsToday, Take};
pub use reach::{connect, connect_named};
pub use retention_deletes::{Ages, Removed};
pub use statement::{sql, Params, Statement};
pub use stats::{Gauges, Stats, NO_KEYS};
pub use value_names::{
    CloserName, JobStateName, OutcomeName, SourceName, VerdictName, CLOSERS, JOB_STATES, OUTCOMES,
    SOURCES, VERDICTS,
};

/// A database failure, naming the statement that failed.
#[derive(Debug, Error)]
pub enum DbError {
    /// No connection from the pool (the server is down or refuses us, or every connection is
    /// busy): the server's words or the network's, as the start's `cannot connect` gives them.
    #[error("no database connection: {}", pool_message(.0))]
    Pool(#[from] PoolError),
    /// A statement failed (refused for want of a privilege, the words say what to grant).
    #[error("{statement}: {}", grants::statement_words(source))]
    Query {
        /// The statement's name (its `-- name:` in `sql/queries/`).
        statement: &'static str,
        /// The server's or the connection's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A transaction could not begin or commit.
    #[error("{what}: {step}: {}", pg_message(source))]
    Transaction {
        /// The method that runs the transaction.
        what: &'static str,
        /// `begin` or `commit`.
        step: &'static str,
        /// The server's or the connection's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A migration failed (it was rolled back).
    #[error("migration {version}: {}", pg_message(.1), version = .0)]
    Migration(i32, #[source] tokio_postgres::Error),
    /// A connection outside the pool could not be opened.
    #[error("cannot connect: {}", pg_message(.0))]
    Connect(#[source] tokio_postgres::Error),
    /// The server behind a setting's URL could not be reached, or refused us.
    #[error("{setting} ({target}): cannot connect: {problem}")]
    Unreachable {
        /// The setting holding the URL (`DATABASE_URL`, `MIGRATE_DATABASE_URL`, ...).
        setting: &'static str,
        /// User, hosts, ports and database tried (never the password).
        target: String,
        /// The server's or the network's words, and what to check when waiting cannot help.
        problem: String,
        /// Waiting cannot help (a wrong password, role, database or host name).
        permanent: bool,
    },
    /// The role behind a setting's URL may not do what was asked (set up the schema): waiting
    /// cannot help.
    #[error("{setting} ({target}): {problem}")]
    Refused {
        /// The setting holding the URL.
        setting: &'static str,
        /// User, hosts, ports and database (never the password).
        target: String,
        /// The server's words, and what to do.
        problem: String,
    },
    /// SIGTERM or SIGINT came while the start waited for the server behind a setting's URL
    /// (to answer, or to grant the migrations' lock).
    #[error(
        "{setting} ({target}): stopped on request (SIGTERM or SIGINT) before the database answered"
    )]
    Abandoned {
        /// The setting holding the URL.
        setting: &'static str,
        /// User, hosts, ports and database (never the password).
        target: String,
    },
    /// An operator's write refused before it was done: the role may not record it.
    #[error("the database role may not write the audit log (insert on sume.audit_log): grant it, as README's \"Least privilege\" lists; nothing was done")]
    AuditUnwritable,
    /// DATABASE_URL cannot be used as it is.
    #[error("bad DATABASE_URL: {0}")]
    Config(String),
    /// A connection outside the pool ended.
    #[error("connection closed")]
    Closed,
    /// A connection outside the pool, open and working, was cut (the server stopped or ended
    /// it, the network failed).
    #[error("connection lost: {}", pg_message(.0))]
    Lost(#[source] tokio_postgres::Error),
    /// The database holds something the code never writes: a bug, or a hand edit.
    #[error("unexpected database state: {0}")]
    Invariant(String),
}

/// The server's own message (with its SQLSTATE) when there is one: tokio-postgres alone prints
/// only "db error".
fn pg_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => match std::error::Error::source(e) {
            Some(inner) => format!("{e}: {inner}"),
            None => e.to_string(),
        },
    }
}

impl DbError {
    /// A failure of the statement named `statement`.
    pub fn query(statement: &'static str, source: tokio_postgres::Error) -> DbError {
        DbError::Query { statement, source }
    }

    /// The schema is not there yet (no `sume` schema or table): `sume-inbox migrate` is due.
    pub fn is_missing_schema(&self) -> bool {
        use tokio_postgres::error::SqlState;
        match self {
            DbError::Query { source, .. } => source.code().is_some_and(|c| {
                *c == SqlState::UNDEFINED_TABLE || *c == SqlState::INVALID_SCHEMA_NAME
            }),
            _ => false,
        }
    }

    /// Waiting cannot help: the server refused who we are or what we asked for (a statement
    /// too, for want of a privilege).
    pub fn is_permanent(&self) -> bool {
        self.is_denied()
            || matches!(
                self,
                DbError::Unreachable {
                    permanent: true,
                    ..
                } | DbError::Refused { .. }
            )
    }

    /// The database refused the data itself (SQLSTATE 22 data exception, 23 constraint, 54 a
    /// limit: an index entry too large, a value nested too deep): retrying will not help.
    pub fn is_bad_data(&self) -> bool {
        match self {
            DbError::Query { source, .. } => source
                .code()
                .is_some_and(|c| matches!(c.code().get(..2), Some("22" | "23" | "54"))),
            _ => false,
        }
    }
}

/// Whether PostgreSQL's `text` can hold `s`: anything but a NUL character. No stored id holds
/// one, so such a key names no row; and a statement given one fails (SQLSTATE 22021) as an
/// outage would, so the admin API and the console answer such input before any query.
pub fn text_can_hold(s: &str) -> bool {
    !s.contains('\0')
}

/// Reads DATABASE_URL (TLS included, see [`tls`]), naming this service to the server.
pub fn target(url: &str) -> Result<tls::Target, DbError> {
    let mut target = tls::target(url)?;
    if target.config.get_application_name().is_none() {
        target.config.application_name("sume-inbox");
    }
    if target.config.get_connect_timeout().is_none() {
        target.config.connect_timeout(Duration::from_secs(5));
    }
    liveness_defaults(&mut target.config, url);
    Ok(target)
}

/// How long the pool waits for a new connection: every host of the URL its `connect_timeout`
/// (a host that went silent, e.g. the old primary of a failover named first, costs that much
/// before the next one is tried), and 5 s more for the handshake.
pub(crate) fn create_timeout(config: &tokio_postgres::Config) -> Duration {
    let hosts = config
        .get_hosts()
        .len()
        .max(config.get_hostaddrs().len())
        .max(1) as u32;
    let per_host = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(Duration::from_secs(5));
    per_host * hosts + Duration::from_secs(5)
}

/// `tcp_user_timeout` where DATABASE_URL names none: a connection whose data the server has
/// not acknowledged for this long (its address went silent: a failover, a dropped NAT entry)
/// fails, and the pool opens another, instead of waiting for the kernel's own limit (about
/// 15 minutes). On Linux it also ends an idle connection whose keepalive probes go unanswered
/// this long after the last word from the server.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(20);
/// `keepalives_idle` where DATABASE_URL names none: the first probe of an idle connection
/// (LISTEN's, an idle one of the pool) after this much silence (the system's default is 2 h).
pub const KEEPALIVES_IDLE: Duration = Duration::from_secs(10);
/// `keepalives_interval` where DATABASE_URL names none: between two probes.
pub const KEEPALIVES_INTERVAL: Duration = Duration::from_secs(5);
/// `keepalives_retries` where DATABASE_URL names none: unanswered probes before the end
/// (idle + interval x retries = [`TCP_USER_TIMEOUT`], where that timeout is not supported).
pub const KEEPALIVES_RETRIES: u32 = 2;

/// Sets the TCP liveness settings DATABASE_URL leaves out (libpq's parameter names; what the
/// URL names, `0` included, is kept as it is).
fn liveness_defaults(config: &mut tokio_postgres::Config, url: &str) {
    let names = param_names(url);
    let named = |key: &str| names.iter().any(|n| n == key);
    if !named("tcp_user_timeout") {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    if !named("keepalives_idle") {
        config.keepalives_idle(KEEPALIVES_IDLE);
    }
    if !named("keepalives_interval") {
        config.keepalives_interval(KEEPALIVES_INTERVAL);
    }
    if !named("keepalives_retries") {
        config.keepalives_retries(KEEPALIVES_RETRIES);
    }
}

/// The parameter names of a URL's query (`postgres://...?a=1&b=2`, found after the
/// credentials as libpq finds it) or of a key-value string (`host=... a=1`).
fn param_names(url: &str) -> Vec<String> {
    let pairs: Vec<&str> = match url_parts::UrlParts::parse(url) {
        Ok(Some(parts)) => parts.pairs().collect(),
        Ok(None) => url.split_whitespace().collect(),
        Err(_) => Vec::new(),
    };
    pairs
        .iter()
        .filter_map(|p| p.split_once('=').map(|(k, _)| k.trim().to_owned()))
        .collect()
}

pub(crate) use connection::{begin, commit};

/// The shared handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// The ingest writers' own connections, taken out of the pool's (see [`pools`]).
    writers: Option<Pool>,
    /// How the pool's statements are sent.
    protocol: Protocol,
    /// Where attach's LISTEN connection goes (DATABASE_URL unless told otherwise); `None`
    /// behind a transaction-mode pooler without LISTEN_DATABASE_URL: no LISTEN at all.
    listen_url: Option<std::sync::Arc<str>>,
    /// The setting `listen_url` comes from, which a failure to reach it names.
    listen_setting: &'static str,
    /// How long a connection serves (see [`pools`]).
    lifetime: Duration,
    /// The writers' last batch failed on a read-only session (shared by every clone).
    writers_read_only: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Store {
    /// Builds the pool (connections are opened lazily, so this does not need the server up).
    /// Statements are prepared once per connection, and attach listens on `url` too.
    pub fn new(url: &str, size: usize) -> Result<Store, DbError> {
        Store::with_lifetime(url, size, CONNECTION_LIFETIME)
    }

    /// As [`Store::new`], each connection serving `lifetime` at most instead of
    /// [`CONNECTION_LIFETIME`] (the tests' shorter one).
    pub fn with_lifetime(url: &str, size: usize, lifetime: Duration) -> Result<Store, DbError> {
        Ok(Store {
            pool: pools::build(url, size, pools::Plans::Auto, lifetime)?,
            writers: None,
            protocol: Protocol::Prepared,
            listen_url: Some(url.into()),
            listen_setting: "DATABASE_URL",
            lifetime,
            writers_read_only: Default::default(),
        })
    }

    /// The same pool behind a transaction-mode pooler: unnamed statements only, and LISTEN
    /// only over `listen_url`, a direct connection (none: attach learns of job rows from
    /// ingest's hints and its catch-up scan).
    pub fn behind_pooler(self, listen_url: Option<&str>) -> Store {
        if let Some(writers) = &self.writers {
            self.pool
                .resize(self.pool.status().max_size + writers.status().max_size);
        }
        Store {
            writers: None,
            protocol: Protocol::unnamed(),
            listen_url: listen_url.map(Into::into),
            listen_setting: "LISTEN_DATABASE_URL",
            ..self
        }
    }

    /// Sends LISTEN to `url`, the value of `setting`, instead of the pool's server.
    pub fn listen_on(self, setting: &'static str, url: &str) -> Store {
        Store {
            listen_url: Some(url.into()),
            listen_setting: setting,
            ..self
        }
    }

    /// Whether attach can LISTEN for job rows.
    pub fn can_listen(&self) -> bool {
        self.listen_url.is_some()
    }

    /// The pool itself, for its status and for code that runs its own SQL (an application
    /// sharing the database, the tests).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A connection of the pool, with this store's protocol.
    pub async fn conn(&self) -> Result<Conn, DbError> {
        Ok(Conn::new(self.pool.get().await?, self.protocol.clone()))
    }

    async fn client(&self) -> Result<Conn, DbError> {
        self.conn().await
    }
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
