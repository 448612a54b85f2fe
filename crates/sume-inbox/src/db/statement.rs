//! The one way a statement reaches the database.
//!
//! Every statement the daemon runs is a [`Statement`] constant of [`sql`], generated at build
//! time from `sql/queries/*.sql` (see the `sume-sql` crate): `jobs_insert` in `jobs.sql` is
//! `sql::JOBS_INSERT`. Running one prepares it once per connection (cached there) and names it
//! in any error, so a failure reads `jobs_insert: duplicate key ... (23505)`.

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

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

    async fn prepared<C: GenericClient>(
        &self,
        client: &C,
    ) -> Result<tokio_postgres::Statement, DbError> {
        client
            .prepare_cached(self.sql)
            .await
            .map_err(|e| DbError::query(self.name, e))
    }

    /// Runs it and answers every row.
    pub async fn query<C: GenericClient>(
        &self,
        client: &C,
        params: Params<'_>,
    ) -> Result<Vec<Row>, DbError> {
        let stmt = self.prepared(client).await?;
        client
            .query(&stmt, params)
            .await
            .map_err(|e| DbError::query(self.name, e))
    }

    /// Runs it and answers its one row (an error if there is none).
    pub async fn query_one<C: GenericClient>(
        &self,
        client: &C,
        params: Params<'_>,
    ) -> Result<Row, DbError> {
        let stmt = self.prepared(client).await?;
        client
            .query_one(&stmt, params)
            .await
            .map_err(|e| DbError::query(self.name, e))
    }

    /// Runs it and answers its row, if any.
    pub async fn query_opt<C: GenericClient>(
        &self,
        client: &C,
        params: Params<'_>,
    ) -> Result<Option<Row>, DbError> {
        let stmt = self.prepared(client).await?;
        client
            .query_opt(&stmt, params)
            .await
            .map_err(|e| DbError::query(self.name, e))
    }

    /// Runs it and answers how many rows it changed.
    pub async fn execute<C: GenericClient>(
        &self,
        client: &C,
        params: Params<'_>,
    ) -> Result<u64, DbError> {
        let stmt = self.prepared(client).await?;
        client
            .execute(&stmt, params)
            .await
            .map_err(|e| DbError::query(self.name, e))
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
            .starts_with("insert into sume.events"));
        assert!(!sql::JOBS_GET.sql().ends_with(';'));
    }
}
