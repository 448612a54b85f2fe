//! Where the daemon's database work goes: `DB_POOLER`, `MIGRATE_DATABASE_URL` and
//! `LISTEN_DATABASE_URL`, beside `DATABASE_URL` (the pool).
//!
//! Behind a pooler in transaction mode (PgBouncer's `pool_mode = transaction`) a client keeps a
//! server connection only for the length of a transaction, so nothing may outlive one: no named
//! prepared statement, no session setting, no session advisory lock, no `LISTEN`. With
//! `DB_POOLER=transaction` the pool sends unnamed statements only (see `db/session.rs`),
//! migrations at start go to `MIGRATE_DATABASE_URL` or are left to `sume-inbox migrate` run as
//! a step of its own, and attach listens over `LISTEN_DATABASE_URL` or not at all (it then
//! learns of job rows from ingest's hints, the admin API and a shorter catch-up scan).

use sume_wire::Secret;

use super::ConfigError;

/// What sits between the daemon and PostgreSQL on `DATABASE_URL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooler {
    /// PostgreSQL itself, or a pooler in session mode: a client keeps its server connection.
    #[default]
    None,
    /// A pooler in transaction mode: a client holds a server connection for one transaction.
    Transaction,
}

impl Pooler {
    /// Refuses `setting`'s URL (MIGRATE_DATABASE_URL, LISTEN_DATABASE_URL) when it is
    /// `database_url` itself behind a transaction pooler: a session's work (the migrations'
    /// advisory lock, LISTEN) would go to the pooler. `serve` and `migrate` apply the same rule.
    pub fn check_direct(
        self,
        setting: &'static str,
        url: &str,
        database_url: &str,
    ) -> Result<(), ConfigError> {
        if self == Pooler::Transaction && url == database_url {
            return Err(ConfigError::new(
                setting,
                "is DATABASE_URL, the transaction pooler, with DB_POOLER=transaction: it must be a direct connection to PostgreSQL (or unset)",
            ));
        }
        Ok(())
    }
}

/// Where each kind of database work goes.
#[derive(Debug, Clone, Default)]
pub struct DatabaseRoutes {
    /// DB_POOLER.
    pub pooler: Pooler,
    /// MIGRATE_DATABASE_URL: a direct connection for the migrations at start.
    pub migrate_url: Option<Secret>,
    /// LISTEN_DATABASE_URL: a direct connection for attach's LISTEN.
    pub listen_url: Option<Secret>,
}

impl DatabaseRoutes {
    /// The URL the migrations run on at start; `None` behind a transaction pooler without
    /// MIGRATE_DATABASE_URL (the schema must then be current already).
    pub fn migrate_at_start<'a>(&'a self, database_url: &'a Secret) -> Option<&'a str> {
        match (&self.migrate_url, self.pooler) {
            (Some(url), _) => Some(url.expose()),
            (None, Pooler::None) => Some(database_url.expose()),
            (None, Pooler::Transaction) => None,
        }
    }
}
