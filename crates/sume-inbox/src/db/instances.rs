//! `sume.instances` and `sume.instance_minutes` (statements of `sql/queries/instances.sql`):
//! each instance's heartbeat and per-minute counters, written by [`crate::actors::heartbeat`], and the
//! list of instances the console and the admin API read; the minutes themselves are in
//! `instance_minutes.rs`.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{sql, DbError, MinuteCounts, Store};
use crate::db::clock::Clock;

/// What an instance says of itself at every heartbeat.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    /// The process's lease owner name (host, pid, random bits).
    pub instance: String,
    /// The host's name.
    pub hostname: String,
    /// The process id.
    pub pid: i32,
    /// The binary's version.
    pub version: String,
    /// When the process started.
    pub started_at: DateTime<Utc>,
    /// Each task and its state (`running`, `finished`, `dead`).
    pub tasks: serde_json::Value,
    /// The names of its SUME_API_KEYS (never the keys).
    pub api_keys: Vec<String>,
}

/// Counts waiting to be written: flush number `seq` counted `counts` in `minute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingMinute {
    /// The flush that took these counts (numbers grow; a retried flush keeps its number).
    pub seq: i64,
    /// The minute they were counted in, truncated.
    pub minute: DateTime<Utc>,
    /// What was counted.
    pub counts: MinuteCounts,
}

/// An instance as the fleet's picture shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct InstanceRow {
    /// The process's lease owner name.
    pub instance: String,
    /// The host's name.
    pub hostname: String,
    /// The process id.
    pub pid: i32,
    /// The binary's version.
    pub version: String,
    /// When the process started.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat, by the database's clock.
    pub last_seen: DateTime<Utc>,
    /// Seconds since its last heartbeat.
    pub silent_secs: f64,
    /// Each task and its state.
    #[schema(value_type = Object)]
    pub tasks: serde_json::Value,
}

impl Store {
    /// Writes the heartbeat and every pending minute in one statement; answers the minute rows
    /// written. Pending minutes of flushes already applied add nothing.
    pub async fn instances_flush(
        &self,
        beat: &Heartbeat,
        pending: &[PendingMinute],
        clock: &Clock,
    ) -> Result<u64, DbError> {
        let seqs: Vec<i64> = pending.iter().map(|p| p.seq).collect();
        let minutes: Vec<DateTime<Utc>> = pending.iter().map(|p| p.minute).collect();
        let column =
            |i: usize| -> Vec<i64> { pending.iter().map(|p| p.counts.values()[i]).collect() };
        let cols: Vec<Vec<i64>> = (0..7).map(column).collect();
        let now = clock.now();
        let client = self.client().await?;
        let row = sql::INSTANCES_FLUSH
            .query_one(
                &client,
                &[
                    &beat.instance,
                    &beat.hostname,
                    &beat.pid,
                    &beat.version,
                    &beat.started_at,
                    &beat.tasks,
                    &now,
                    &seqs,
                    &minutes,
                    &cols[0],
                    &cols[1],
                    &cols[2],
                    &cols[3],
                    &cols[4],
                    &cols[5],
                    &cols[6],
                    &beat.api_keys,
                ],
            )
            .await?;
        let written: i64 = row.get("minutes");
        Ok(written as u64)
    }

    /// Every instance seen (at most `limit`), the most recently seen first.
    pub async fn instances_list(
        &self,
        limit: i64,
        clock: &Clock,
    ) -> Result<Vec<InstanceRow>, DbError> {
        let client = self.client().await?;
        let rows = sql::INSTANCES_LIST
            .query(&client, &[&clock.now(), &limit])
            .await?;
        Ok(rows
            .iter()
            .map(|r| InstanceRow {
                instance: r.get("instance"),
                hostname: r.get("hostname"),
                pid: r.get("pid"),
                version: r.get("version"),
                started_at: r.get("started_at"),
                last_seen: r.get("last_seen"),
                silent_secs: r.get("silent_secs"),
                tasks: r.get("tasks"),
            })
            .collect())
    }

    /// Whether a live instance of the fleet asks Sume about the inbox (it has keys, or its
    /// heartbeat does not say).
    pub async fn instances_keyed_live(&self) -> Result<bool, DbError> {
        let client = self.client().await?;
        let row = sql::INSTANCES_KEYED_LIVE.query_one(&client, &[]).await?;
        Ok(row.get("keyed"))
    }

    /// The names of the API keys the live instances hold (`instances_key_names`), sorted.
    pub async fn instances_live_key_names(&self) -> Result<Vec<String>, DbError> {
        self.instances_key_names(false).await
    }

    /// The names of the API keys held by the instances heard from in the last five minutes,
    /// stopped or not (`instances_key_names`), sorted: those an inbox check's foreign verdict
    /// needs a 404 from.
    pub async fn instances_recent_key_names(&self) -> Result<Vec<String>, DbError> {
        self.instances_key_names(true).await
    }

    /// `instances_key_names`, the stopped instances' keys counted or not.
    async fn instances_key_names(&self, stopped_too: bool) -> Result<Vec<String>, DbError> {
        let client = self.client().await?;
        let row = sql::INSTANCES_KEY_NAMES
            .query_one(&client, &[&stopped_too])
            .await?;
        Ok(row.get("names"))
    }

    /// Removes instances unseen for `forget_hours` (at most 1000 a call).
    pub async fn instances_prune(&self, forget_hours: i32, clock: &Clock) -> Result<u64, DbError> {
        let client = self.client().await?;
        sql::INSTANCES_PRUNE
            .execute(&client, &[&forget_hours, &clock.now()])
            .await
    }
}
