//! Reads across tables (statements of `sql/queries/stats.sql`): the numbers the metrics and an
//! operator watch, each served by a partial index whatever the table sizes.

use serde::Serialize;

use super::{sql, DbError, KeyReadsToday, Store};

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
    /// Instances heard from in the last five minutes, not stopped.
    #[serde(default)]
    pub instances_live: i64,
    /// Of them, instances running without SUME_API_KEYS: their sweep asks Sume nothing.
    #[serde(default)]
    pub instances_without_keys: i64,
    /// Of them, instances with SUME_API_KEYS.
    #[serde(default)]
    pub instances_with_keys: i64,
    /// Open jobs naming an `api_key` that no live instance has: never polled.
    #[serde(default)]
    pub open_jobs_unknown_key: i64,
    /// Each API key's reads of Sume this UTC day, against SUME_READ_DAILY and the day's pace:
    /// the keys a live instance holds only (not those of instances stopped, nor a key taken out).
    #[serde(default)]
    pub reads_today: Vec<KeyReadsToday>,
}

impl Stats {
    /// Instances run and none has an API key: nothing is set aside, judged or polled.
    pub fn sweep_has_no_keys(&self) -> bool {
        self.instances_live > 0 && self.instances_with_keys == 0
    }
}

/// What [`Stats::sweep_has_no_keys`] means, as the console and `stats` say it.
pub const NO_KEYS: &str = "no API keys (SUME_API_KEYS): the sweep cannot judge the inbox or poll open jobs; events of unknown jobs wait, lost webhooks are never recovered";

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
        let reads_today = self.rate_buckets_today().await?;
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
            instances_live: r.get("instances_live"),
            instances_without_keys: r.get("instances_without_keys"),
            instances_with_keys: r.get("instances_with_keys"),
            open_jobs_unknown_key: r.get("open_jobs_unknown_key"),
            reads_today,
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

impl Store {
    /// Open jobs naming a key not among `keys`, by key name (at most ten).
    pub async fn jobs_open_unknown_keys(
        &self,
        keys: &[String],
    ) -> Result<Vec<(String, i64)>, DbError> {
        let client = self.client().await?;
        let rows = sql::STATS_UNKNOWN_KEYS.query(&client, &[&keys]).await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}
