//! The inbox: writing ingest batches, and attaching waiting events to their jobs.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use tokio_postgres::{GenericClient, Statement};

use super::{jobs, prepare, DbError, Store};
use crate::close::{Observation, Source};

/// A verified event, ready to store.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub event_id: String,
    pub job_id: String,
    pub event_type: Option<String>,
    pub status: Option<String>,
    /// JSON text, as received.
    pub result: Option<String>,
    pub body: Bytes,
    pub signed_at: i64,
    pub signature: String,
}

/// A verified delivery whose body names no job.
#[derive(Debug, Clone)]
pub struct NewDeadLetter {
    pub dead_letter_id: String,
    pub reason: String,
    pub body: Bytes,
    pub header_event_id: Option<String>,
    pub signed_at: i64,
    pub signature: String,
}

/// What one attach transaction did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttachReport {
    /// Jobs whose waiting events were applied.
    pub jobs: usize,
    pub events_applied: usize,
    /// Jobs this transaction closed.
    pub closed: Vec<String>,
    /// For each closed job, seconds from its closing event stored to the close.
    pub closed_latency: Vec<f64>,
    pub disagreements: usize,
}

impl Store {
    /// Stores one batch atomically and answers the event ids that were new (the rest were
    /// already stored). Events must have distinct ids; they are written sorted by id so that
    /// two batches sharing ids never wait on each other in opposite orders.
    ///
    /// A batch of one kind (the usual case: only events) is one statement in autocommit: its
    /// own transaction, committed before the server answers it, so one round trip instead of
    /// three (begin, insert, commit). A batch with both kinds takes an explicit transaction.
    /// Either way this returns only once the commit is durable.
    pub async fn write_inbox_batch(
        &self,
        events: &mut [NewEvent],
        dead: &mut [NewDeadLetter],
    ) -> Result<HashSet<String>, DbError> {
        events.sort_by(|a, b| a.event_id.cmp(&b.event_id));
        dead.sort_by(|a, b| a.dead_letter_id.cmp(&b.dead_letter_id));
        let mut client = self.client().await?;
        let events_stmt = if events.is_empty() {
            None
        } else {
            Some(prepare(&client, "events_insert").await?)
        };
        let dead_stmt = if dead.is_empty() {
            None
        } else {
            Some(prepare(&client, "dead_letters_insert").await?)
        };
        match (events_stmt, dead_stmt) {
            (None, None) => Ok(HashSet::new()),
            (Some(stmt), None) => insert_events(&**client, &stmt, events).await,
            (None, Some(stmt)) => {
                insert_dead_letters(&**client, &stmt, dead).await?;
                Ok(HashSet::new())
            }
            (Some(events_stmt), Some(dead_stmt)) => {
                let tx = client
                    .transaction()
                    .await
                    .map_err(|e| DbError::query("inbox_begin", e))?;
                let new_ids = insert_events(&*tx, &events_stmt, events).await?;
                insert_dead_letters(&*tx, &dead_stmt, dead).await?;
                tx.commit()
                    .await
                    .map_err(|e| DbError::query("inbox_commit", e))?;
                Ok(new_ids)
            }
        }
    }

    /// The catch-up scan: up to `limit` jobs that have a row and waiting events.
    pub async fn attachable_jobs(&self, limit: i64) -> Result<Vec<String>, DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "events_attachable_scan").await?;
        let rows = client
            .query(&stmt, &[&limit])
            .await
            .map_err(|e| DbError::query("events_attachable_scan", e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Applies every waiting event of these jobs, for those whose row exists, in one
    /// transaction under the jobs' row locks. Safe to run any number of times, on any
    /// instance, concurrently: each event is applied once, and a second run finds nothing.
    pub async fn attach(&self, job_ids: &[String]) -> Result<AttachReport, DbError> {
        let mut client = self.client().await?;
        // A lock-free filter first: most calls (a notification every instance receives, an
        // event for a job not yet registered) have nothing to do and should not lock anything.
        let stmt = prepare(&client, "events_attachable").await?;
        let candidates: Vec<String> = client
            .query(&stmt, &[&job_ids])
            .await
            .map_err(|e| DbError::query("events_attachable", e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if candidates.is_empty() {
            return Ok(AttachReport::default());
        }
        let tx = client
            .transaction()
            .await
            .map_err(|e| DbError::query("attach_begin", e))?;
        let mut folds = jobs::lock(&tx, &candidates).await?;
        let locked: Vec<&str> = folds.iter().map(|f| f.job_id.as_str()).collect();
        let stmt = prepare(&tx, "events_pending_for_jobs").await?;
        let pending = tx
            .query(&stmt, &[&locked])
            .await
            .map_err(|e| DbError::query("events_pending_for_jobs", e))?;
        let index: HashMap<String, usize> = folds
            .iter()
            .enumerate()
            .map(|(i, f)| (f.job_id.clone(), i))
            .collect();
        let mut applied_ids: Vec<String> = Vec::with_capacity(pending.len());
        let mut outcomes: Vec<&'static str> = Vec::with_capacity(pending.len());
        let mut touched = HashSet::new();
        let mut waited: HashMap<String, f64> = HashMap::new();
        for row in &pending {
            let job_id: String = row.get("job_id");
            let Some(&i) = index.get(&job_id) else {
                continue;
            };
            let event_id: String = row.get("event_id");
            let outcome = folds[i].apply(&Observation {
                source: Source::Webhook,
                event_id: Some(event_id.clone()),
                status: row.get("status"),
                result: row.get("result"),
            });
            touched.insert(i);
            if outcome == crate::close::Outcome::Closed {
                waited.insert(event_id.clone(), row.get("waited"));
            }
            applied_ids.push(event_id);
            outcomes.push(outcome.as_str());
        }
        let report = AttachReport {
            jobs: touched.len(),
            events_applied: applied_ids.len(),
            closed: folds
                .iter()
                .filter(|f| f.closed_by.is_some())
                .map(|f| f.job_id.clone())
                .collect(),
            closed_latency: folds
                .iter()
                .filter_map(|f| waited.get(f.closed_event_id.as_deref()?).copied())
                .collect(),
            disagreements: folds.iter().map(|f| f.disagreements.len()).sum(),
        };
        jobs::write(&tx, &folds).await?;
        let stmt = prepare(&tx, "events_mark_applied").await?;
        tx.execute(&stmt, &[&applied_ids, &outcomes])
            .await
            .map_err(|e| DbError::query("events_mark_applied", e))?;
        tx.commit()
            .await
            .map_err(|e| DbError::query("attach_commit", e))?;
        for fold in &folds {
            for d in &fold.disagreements {
                tracing::warn!(
                    job_id = %fold.job_id, kept = %d.kept, seen = %d.seen,
                    event_id = d.event_id.as_deref().unwrap_or("-"),
                    "disagreement: a terminal event contradicts the job's final state; kept the first"
                );
            }
        }
        Ok(report)
    }
}

/// `events_insert` for a sorted batch; answers the ids that were new.
async fn insert_events<C: GenericClient>(
    db: &C,
    stmt: &Statement,
    events: &[NewEvent],
) -> Result<HashSet<String>, DbError> {
    let ids: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    let jobs: Vec<&str> = events.iter().map(|e| e.job_id.as_str()).collect();
    let types: Vec<Option<&str>> = events.iter().map(|e| e.event_type.as_deref()).collect();
    let statuses: Vec<Option<&str>> = events.iter().map(|e| e.status.as_deref()).collect();
    let results: Vec<Option<&str>> = events.iter().map(|e| e.result.as_deref()).collect();
    let bodies: Vec<&[u8]> = events.iter().map(|e| e.body.as_ref()).collect();
    let signed: Vec<i64> = events.iter().map(|e| e.signed_at).collect();
    let sigs: Vec<&str> = events.iter().map(|e| e.signature.as_str()).collect();
    let rows = db
        .query(
            stmt,
            &[
                &ids, &jobs, &types, &statuses, &results, &bodies, &signed, &sigs,
            ],
        )
        .await
        .map_err(|e| DbError::query("events_insert", e))?;
    Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
}

/// `dead_letters_insert` for a sorted batch.
async fn insert_dead_letters<C: GenericClient>(
    db: &C,
    stmt: &Statement,
    dead: &[NewDeadLetter],
) -> Result<(), DbError> {
    let ids: Vec<&str> = dead.iter().map(|d| d.dead_letter_id.as_str()).collect();
    let reasons: Vec<&str> = dead.iter().map(|d| d.reason.as_str()).collect();
    let bodies: Vec<&[u8]> = dead.iter().map(|d| d.body.as_ref()).collect();
    let headers: Vec<Option<&str>> = dead.iter().map(|d| d.header_event_id.as_deref()).collect();
    let signed: Vec<i64> = dead.iter().map(|d| d.signed_at).collect();
    let sigs: Vec<&str> = dead.iter().map(|d| d.signature.as_str()).collect();
    db.execute(stmt, &[&ids, &reasons, &bodies, &headers, &signed, &sigs])
        .await
        .map_err(|e| DbError::query("dead_letters_insert", e))?;
    Ok(())
}
