//! The pool, and the ingest writers' connections carved out of it.
//!
//! Directly connected, a statement is prepared once per connection, and PostgreSQL chooses at
//! each run between the plan it made for the parameters' values (a custom plan, planned again
//! each time) and one generic plan (planned once): `plan_cache_mode = auto` keeps the custom
//! plans while they look cheaper. The ingest insert takes its rows as arrays, and a custom
//! plan counts the elements where a generic one assumes ten: every batch of fewer than ten
//! rows (every batch of a few dozen clients) looks cheaper custom, so the statement was planned
//! at every run, a quarter of PostgreSQL's CPU per event at 16 connections
//! (docs/benchmarks.md, "A quarter of the receiver's CPU"). Its plan does not depend on the
//! values (every row is looked up by its key), and its generic plan is the one
//! `tests/it/plans_from_empty.rs` checks; so the writers' connections plan once
//! (`plan_cache_mode = force_generic_plan`, set on each new connection) and keep that plan.
//! Other statements keep PostgreSQL's choice: a range bound such as a retention cutoff plans
//! better knowing its value. The writers' connections are taken out of `DB_POOL_SIZE`, so the
//! instance opens no more connections than before; where that would leave the pool fewer than
//! two, or behind a transaction-mode pooler (where a session setting would stay on a server
//! connection that another client gets next, and an unnamed statement is planned at each run
//! anyway), the writers share the pool as the rest do.
//!
//! A connection reads the role's and the database's settings (`alter role ... set`, `alter
//! database ... set`: `default_transaction_read_only`, `statement_timeout`, ...) once, when it
//! opens. So that a change of them reaches every connection, none serves longer than
//! [`CONNECTION_LIFETIME`]: an older one is closed when next taken from the pool, and a new
//! one opened in its place. A connection whose statement failed in a way that shows its
//! session is wrong is closed at once (`connection.rs`, `spoils_session`).

use deadpool_postgres::{
    HookError, Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime, Status,
};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{create_timeout, pg_message, target, DbError, Protocol, Store};

/// How a pool's connections choose their plans.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Plans {
    /// PostgreSQL's choice (`plan_cache_mode = auto`).
    Auto,
    /// One generic plan per prepared statement, made at its first run.
    Generic,
}

/// The least the shared pool keeps for attach, the sweep and the API.
const SHARED_AT_LEAST: usize = 2;

/// How long a caller waits for a connection of the pool while every one is in use.
const WAIT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a connection of the pool (or of the writers) serves: older, it is closed when
/// next taken, and another opened, which reads the role's and the database's settings as
/// they are now.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(5 * 60);

/// A pool of `size` connections to `url` (opened lazily, so this does not need the server up),
/// each closed once `lifetime` old.
pub(super) fn build(
    url: &str,
    size: usize,
    plans: Plans,
    lifetime: Duration,
) -> Result<Pool, DbError> {
    let target = target(url)?;
    let create_timeout = create_timeout(&target.config);
    let manager = Manager::from_config(
        target.config,
        target.tls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let mut builder = Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(WAIT_TIMEOUT))
        .create_timeout(Some(create_timeout))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .pre_recycle(deadpool_postgres::Hook::sync_fn(move |_, metrics| {
            if metrics.age() < lifetime {
                Ok(())
            } else {
                Err(HookError::message("past its lifetime"))
            }
        }));
    if plans == Plans::Generic {
        builder = builder.post_create(deadpool_postgres::Hook::async_fn(|client, _| {
            Box::pin(async move {
                client
                    .batch_execute("set plan_cache_mode = force_generic_plan")
                    .await
                    .map_err(HookError::Backend)
            })
        }));
    }
    builder.build().map_err(|e| DbError::Config(e.to_string()))
}

/// Why the pool gave no connection, in the server's or the network's words: deadpool's own
/// text says only "Error occurred while creating a new object: db error".
pub(crate) fn pool_message(e: &PoolError) -> String {
    use deadpool_postgres::TimeoutType;
    match e {
        PoolError::Backend(pg) | PoolError::PostCreateHook(HookError::Backend(pg)) => {
            pg_message(pg)
        }
        PoolError::Timeout(TimeoutType::Wait) => {
            format!("every connection of the pool stayed busy for {WAIT_TIMEOUT:?}")
        }
        PoolError::Timeout(TimeoutType::Create) => {
            "the server did not answer in time (connect_timeout, then the handshake)".into()
        }
        PoolError::Timeout(TimeoutType::Recycle) => {
            "a pooled connection did not answer in time".into()
        }
        other => other.to_string(),
    }
}

impl Store {
    /// Gives the `writers` ingest writers connections of their own, out of the pool's, on
    /// which statements plan once (see the module's notes); unchanged behind a
    /// transaction-mode pooler, or when the pool would keep fewer than two.
    pub fn with_writer_connections(mut self, url: &str, writers: usize) -> Result<Store, DbError> {
        let size = self.pool.status().max_size;
        if matches!(self.protocol, Protocol::Unnamed(_))
            || writers == 0
            || size < writers + SHARED_AT_LEAST
        {
            return Ok(self);
        }
        self.writers = Some(build(url, writers, Plans::Generic, self.lifetime)?);
        self.pool.resize(size - writers);
        Ok(self)
    }

    /// Records whether the ingest writers' last batch failed because their session may not
    /// write (a read-only transaction): `/readyz` then asks on one of their connections
    /// rather than the pool's, until one answers that it may write.
    pub fn note_writers_read_only(&self, read_only: bool) {
        self.writers_read_only.store(read_only, Ordering::Release);
    }

    /// Whether the writers' last batch found their session read-only (see
    /// [`Store::note_writers_read_only`]).
    pub fn writers_read_only(&self) -> bool {
        self.writers_read_only.load(Ordering::Acquire)
    }

    /// Whether the ingest writers have connections of their own.
    pub fn writers_apart(&self) -> bool {
        self.writers.is_some()
    }

    /// The store the ingest writers write through: its pool is their connections where they
    /// have their own, else this store's pool (a replay from the API or the console writes
    /// through the shared pool, and never waits for a writer's connection).
    pub fn for_writers(&self) -> Store {
        match &self.writers {
            Some(writers) => Store {
                pool: writers.clone(),
                writers: None,
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// Connections open, idle and waited for, over the pool and the writers' connections.
    pub fn pools_status(&self) -> Status {
        let mut status = self.pool.status();
        if let Some(writers) = &self.writers {
            let w = writers.status();
            status.max_size += w.max_size;
            status.size += w.size;
            status.available += w.available;
            status.waiting += w.waiting;
        }
        status
    }
}
