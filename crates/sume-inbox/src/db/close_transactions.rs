//! The transactions that fold observations onto jobs: [`Store::attach_jobs`] for stored
//! webhooks, [`Store::close_by_poll`] for a status read by the sweep, [`Store::close_reconciled`]
//! for the terminal statuses `reconcile` reads from Sume's job list. Both lock the jobs' rows
//! in id order (`jobs_lock`), fold each observation with [`crate::decisions::job_fold::JobFold`] and write
//! what changed (`jobs_apply`, `disagreements_insert`), so whichever observation comes first
//! wins, on any instance, any number of times.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sume_wire::JsonText;
use tokio_postgres::Row;

use super::{jobs, sql, DbError, Store};
use crate::db::clock::Clock;
use crate::decisions::job_fold::{JobFold, Observation, Outcome, Source};
use crate::process::traces;

/// With traces exported, which of these jobs are open (before a fold), for [`trace_closes`].
fn was_open(folds: &[JobFold]) -> Option<Vec<bool>> {
    traces::on().then(|| folds.iter().map(|f| f.closed_by.is_none()).collect())
}

/// With traces exported, after the commit: a `close` span for each job the transaction closed,
/// linked to its registration's traceparent (read here) and its delivery. A failed read of
/// the traceparents costs the links only.
async fn trace_closes<C: super::Session>(
    client: &C,
    folds: &[JobFold],
    was_open: Option<Vec<bool>>,
) {
    let Some(was_open) = was_open else {
        return;
    };
    let closed: Vec<&JobFold> = folds
        .iter()
        .zip(was_open)
        .filter(|(f, open)| *open && f.closed_by.is_some())
        .map(|(f, _)| f)
        .collect();
    if closed.is_empty() {
        return;
    }
    let ids: Vec<&str> = closed.iter().map(|f| f.job_id.as_str()).collect();
    let parents: HashMap<String, String> = match sql::JOBS_TRACEPARENTS.query(client, &[&ids]).await
    {
        Ok(rows) => rows.iter().map(|r| (r.get(0), r.get(1))).collect(),
        Err(e) => {
            tracing::debug!(error = %e, "traces: the registrations' traceparents were not read");
            HashMap::new()
        }
    };
    for f in closed {
        let by = f.closed_by.map(Source::as_str).unwrap_or("-");
        let parent = parents.get(&f.job_id).map(String::as_str);
        traces::closed(&f.job_id, f.closed_event_id.as_deref(), by, parent);
    }
}

/// What one attach transaction did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttachReport {
    /// Jobs whose waiting events were applied.
    pub jobs: usize,
    /// Events applied.
    pub events_applied: usize,
    /// Jobs this transaction closed.
    pub closed: Vec<String>,
    /// For each closed job, seconds from its closing event stored to the close.
    pub closed_latency: Vec<f64>,
    /// Terminal statuses that contradicted a job's first one.
    pub disagreements: usize,
}

impl AttachReport {
    /// Adds another report's counts to this one.
    pub fn merge(&mut self, r: AttachReport) {
        self.jobs += r.jobs;
        self.events_applied += r.events_applied;
        self.disagreements += r.disagreements;
        self.closed.extend(r.closed);
        self.closed_latency.extend(r.closed_latency);
    }
}

impl Store {
    /// Applies every waiting event of these jobs, for those whose row exists, in one
    /// transaction under the jobs' row locks. Safe to run any number of times, on any
    /// instance, concurrently: each event is applied once, and a second run finds nothing.
    pub async fn attach_jobs(&self, job_ids: &[String]) -> Result<AttachReport, DbError> {
        const WHAT: &str = "attach_jobs";
        let mut client = self.client().await?;
        // A lock-free filter first: most calls (a notification every instance receives, an
        // event for a job not yet registered) have nothing to do and should not lock anything.
        let candidates: Vec<String> = sql::EVENTS_ATTACHABLE
            .query(&client, &[&job_ids])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if candidates.is_empty() {
            return Ok(AttachReport::default());
        }
        let tx = super::begin(&mut client, WHAT).await?;
        let mut folds = jobs::lock(&tx, &candidates).await?;
        let was_open = was_open(&folds);
        let locked: Vec<&str> = folds.iter().map(|f| f.job_id.as_str()).collect();
        let pending = sql::EVENTS_PENDING_FOR_JOBS.query(&tx, &[&locked]).await?;
        let folded = fold_pending(&mut folds, &pending);
        let report = AttachReport {
            jobs: folded.touched.len(),
            events_applied: folded.event_ids.len(),
            closed: folds
                .iter()
                .filter(|f| f.closed_by.is_some())
                .map(|f| f.job_id.clone())
                .collect(),
            closed_latency: folds
                .iter()
                .filter_map(|f| folded.waited.get(f.closed_event_id.as_deref()?).copied())
                .collect(),
            disagreements: folds.iter().map(|f| f.disagreements.len()).sum(),
        };
        jobs::write(&tx, &folds).await?;
        let contested: Vec<&str> = folds
            .iter()
            .filter(|f| f.contested)
            .map(|f| f.job_id.as_str())
            .collect();
        if !contested.is_empty() {
            sql::JOBS_POLL_NOW.execute(&tx, &[&contested]).await?;
        }
        sql::EVENTS_MARK_APPLIED
            .execute(&tx, &[&folded.event_ids, &folded.outcomes])
            .await?;
        super::commit(tx, WHAT).await?;
        log_folds(&folds);
        trace_closes(&client, &folds, was_open).await;
        Ok(report)
    }

    /// A terminal status read by a poll goes through the same fold as a webhook, under the
    /// job's row lock; the poll's claim is released in the same transaction. Answers what the
    /// poll did.
    pub async fn close_by_poll(
        &self,
        job_id: &str,
        owner: &str,
        status: &str,
        result: Option<JsonText>,
        answer: &str,
        clock: &Clock,
    ) -> Result<Outcome, DbError> {
        const WHAT: &str = "close_by_poll";
        let mut client = self.client().await?;
        let tx = super::begin(&mut client, WHAT).await?;
        let mut folds = jobs::lock(&tx, &[job_id.to_owned()]).await?;
        let Some(fold) = folds.first_mut() else {
            return Err(DbError::Invariant(format!(
                "polled job {job_id} has no row"
            )));
        };
        let was_open = was_open(std::slice::from_ref(fold));
        let outcome = fold.apply(&Observation {
            source: Source::Poll,
            event_id: None,
            status: Some(status.to_owned()),
            result,
        });
        jobs::write(&tx, &folds).await?;
        sql::JOBS_POLL_CLOSED
            .execute(&tx, &[&job_id, &owner, &answer, &clock.now()])
            .await?;
        super::commit(tx, WHAT).await?;
        trace_closes(&client, &folds, was_open).await;
        for d in &folds[0].disagreements {
            tracing::warn!(job_id, kept = %d.kept, seen = %d.seen, "disagreement: the poll contradicts the job's final state; kept the first");
        }
        Ok(outcome)
    }

    /// Terminal statuses read from Sume's job list (`reconcile`): each registered job among
    /// them goes through the same fold as a poll, under its row lock, in one transaction.
    /// Ids with no row are left alone (reconcile registers nothing). Answers, per job that has
    /// a row, what the fold did.
    pub async fn close_reconciled(
        &self,
        seen: &[ReconcileObservation],
    ) -> Result<Vec<(String, Outcome)>, DbError> {
        const WHAT: &str = "close_reconciled";
        let ids: Vec<String> = seen.iter().map(|o| o.job_id.clone()).collect();
        let mut client = self.client().await?;
        let tx = super::begin(&mut client, WHAT).await?;
        let mut folds = jobs::lock(&tx, &ids).await?;
        let mut outcomes = Vec::with_capacity(folds.len());
        for fold in folds.iter_mut() {
            // Every entry the list gave for the job: one contradicting the first is recorded
            // as a disagreement by the fold, never dropped.
            let job_id = fold.job_id.clone();
            for o in seen.iter().filter(|o| o.job_id == job_id) {
                let outcome = fold.apply(&Observation {
                    source: Source::Poll,
                    event_id: None,
                    status: Some(o.status.clone()),
                    result: o.result.clone(),
                });
                outcomes.push((job_id.clone(), outcome));
            }
        }
        jobs::write(&tx, &folds).await?;
        super::commit(tx, WHAT).await?;
        for fold in &folds {
            for d in &fold.disagreements {
                tracing::warn!(job_id = %fold.job_id, kept = %d.kept, seen = %d.seen, "disagreement: Sume's job list contradicts the job's final state; kept the first");
            }
        }
        Ok(outcomes)
    }
}

/// What folding a transaction's pending events did.
struct Folded {
    /// Every event folded, in order, and what each did.
    event_ids: Vec<String>,
    outcomes: Vec<&'static str>,
    /// The folds (by index) that took an event.
    touched: HashSet<usize>,
    /// For each event that closed its job: seconds from its storing to now.
    waited: HashMap<String, f64>,
}

/// Folds the pending events (`events_pending_for_jobs`, in the order they were stored) onto
/// their jobs. Events of one job stored by one ingest transaction (one `received_at`) are
/// folded together: nothing orders them (see job_fold.rs).
fn fold_pending(folds: &mut [JobFold], pending: &[Row]) -> Folded {
    let index: HashMap<String, usize> = folds
        .iter()
        .enumerate()
        .map(|(i, f)| (f.job_id.clone(), i))
        .collect();
    let mut folded = Folded {
        event_ids: Vec::with_capacity(pending.len()),
        outcomes: Vec::with_capacity(pending.len()),
        touched: HashSet::new(),
        waited: HashMap::new(),
    };
    let together = |r: &Row| {
        (
            r.get::<_, String>("job_id"),
            r.get::<_, DateTime<Utc>>("received_at"),
        )
    };
    for group in pending.chunk_by(|a, b| together(a) == together(b)) {
        let job_id: String = group[0].get("job_id");
        let Some(&i) = index.get(&job_id) else {
            continue;
        };
        let observations: Vec<Observation> = group
            .iter()
            .map(|row| Observation {
                source: Source::Webhook,
                event_id: Some(row.get("event_id")),
                status: row.get("status"),
                result: super::json_columns::sent_json_text(row, "result"),
            })
            .collect();
        let done = folds[i].apply_together(&observations);
        folded.touched.insert(i);
        for ((row, observation), outcome) in group.iter().zip(observations).zip(done) {
            let event_id = observation.event_id.unwrap_or_default();
            if outcome == Outcome::Closed {
                folded.waited.insert(event_id.clone(), row.get("waited"));
            }
            folded.event_ids.push(event_id);
            folded.outcomes.push(outcome.as_str());
        }
    }
    folded
}

/// Logs what an attach transaction's folds did that an operator should hear of.
fn log_folds(folds: &[JobFold]) {
    for fold in folds {
        if fold.supersedes_give_up {
            tracing::info!(job_id = %fold.job_id, state = %fold.state.as_str(), "Sume's terminal status superseded a give-up");
        }
        if fold.contested {
            tracing::warn!(
                job_id = %fold.job_id,
                kept = %fold.state.as_str(),
                "disagreement: different terminal events of this job were stored together, with nothing to order them; none applied, the job is polled now and Sume's answer decides"
            );
            continue;
        }
        for d in &fold.disagreements {
            tracing::warn!(
                job_id = %fold.job_id, kept = %d.kept, seen = %d.seen,
                event_id = d.event_id.as_deref().unwrap_or("-"),
                "disagreement: a terminal event contradicts the job's final state; kept the first"
            );
        }
    }
}

/// A terminal status read from Sume's job list.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconcileObservation {
    /// Sume's job id.
    pub job_id: String,
    /// The status as spelt by Sume (terminal).
    pub status: String,
    /// The job's result or error, when the list carries it, as JSON text.
    pub result: Option<JsonText>,
}
