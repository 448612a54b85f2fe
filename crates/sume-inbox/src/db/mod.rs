//! The database: the connection pool, migrations, and every statement the actors run.
//!
//! The actors call only [`Store`] methods; SQL text lives in `sql/queries/*.sql` and is
//! prepared (and cached per connection) by name. Every write is safe to repeat and safe beside
//! another instance: inserts are `on conflict do nothing`, updates are guarded by the state
//! they expect, and jobs are changed only under their row lock.

pub mod admin;
mod inbox;
mod jobs;
pub mod migrate;
mod queries;
mod retention;
mod sweep;
pub mod tls;

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use thiserror::Error;

pub use inbox::{AttachReport, NewDeadLetter, NewEvent};
pub use jobs::{JobRow, NewJob, Registered};
pub use queries::sql;
pub use retention::Removed;
pub use sweep::{ClaimedCheck, ClaimedJob, Concluded, Take, Verdict};

/// A database failure, naming the statement that failed.
#[derive(Debug, Error)]
pub enum DbError {
    #[error("no database connection: {0}")]
    Pool(#[from] PoolError),
    #[error("{statement}: {}", pg_message(source))]
    Query {
        statement: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("migration {version}: {}", pg_message(.1), version = .0)]
    Migration(i32, #[source] tokio_postgres::Error),
    #[error("cannot connect: {}", pg_message(.0))]
    Connect(#[source] tokio_postgres::Error),
    #[error("bad DATABASE_URL: {0}")]
    Config(String),
    #[error("connection closed")]
    Closed,
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
    pub fn query(statement: &'static str, source: tokio_postgres::Error) -> DbError {
        DbError::Query { statement, source }
    }

    /// The database refused the data itself (a data exception or a constraint, SQLSTATE
    /// classes 22 and 23): retrying the same row will not help, unlike an outage.
    pub fn is_bad_data(&self) -> bool {
        match self {
            DbError::Query { source, .. } => source
                .code()
                .is_some_and(|c| c.code().starts_with("22") || c.code().starts_with("23")),
            _ => false,
        }
    }
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
    Ok(target)
}

/// Opens one connection outside the pool (migrations, the CLI), driving it on a task.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client, DbError> {
    let target = target(url)?;
    let (client, connection) = target
        .config
        .connect(target.tls)
        .await
        .map_err(DbError::Connect)?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "database connection ended");
        }
    });
    Ok(client)
}

/// The statement called `name`, prepared once per connection and cached there.
pub(crate) async fn prepare<C: deadpool_postgres::GenericClient>(
    client: &C,
    name: &'static str,
) -> Result<tokio_postgres::Statement, DbError> {
    client
        .prepare_cached(sql(name))
        .await
        .map_err(|e| DbError::query(name, e))
}

/// The shared handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
}

impl Store {
    /// Builds the pool (connections are opened lazily, so this does not need the server up).
    pub fn new(url: &str, size: usize) -> Result<Store, DbError> {
        let target = target(url)?;
        let manager = Manager::from_config(
            target.config,
            target.tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(5)))
            .create_timeout(Some(Duration::from_secs(5)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| DbError::Config(e.to_string()))?;
        Ok(Store { pool })
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, DbError> {
        Ok(self.pool.get().await?)
    }

    /// The applied schema version (0 before the first migration).
    pub async fn schema_version(&self) -> Result<i32, DbError> {
        let client = self.client().await?;
        let row = client
            .query_one(sql("schema_version"), &[])
            .await
            .map_err(|e| DbError::query("schema_version", e))?;
        Ok(row.get(0))
    }
}
