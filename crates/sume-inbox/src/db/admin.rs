//! What the admin commands read and the few guarded writes replay makes.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{prepare, DbError, JobRow, Store};

/// One event of a job, for `jobs show`.
#[derive(Debug, Clone, Serialize)]
pub struct EventRow {
    pub event_id: String,
    pub event_type: Option<String>,
    pub status: Option<String>,
    pub received_at: DateTime<Utc>,
    pub applied_at: Option<DateTime<Utc>>,
    pub outcome: Option<String>,
    pub set_aside_at: Option<DateTime<Utc>>,
    pub set_aside_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DisagreementRow {
    pub kept_state: String,
    pub seen_state: String,
    pub seen_status: String,
    pub source: String,
    pub event_id: Option<String>,
    pub recorded_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckRow {
    pub verdict: String,
    pub answers: Value,
    pub attempts: i32,
    pub checked_at: Option<DateTime<Utc>>,
    pub next_check_at: DateTime<Utc>,
}

/// Everything known about one job id.
#[derive(Debug, Clone, Serialize)]
pub struct JobDetail {
    pub job_id: String,
    /// `None` when no row exists (events may still wait for it).
    pub job: Option<JobRow>,
    pub events: Vec<EventRow>,
    pub disagreements: Vec<DisagreementRow>,
    pub inbox_check: Option<CheckRow>,
}

/// An event waiting in the inbox, for `inbox ls`.
#[derive(Debug, Clone, Serialize)]
pub struct WaitingEvent {
    pub event_id: String,
    pub job_id: String,
    pub event_type: Option<String>,
    pub status: Option<String>,
    pub received_at: DateTime<Utc>,
    pub age_secs: f64,
    pub job_exists: bool,
    pub verdict: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeadLetterRow {
    pub dead_letter_id: String,
    pub reason: String,
    pub header_event_id: Option<String>,
    pub bytes: i32,
    pub received_at: DateTime<Utc>,
    pub replayed_at: Option<DateTime<Utc>>,
}

/// A stored delivery, as replay needs it.
#[derive(Debug, Clone)]
pub struct StoredDelivery {
    pub id: String,
    pub job_id: Option<String>,
    pub body: Bytes,
    pub header_event_id: Option<String>,
    pub signed_at: i64,
    pub signature: String,
    pub applied: Option<String>,
    pub set_aside: bool,
    pub reason: Option<String>,
}

/// The numbers an operator checks first.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub open_jobs: i64,
    pub waiting: i64,
    pub oldest_waiting_secs: f64,
    pub set_aside: i64,
    pub orphans: i64,
    pub checks_pending: i64,
    pub dead_letters: i64,
    pub disagreements: i64,
    pub schema_version: i32,
}

macro_rules! q {
    ($client:expr, $name:literal, $params:expr) => {{
        let stmt = super::prepare(&$client, $name).await?;
        $client
            .query(&stmt, $params)
            .await
            .map_err(|e| DbError::query($name, e))?
    }};
}

impl Store {
    pub async fn job_detail(&self, job_id: &str) -> Result<JobDetail, DbError> {
        let job = self.job(job_id).await?;
        let client = self.client().await?;
        let events = q!(client, "events_for_job", &[&job_id])
            .iter()
            .map(|r| EventRow {
                event_id: r.get("event_id"),
                event_type: r.get("event_type"),
                status: r.get("status"),
                received_at: r.get("received_at"),
                applied_at: r.get("applied_at"),
                outcome: r.get("outcome"),
                set_aside_at: r.get("set_aside_at"),
                set_aside_reason: r.get("set_aside_reason"),
            })
            .collect();
        let disagreements = q!(client, "disagreements_for_job", &[&job_id])
            .iter()
            .map(|r| DisagreementRow {
                kept_state: r.get("kept_state"),
                seen_state: r.get("seen_state"),
                seen_status: r.get("seen_status"),
                source: r.get("source"),
                event_id: r.get("event_id"),
                recorded_at: r.get("recorded_at"),
            })
            .collect();
        let inbox_check = q!(client, "inbox_checks_get", &[&job_id])
            .first()
            .map(|r| CheckRow {
                verdict: r.get("verdict"),
                answers: r.get("answers"),
                attempts: r.get("attempts"),
                checked_at: r.get("checked_at"),
                next_check_at: r.get("next_check_at"),
            });
        Ok(JobDetail {
            job_id: job_id.to_owned(),
            job,
            events,
            disagreements,
            inbox_check,
        })
    }

    pub async fn waiting_events(
        &self,
        older_than_secs: f64,
        limit: i64,
    ) -> Result<Vec<WaitingEvent>, DbError> {
        let client = self.client().await?;
        Ok(
            q!(client, "events_waiting_list", &[&older_than_secs, &limit])
                .iter()
                .map(|r| WaitingEvent {
                    event_id: r.get("event_id"),
                    job_id: r.get("job_id"),
                    event_type: r.get("event_type"),
                    status: r.get("status"),
                    received_at: r.get("received_at"),
                    age_secs: r.get("age_secs"),
                    job_exists: r.get("job_exists"),
                    verdict: r.get("verdict"),
                })
                .collect(),
        )
    }

    pub async fn dead_letters(&self, limit: i64) -> Result<Vec<DeadLetterRow>, DbError> {
        let client = self.client().await?;
        Ok(q!(client, "dead_letters_list", &[&limit])
            .iter()
            .map(|r| DeadLetterRow {
                dead_letter_id: r.get("dead_letter_id"),
                reason: r.get("reason"),
                header_event_id: r.get("header_event_id"),
                bytes: r.get("bytes"),
                received_at: r.get("received_at"),
                replayed_at: r.get("replayed_at"),
            })
            .collect())
    }

    /// The event stored under `event_id`.
    pub async fn stored_event(&self, event_id: &str) -> Result<Option<StoredDelivery>, DbError> {
        let client = self.client().await?;
        Ok(q!(client, "events_get", &[&event_id]).first().map(|r| {
            let body: Vec<u8> = r.get("body");
            StoredDelivery {
                id: r.get("event_id"),
                job_id: Some(r.get("job_id")),
                body: Bytes::from(body),
                header_event_id: None,
                signed_at: r.get("signed_at"),
                signature: r.get("signature"),
                applied: r.get("outcome"),
                set_aside: r.get::<_, Option<DateTime<Utc>>>("set_aside_at").is_some(),
                reason: r.get("set_aside_reason"),
            }
        }))
    }

    /// Dead letters not replayed yet.
    pub async fn pending_dead_letters(&self, limit: i64) -> Result<Vec<StoredDelivery>, DbError> {
        let client = self.client().await?;
        Ok(q!(client, "dead_letters_pending", &[&limit])
            .iter()
            .map(|r| {
                let body: Vec<u8> = r.get("body");
                StoredDelivery {
                    id: r.get("dead_letter_id"),
                    job_id: None,
                    body: Bytes::from(body),
                    header_event_id: r.get("header_event_id"),
                    signed_at: r.get("signed_at"),
                    signature: r.get("signature"),
                    applied: None,
                    set_aside: false,
                    reason: r.get("reason"),
                }
            })
            .collect())
    }

    /// Puts a set-aside event back in the inbox and forgets its job's foreign verdict.
    pub async fn unset_aside(&self, event_id: &str, job_id: &str) -> Result<bool, DbError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| DbError::query("unset_aside_begin", e))?;
        let n = q_exec(&tx, "events_unset_aside", &[&event_id]).await?;
        q_exec(&tx, "inbox_checks_forget", &[&job_id]).await?;
        tx.commit()
            .await
            .map_err(|e| DbError::query("unset_aside_commit", e))?;
        Ok(n == 1)
    }

    pub async fn mark_dead_letter_replayed(&self, id: &str) -> Result<(), DbError> {
        let client = self.client().await?;
        q_exec(&client, "dead_letters_mark_replayed", &[&id]).await?;
        Ok(())
    }

    pub async fn stats(&self) -> Result<Stats, DbError> {
        let client = self.client().await?;
        let rows = q!(client, "schema_stats", &[]);
        let r = rows
            .first()
            .ok_or_else(|| DbError::Invariant("schema_stats answered nothing".into()))?;
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
}

async fn q_exec<C: deadpool_postgres::GenericClient>(
    client: &C,
    name: &'static str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<u64, DbError> {
    let stmt = prepare(client, name).await?;
    client
        .execute(&stmt, params)
        .await
        .map_err(|e| DbError::query(name, e))
}
