//! `sume.jobs` (statements of `sql/queries/jobs.sql`): registration, reading, the row lock
//! every close goes through, the poll's claims, and the channel new rows are announced on.

use super::{Session, Tx};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sume_wire::{JobState, JsonText};

use super::{sql, CheckRow, DbError, DisagreementRow, EventRow, PollRow, Store};
use crate::decisions::job_fold::JobFold;

/// A registration through the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// Sume's job id.
    pub job_id: String,
    /// The application's own reference.
    pub order_id: Option<String>,
    /// The name of the API key that created the job (see SUME_API_KEYS).
    pub api_key: Option<String>,
    /// The registering request's W3C `traceparent`, if it sent a valid one.
    pub traceparent: Option<String>,
}

impl NewJob {
    /// Whether `row`, the job already registered under this id, is this registration made
    /// before: the same order, and the same key when this one names a key.
    pub fn repeats(&self, row: &JobRow) -> bool {
        row.order_id == self.order_id && (self.api_key.is_none() || row.api_key == self.api_key)
    }
}

/// A job as the admin API answers it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct JobRow {
    /// Sume's job id.
    pub job_id: String,
    /// The application's own reference.
    pub order_id: Option<String>,
    /// The name of the API key that created the job.
    pub api_key: Option<String>,
    /// `open` or a terminal state.
    #[schema(value_type = super::JobStateName)]
    pub state: String,
    /// Sume's last status, as spelt by Sume.
    pub sume_status: Option<String>,
    /// `webhook`, `poll` or `give_up`, once closed.
    #[schema(value_type = Option<super::CloserName>)]
    pub closed_by: Option<String>,
    /// When the row was committed.
    pub created_at: DateTime<Utc>,
    /// When the job was closed.
    pub closed_at: Option<DateTime<Utc>>,
    /// The job's result, from the closing observation, as stored (every digit of its numbers).
    #[schema(value_type = Option<Value>)]
    pub result: Option<JsonText>,
    /// Why a give-up closed the job (`closed_by = give_up`).
    pub close_reason: Option<String>,
    /// A give-up that Sume's own terminal status superseded: its state, Sume's last status,
    /// when and why.
    pub superseded_give_up: Option<Value>,
}

/// What a registration found.
#[derive(Debug, Clone, PartialEq)]
pub enum Registered {
    /// A new row was written.
    Created,
    /// The same job was already registered with the same fields: a repeat, nothing changed.
    Existing,
    /// A job with this id exists with a different order or key: refused, nothing changed.
    Conflict(Box<JobRow>),
}

/// Everything known about one job id.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct JobDetail {
    /// The id asked about.
    pub job_id: String,
    /// `None` when no row exists (events may still wait for it).
    pub job: Option<JobRow>,
    /// Every stored event for the id, oldest first.
    pub events: Vec<EventRow>,
    /// Terminal statuses that contradicted the kept one.
    pub disagreements: Vec<DisagreementRow>,
    /// The inbox check made for the id, if any.
    pub inbox_check: Option<CheckRow>,
    /// The job's latest status calls (at most 20), oldest first.
    #[serde(default)]
    pub polls: Vec<PollRow>,
}

/// A connection listening for newly committed job rows.
pub type JobsListener = super::Listener;

pub(super) fn job_row(r: &tokio_postgres::Row) -> JobRow {
    JobRow {
        job_id: r.get("job_id"),
        order_id: r.get("order_id"),
        api_key: r.get("api_key"),
        state: r.get("state"),
        sume_status: r.get("sume_status"),
        closed_by: r.get("closed_by"),
        created_at: r.get("created_at"),
        closed_at: r.get("closed_at"),
        result: super::json_columns::sent_json_text(r, "result"),
        close_reason: r.get("close_reason"),
        superseded_give_up: super::json_columns::sent_json(r, "superseded_give_up"),
    }
}

impl Store {
    /// Inserts the job (`on conflict do nothing`) and says whether it was new, a repeat, or a
    /// conflicting claim on an existing id. Both statements run on one connection: a request
    /// that held its connection while asking the pool for a second would, with enough such
    /// requests at once (a burst of re-registrations), leave every connection waiting for
    /// another and the pool starved for everyone until the waits time out.
    pub async fn register_job(&self, job: &NewJob) -> Result<Registered, DbError> {
        let client = self.client().await?;
        let inserted = sql::JOBS_INSERT
            .execute(
                &client,
                &[&job.job_id, &job.order_id, &job.api_key, &job.traceparent],
            )
            .await?;
        if inserted == 1 {
            return Ok(Registered::Created);
        }
        let existing = sql::JOBS_GET
            .query_opt(&client, &[&job.job_id])
            .await?
            .as_ref()
            .map(job_row)
            .ok_or_else(|| {
                DbError::Invariant(format!("job {} vanished after a conflict", job.job_id))
            })?;
        Ok(if job.repeats(&existing) {
            Registered::Existing
        } else {
            Registered::Conflict(Box::new(existing))
        })
    }

    /// The job, if it has a row.
    pub async fn jobs_get(&self, job_id: &str) -> Result<Option<JobRow>, DbError> {
        let client = self.client().await?;
        let row = sql::JOBS_GET.query_opt(&client, &[&job_id]).await?;
        Ok(row.as_ref().map(job_row))
    }

    /// Everything known about a job id, from one statement and one snapshot (`jobs_story`): its
    /// row, events, disagreements, inbox check and latest polls.
    pub async fn job_detail(&self, job_id: &str) -> Result<JobDetail, DbError> {
        let client = self.client().await?;
        let row = sql::JOBS_STORY.query_one(&client, &[&job_id]).await?;
        Ok(JobDetail {
            job_id: job_id.to_owned(),
            job: story_text(&row, "job")?,
            events: story_part(&row, "events")?,
            disagreements: story_part(&row, "disagreements")?,
            inbox_check: story_part(&row, "inbox_check")?,
            polls: story_part(&row, "polls")?,
        })
    }

    /// Opens a connection outside the pool that listens for newly committed job rows (to
    /// LISTEN_DATABASE_URL when set); an error when this store has no LISTEN connection.
    pub async fn jobs_listen(&self) -> Result<JobsListener, DbError> {
        self.listen(sql::JOBS_LISTEN).await
    }
}

/// A JSON text column of `jobs_story` (the job, whose result's numbers a [`Value`] would
/// round), read as the type the detail holds (SQL null: `None`).
fn story_text<T: serde::de::DeserializeOwned>(
    row: &tokio_postgres::Row,
    column: &'static str,
) -> Result<Option<T>, DbError> {
    let text: Option<String> = row
        .try_get(column)
        .map_err(|e| DbError::Invariant(format!("jobs_story: {column}: {e}")))?;
    text.map(|t| serde_json::from_str(&t))
        .transpose()
        .map_err(|e| DbError::Invariant(format!("jobs_story: {column}: {e}")))
}

/// One JSON column of `jobs_story`, read as the type the detail holds (SQL null: JSON null).
fn story_part<T: serde::de::DeserializeOwned>(
    row: &tokio_postgres::Row,
    column: &'static str,
) -> Result<T, DbError> {
    let value: Option<Value> = row
        .try_get(column)
        .map_err(|e| DbError::Invariant(format!("jobs_story: {column}: {e}")))?;
    serde_json::from_value(value.unwrap_or(Value::Null))
        .map_err(|e| DbError::Invariant(format!("jobs_story: {column}: {e}")))
}

/// Locks these jobs (in id order) and reads their state into folds.
pub(super) async fn lock(tx: &Tx<'_>, job_ids: &[String]) -> Result<Vec<JobFold>, DbError> {
    let rows = sql::JOBS_LOCK.query(tx, &[&job_ids]).await?;
    rows.iter()
        .map(|r| {
            let state: String = r.get("state");
            let state = state.parse::<JobState>().map_err(|e| {
                DbError::Invariant(format!(
                    "jobs_lock: job {}: {e}",
                    r.get::<_, String>("job_id")
                ))
            })?;
            let closed_by: Option<String> = r.get("closed_by");
            Ok(JobFold::new(r.get("job_id"), state, r.get("sume_status"))
                .given_up(closed_by.as_deref() == Some("give_up")))
        })
        .collect()
}

/// Whether the job has a row, holding it (or its absence) against a concurrent registration
/// until the transaction ends.
pub(super) async fn lock_shared<C: Session>(tx: &C, job_id: &str) -> Result<bool, DbError> {
    Ok(sql::JOBS_LOCK_SHARED
        .query_opt(tx, &[&job_id])
        .await?
        .is_some())
}

/// Writes the folds that changed (`jobs_apply`), and their disagreements.
pub(super) async fn write(tx: &Tx<'_>, folds: &[JobFold]) -> Result<(), DbError> {
    let changed: Vec<&JobFold> = folds.iter().filter(|f| f.changed()).collect();
    if !changed.is_empty() {
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
        let results: Vec<Option<&str>> = changed
            .iter()
            .map(|f| f.result.as_ref().map(JsonText::get))
            .collect();
        let supersedes: Vec<bool> = changed.iter().map(|f| f.supersedes_give_up).collect();
        sql::JOBS_APPLY
            .execute(
                tx,
                &[
                    &ids,
                    &states,
                    &statuses,
                    &closed_by,
                    &closed_event,
                    &results,
                    &supersedes,
                ],
            )
            .await?;
    }
    super::disagreements::insert(tx, folds).await
}
