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

/// `ATTACH_SCAN_INTERVAL`'s default behind a transaction pooler without LISTEN: the catch-up
/// scan is then how attach learns of a job row committed after its events.
pub const SCAN_INTERVAL_WITHOUT_LISTEN: &str = "1s";

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

/// Reads DB_POOLER: `none` (the default) or `transaction`.
pub fn parse_pooler(raw: &str) -> Result<Pooler, ConfigError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "" | "none" | "session" => Ok(Pooler::None),
        "transaction" => Ok(Pooler::Transaction),
        other => Err(ConfigError::new(
            "DB_POOLER",
            format!("{other:?} is not `none` or `transaction`"),
        )),
    }
}

/// Reads an optional connection URL named `name` (unset or empty: none).
pub fn parse_optional_url(
    name: &'static str,
    raw: Option<&str>,
) -> Result<Option<Secret>, ConfigError> {
    match raw.map(str::trim).filter(|r| !r.is_empty()) {
        None => Ok(None),
        Some(raw) => {
            crate::db::target(raw)
                .map_err(|e| ConfigError::new(name, format!("cannot be read: {e}")))?;
            Ok(Some(Secret::new(raw)))
        }
    }
}

impl DatabaseRoutes {
    /// Refuses what cannot work behind a transaction pooler: a session's work (LISTEN, the
    /// migrations' advisory lock) sent to the pooler itself.
    pub fn validate(&self, database_url: &Secret) -> Result<(), ConfigError> {
        if self.pooler != Pooler::Transaction {
            return Ok(());
        }
        for (name, url) in [
            ("MIGRATE_DATABASE_URL", &self.migrate_url),
            ("LISTEN_DATABASE_URL", &self.listen_url),
        ] {
            if url
                .as_ref()
                .is_some_and(|u| u.expose() == database_url.expose())
            {
                return Err(ConfigError::new(
                    name,
                    "is DATABASE_URL, the transaction pooler, with DB_POOLER=transaction: it must be a direct connection to PostgreSQL (or unset)",
                ));
            }
        }
        Ok(())
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_through_the_transaction_pooler_is_refused() {
        let pooler = Secret::new("postgres://u@bouncer:6432/db");
        let direct = Secret::new("postgres://u@pg:5432/db");
        let mut routes = DatabaseRoutes {
            pooler: Pooler::Transaction,
            migrate_url: Some(pooler.clone()),
            listen_url: None,
        };
        assert_eq!(
            routes.validate(&pooler).unwrap_err().name,
            "MIGRATE_DATABASE_URL"
        );
        routes.migrate_url = Some(direct.clone());
        routes.listen_url = Some(pooler.clone());
        assert_eq!(
            routes.validate(&pooler).unwrap_err().name,
            "LISTEN_DATABASE_URL"
        );
        routes.listen_url = Some(direct.clone());
        assert!(routes.validate(&pooler).is_ok());
        assert_eq!(routes.migrate_at_start(&pooler), Some(direct.expose()));
        routes.migrate_url = None;
        assert_eq!(routes.migrate_at_start(&pooler), None);
        routes.pooler = Pooler::None;
        assert_eq!(routes.migrate_at_start(&pooler), Some(pooler.expose()));
    }

    #[test]
    fn pooler_values() {
        assert_eq!(parse_pooler(""), Ok(Pooler::None));
        assert_eq!(parse_pooler("Transaction"), Ok(Pooler::Transaction));
        assert_eq!(parse_pooler("statement").unwrap_err().name, "DB_POOLER");
        assert_eq!(
            parse_optional_url("LISTEN_DATABASE_URL", Some("nonsense://"))
                .unwrap_err()
                .name,
            "LISTEN_DATABASE_URL"
        );
        assert_eq!(parse_optional_url("X", Some(" ")), Ok(None));
    }
}
