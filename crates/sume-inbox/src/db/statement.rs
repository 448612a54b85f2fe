//! The one way a statement reaches the database.
//!
//! Every statement the daemon runs is a [`Statement`] constant of [`sql`], generated at build
//! time from `sql/queries/*.sql` (see the `sume-sql` crate): `jobs_insert` in `jobs.sql` is
//! `sql::JOBS_INSERT`. It runs on a [`Session`] (a connection of the pool or a transaction),
//! whose [`Protocol`] says how: prepared once per connection and cached there (direct), or
//! unnamed at every run (behind a transaction-mode pooler, see [`super::connection`]). Either way
//! an error names the statement, so a failure reads `jobs_insert: duplicate key ... (23505)`.

use std::sync::Arc;

use deadpool_postgres::GenericClient as _;
use futures_util::{pin_mut, TryStreamExt};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::GenericClient as _;
use tokio_postgres::Row;

use super::connection::{ParamTypes, Protocol, Session};
use super::DbError;

/// The parameters of one statement, in `$n` order.
pub type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// A named SQL statement of `sql/queries/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement {
    name: &'static str,
    sql: &'static str,
}

/// Every named statement of `sql/queries/*.sql`, one constant each.
pub mod sql {
    use super::Statement;
    include!(concat!(env!("OUT_DIR"), "/statements.rs"));
}

impl Statement {
    /// Used by the generated constants only.
    pub const fn new(name: &'static str, sql: &'static str) -> Statement {
        Statement { name, sql }
    }

    /// The name after `-- name:`, which errors and logs use.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The SQL text.
    pub fn sql(&self) -> &'static str {
        self.sql
    }

    /// The error naming this statement, told to the session it met (which may close its
    /// connection, see [`Session::failed`]).
    fn error<'s, S: Session>(
        &self,
        s: &'s S,
    ) -> impl FnOnce(tokio_postgres::Error) -> DbError + 's {
        let name = self.name;
        move |e| {
            s.failed(&e);
            DbError::query(name, e)
        }
    }

    async fn prepared<S: Session>(&self, s: &S) -> Result<tokio_postgres::Statement, DbError> {
        s.pooled()
            .prepare_cached(self.sql)
            .await
            .map_err(self.error(s))
    }

    /// The parameters with their types, for an unnamed run.
    async fn typed<'p, S: Session>(
        &self,
        s: &S,
        known: &ParamTypes,
        params: Params<'p>,
    ) -> Result<Vec<(&'p (dyn ToSql + Sync), Type)>, DbError> {
        let types = match known.get(self.sql) {
            Some(types) => types,
            None => {
                let types = self.learn_types(s).await?;
                known.put(self.sql, types.clone());
                types
            }
        };
        Ok(params.iter().copied().zip(types.iter().cloned()).collect())
    }

    /// Prepares the statement inside a transaction (the session's, or one of its own) only to
    /// read its parameters' types, and closes it before that transaction ends: behind a
    /// transaction-mode pooler the transaction keeps one server connection throughout, and
    /// the name is gone before another client can get that connection.
    async fn learn_types<S: Session>(&self, s: &S) -> Result<Arc<[Type]>, DbError> {
        let raw = s.raw();
        let learn = async {
            let statement = raw.prepare(self.sql).await?;
            Ok::<Arc<[Type]>, tokio_postgres::Error>(statement.params().into())
            // `statement` is dropped here, which sends its Close ahead of what follows.
        };
        if s.in_transaction() {
            return learn.await.map_err(self.error(s));
        }
        s.raw_transaction(true);
        raw.batch_execute("begin").await.map_err(self.error(s))?;
        let learnt = learn.await;
        let end = if learnt.is_ok() { "commit" } else { "rollback" };
        let ended = raw.batch_execute(end).await;
        let types = learnt.map_err(self.error(s))?;
        ended.map_err(self.error(s))?;
        s.raw_transaction(false);
        Ok(types)
    }

    /// Runs it and answers every row.
    pub async fn query<S: Session>(&self, s: &S, params: Params<'_>) -> Result<Vec<Row>, DbError> {
        match s.protocol() {
            Protocol::Prepared => {
                let stmt = self.prepared(s).await?;
                s.pooled().query(&stmt, params).await
            }
            Protocol::Unnamed(known) => {
                let typed = self.typed(s, known, params).await?;
                s.raw().query_typed(self.sql, &typed).await
            }
        }
        .map_err(self.error(s))
    }

    /// Runs it and answers its one row (an error if there is none).
    pub async fn query_one<S: Session>(&self, s: &S, params: Params<'_>) -> Result<Row, DbError> {
        match s.protocol() {
            Protocol::Prepared => {
                let stmt = self.prepared(s).await?;
                s.pooled().query_one(&stmt, params).await
            }
            Protocol::Unnamed(known) => {
                let typed = self.typed(s, known, params).await?;
                s.raw().query_typed_one(self.sql, &typed).await
            }
        }
        .map_err(self.error(s))
    }

    /// Runs it and answers its row, if any.
    pub async fn query_opt<S: Session>(
        &self,
        s: &S,
        params: Params<'_>,
    ) -> Result<Option<Row>, DbError> {
        match s.protocol() {
            Protocol::Prepared => {
                let stmt = self.prepared(s).await?;
                s.pooled().query_opt(&stmt, params).await
            }
            Protocol::Unnamed(known) => {
                let typed = self.typed(s, known, params).await?;
                s.raw().query_typed_opt(self.sql, &typed).await
            }
        }
        .map_err(self.error(s))
    }

    /// Runs it and answers how many rows it changed.
    pub async fn execute<S: Session>(&self, s: &S, params: Params<'_>) -> Result<u64, DbError> {
        match s.protocol() {
            Protocol::Prepared => {
                let stmt = self.prepared(s).await?;
                s.pooled().execute(&stmt, params).await
            }
            Protocol::Unnamed(known) => {
                let typed = self.typed(s, known, params).await?;
                async {
                    let rows = s.raw().query_typed_raw(self.sql, typed).await?;
                    pin_mut!(rows);
                    while rows.try_next().await?.is_some() {}
                    Ok(rows.rows_affected().unwrap_or(0))
                }
                .await
            }
        }
        .map_err(self.error(s))
    }
}

#[cfg(test)]
mod tests {
    use super::sql;

    #[test]
    fn constants_carry_their_name_and_text() {
        assert_eq!(sql::EVENTS_INSERT.name(), "events_insert");
        assert!(sql::EVENTS_INSERT
            .sql()
            .starts_with("with inserted as (\n    insert into sume.events"));
        assert!(!sql::JOBS_GET.sql().ends_with(';'));
    }
}
