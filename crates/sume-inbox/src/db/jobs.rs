//! Jobs: registration, reading, and the locked read-modify-write every close goes through.

use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use serde::Serialize;
use serde_json::Value;
use sume_wire::JobState;

use super::{prepare, DbError, Store};
use crate::close::JobFold;

/// A registration through the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    pub job_id: String,
    pub order_id: Option<String>,
    pub api_key: Option<String>,
}

/// A job as the admin API answers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRow {
    pub job_id: String,
    pub order_id: Option<String>,
    pub api_key: Option<String>,
    pub state: String,
    pub sume_status: Option<String>,
    pub closed_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub closed_at: Option<DateTime<Utc>>,
    pub result: Option<Value>,
}

/// What a registration found.
#[derive(Debug, Clone, PartialEq)]
pub enum Registered {
    /// A new row was written.
    Created,
    /// The same job was already registered with the same fields: a repeat, nothing changed.
    Existing,
    /// A job with this id exists with a different order or key: refused, nothing changed.
    Conflict(JobRow),
}

impl Store {
    /// Inserts the job (`on conflict do nothing`) and says whether it was new, a repeat, or a
    /// conflicting claim on an existing id.
    pub async fn register_job(&self, job: &NewJob) -> Result<Registered, DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "jobs_insert").await?;
        let inserted = client
            .execute(&stmt, &[&job.job_id, &job.order_id, &job.api_key])
            .await
            .map_err(|e| DbError::query("jobs_insert", e))?;
        if inserted == 1 {
            return Ok(Registered::Created);
        }
        let existing = self.job(&job.job_id).await?.ok_or_else(|| {
            DbError::Invariant(format!("job {} vanished after a conflict", job.job_id))
        })?;
        let same = existing.order_id == job.order_id
            && (job.api_key.is_none() || existing.api_key == job.api_key);
        Ok(if same {
            Registered::Existing
        } else {
            Registered::Conflict(existing)
        })
    }

    pub async fn job(&self, job_id: &str) -> Result<Option<JobRow>, DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "jobs_get").await?;
        let row = client
            .query_opt(&stmt, &[&job_id])
            .await
            .map_err(|e| DbError::query("jobs_get", e))?;
        Ok(row.map(|r| JobRow {
            job_id: r.get("job_id"),
            order_id: r.get("order_id"),
            api_key: r.get("api_key"),
            state: r.get("state"),
            sume_status: r.get("sume_status"),
            closed_by: r.get("closed_by"),
            created_at: r.get("created_at"),
            closed_at: r.get("closed_at"),
            result: r.get("result"),
        }))
    }
}

/// Locks these jobs (in id order) and reads their state into folds.
pub(super) async fn lock(
    tx: &Transaction<'_>,
    job_ids: &[String],
) -> Result<Vec<JobFold>, DbError> {
    let stmt = prepare(tx, "jobs_lock").await?;
    let rows = tx
        .query(&stmt, &[&job_ids])
        .await
        .map_err(|e| DbError::query("jobs_lock", e))?;
    rows.iter()
        .map(|r| {
            let state: String = r.get("state");
            let state = state.parse::<JobState>().map_err(|e| {
                DbError::Invariant(format!(
                    "jobs_lock: job {}: {e}",
                    r.get::<_, String>("job_id")
                ))
            })?;
            Ok(JobFold::new(r.get("job_id"), state, r.get("sume_status")))
        })
        .collect()
}

/// Writes the folds that changed, and their disagreements.
pub(super) async fn write(tx: &Transaction<'_>, folds: &[JobFold]) -> Result<(), DbError> {
    let changed: Vec<&JobFold> = folds.iter().filter(|f| f.changed()).collect();
    if !changed.is_empty() {
        let stmt = prepare(tx, "jobs_apply").await?;
        let ids: Vec<&str> = changed.iter().map(|f| f.job_id.as_str()).collect();
        let states: Vec<&str> = changed.iter().map(|f| f.state.as_str()).collect();
        let statuses: Vec<Option<&str>> =
            changed.iter().map(|f| f.sume_status.as_deref()).collect();
        let closed_by: Vec<Option<&str>> = changed
            .iter()
            .map(|f| f.closed_by.map(|s| s.as_str()))
            .collect();
        let closed_event: Vec<Option<&str>> = changed
            .iter()
            .map(|f| f.closed_event_id.as_deref())
            .collect();
        let results: Vec<Option<&Value>> = changed.iter().map(|f| f.result.as_ref()).collect();
        tx.execute(
            &stmt,
            &[
                &ids,
                &states,
                &statuses,
                &closed_by,
                &closed_event,
                &results,
            ],
        )
        .await
        .map_err(|e| DbError::query("jobs_apply", e))?;
    }
    let disagreements: Vec<(&str, &crate::close::Disagreement)> = folds
        .iter()
        .flat_map(|f| f.disagreements.iter().map(move |d| (f.job_id.as_str(), d)))
        .collect();
    if !disagreements.is_empty() {
        let stmt = prepare(tx, "disagreements_insert").await?;
        let ids: Vec<&str> = disagreements.iter().map(|(j, _)| *j).collect();
        let kept: Vec<&str> = disagreements.iter().map(|(_, d)| d.kept.as_str()).collect();
        let seen: Vec<&str> = disagreements.iter().map(|(_, d)| d.seen.as_str()).collect();
        let status: Vec<&str> = disagreements
            .iter()
            .map(|(_, d)| d.seen_status.as_str())
            .collect();
        let source: Vec<&str> = disagreements
            .iter()
            .map(|(_, d)| d.source.as_str())
            .collect();
        let event: Vec<Option<&str>> = disagreements
            .iter()
            .map(|(_, d)| d.event_id.as_deref())
            .collect();
        tx.execute(&stmt, &[&ids, &kept, &seen, &status, &source, &event])
            .await
            .map_err(|e| DbError::query("disagreements_insert", e))?;
    }
    Ok(())
}
