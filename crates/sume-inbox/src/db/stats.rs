//! Reads across tables (statements of `sql/queries/stats.sql`): the numbers the metrics and an
//! operator watch, each served by a partial index whatever the table sizes.

use serde::Serialize;

use super::{sql, DbError, Store};

/// The numbers an operator checks first (`sume-inbox stats`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Stats {
    /// Jobs not closed yet.
    pub open_jobs: i64,
    /// Events neither applied nor set aside.
    pub waiting: i64,
    /// The oldest of them, in seconds.
    pub oldest_waiting_secs: f64,
    /// Events set aside as not ours.
    pub set_aside: i64,
    /// Job ids Sume knows that have no row.
    pub orphans: i64,
    /// Inbox checks not concluded.
    pub checks_pending: i64,
    /// Dead letters not replayed.
    pub dead_letters: i64,
    /// Disagreements recorded.
    pub disagreements: i64,
    /// The applied schema version.
    pub schema_version: i32,
}

/// The fleet-wide gauges of `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct Gauges {
    /// Events neither applied nor set aside.
    pub waiting: i64,
    /// Seconds the oldest of them (orphans aside) has waited.
    pub oldest_age: f64,
    /// Dead letters not replayed.
    pub dead_letters: i64,
    /// Job ids Sume knows that have no row.
    pub orphans: i64,
    /// Disagreements recorded.
    pub disagreements: i64,
    /// Jobs not closed yet.
    pub open_jobs: i64,
    /// `pg_notification_queue_usage()`, 0 to 1.
    pub notification_queue: f64,
}

impl Store {
    /// The numbers an operator checks first.
    pub async fn stats_summary(&self) -> Result<Stats, DbError> {
        let client = self.client().await?;
        let r = sql::STATS_SUMMARY.query_one(&client, &[]).await?;
        Ok(Stats {
            open_jobs: r.get("open_jobs"),
            waiting: r.get("waiting"),
            oldest_waiting_secs: r.get("oldest_waiting_secs"),
            set_aside: r.get("set_aside"),
            orphans: r.get("orphans"),
            checks_pending: r.get("checks_pending"),
            dead_letters: r.get("dead_letters"),
            disagreements: r.get("disagreements"),
            schema_version: r.get("schema_version"),
        })
    }

    /// The fleet-wide gauges of `/metrics`.
    pub async fn stats_gauges(&self) -> Result<Gauges, DbError> {
        let client = self.client().await?;
        let row = sql::STATS_GAUGES.query_one(&client, &[]).await?;
        Ok(Gauges {
            waiting: row.get("waiting"),
            oldest_age: row.get("oldest_age"),
            dead_letters: row.get("dead_letters"),
            orphans: row.get("orphans"),
            disagreements: row.get("disagreements"),
            open_jobs: row.get("open_jobs"),
            notification_queue: row.get("notification_queue"),
        })
    }
}
