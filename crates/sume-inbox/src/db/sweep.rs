//! The sweep's statements: claiming due work under leases, recording what a status call
//! answered, and the fleet-wide token bucket.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{jobs, prepare, DbError, Store};
use crate::close::{Observation, Outcome, Source};

/// An open job claimed for a poll.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub job_id: String,
    pub api_key: Option<String>,
    pub created_at: DateTime<Utc>,
    pub poll_attempts: i32,
}

/// An inbox check claimed for a look at Sume.
#[derive(Debug, Clone)]
pub struct ClaimedCheck {
    pub job_id: String,
    pub attempts: i32,
}

/// The verdict on a job id whose events waited with no job row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every key answered 404: not this service's job.
    Foreign,
    /// A key can read it, yet no row exists: a row was lost.
    Orphan,
}

/// What concluding a check did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concluded {
    /// Foreign: this many events were set aside.
    SetAside(u64),
    Orphan,
    /// The job row appeared meanwhile; attach owns the events now.
    RowAppeared,
    /// Another instance took the check over (our lease expired).
    LeaseLost,
}

/// One take at a rate bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Take {
    pub taken: bool,
    pub available: f64,
    pub paused_for: f64,
}

impl Store {
    /// Opens checks for job ids whose events waited longer than `grace_secs` with no row.
    pub async fn inbox_checks_enqueue(&self, grace_secs: f64, limit: i64) -> Result<u64, DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "inbox_checks_enqueue").await?;
        client
            .execute(&stmt, &[&grace_secs, &limit])
            .await
            .map_err(|e| DbError::query("inbox_checks_enqueue", e))
    }

    /// Drops orphan verdicts whose job row exists again; answers how many.
    pub async fn inbox_checks_resolve_orphans(&self) -> Result<u64, DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "inbox_checks_resolve_orphans").await?;
        client
            .execute(&stmt, &[])
            .await
            .map_err(|e| DbError::query("inbox_checks_resolve_orphans", e))
    }

    pub async fn inbox_checks_claim(
        &self,
        owner: &str,
        limit: i64,
        lease_secs: f64,
    ) -> Result<Vec<ClaimedCheck>, DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "inbox_checks_claim").await?;
        let rows = client
            .query(&stmt, &[&owner, &limit, &lease_secs])
            .await
            .map_err(|e| DbError::query("inbox_checks_claim", e))?;
        Ok(rows
            .iter()
            .map(|r| ClaimedCheck {
                job_id: r.get("job_id"),
                attempts: r.get("attempts"),
            })
            .collect())
    }

    /// Inconclusive: records the answers and tries again in `next_in_secs`.
    pub async fn inbox_check_retry(
        &self,
        job_id: &str,
        owner: &str,
        answers: &Value,
        next_in_secs: f64,
    ) -> Result<(), DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "inbox_checks_retry").await?;
        client
            .execute(&stmt, &[&job_id, &owner, answers, &next_in_secs])
            .await
            .map_err(|e| DbError::query("inbox_checks_retry", e))?;
        Ok(())
    }

    /// Records a verdict, and for a foreign job sets its waiting events aside, in one
    /// transaction; unless the job row has appeared, in which case the check is dropped.
    pub async fn inbox_check_conclude(
        &self,
        job_id: &str,
        owner: &str,
        verdict: Verdict,
        answers: &Value,
    ) -> Result<Concluded, DbError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| DbError::query("inbox_check_begin", e))?;
        // Lock the job id against a concurrent registration: the row either exists now (and
        // attach owns the events) or its insert will see our marks, which attach ignores.
        let exists = tx
            .query_opt(
                "select 1 from sume.jobs where job_id = $1 for share",
                &[&job_id],
            )
            .await
            .map_err(|e| DbError::query("inbox_check_row", e))?
            .is_some();
        let outcome = if exists {
            let stmt = prepare(&tx, "inbox_checks_drop").await?;
            tx.execute(&stmt, &[&job_id, &owner])
                .await
                .map_err(|e| DbError::query("inbox_checks_drop", e))?;
            Concluded::RowAppeared
        } else {
            let name = match verdict {
                Verdict::Foreign => "foreign",
                Verdict::Orphan => "orphan",
            };
            let stmt = prepare(&tx, "inbox_checks_verdict").await?;
            let updated = tx
                .execute(&stmt, &[&job_id, &owner, &name, answers])
                .await
                .map_err(|e| DbError::query("inbox_checks_verdict", e))?;
            if updated == 0 {
                Concluded::LeaseLost
            } else if verdict == Verdict::Orphan {
                Concluded::Orphan
            } else {
                let stmt = prepare(&tx, "events_set_aside").await?;
                let reason = format!("foreign: every configured key answered 404 ({answers})");
                let n = tx
                    .execute(&stmt, &[&job_id, &reason])
                    .await
                    .map_err(|e| DbError::query("events_set_aside", e))?;
                Concluded::SetAside(n)
            }
        };
        tx.commit()
            .await
            .map_err(|e| DbError::query("inbox_check_commit", e))?;
        Ok(outcome)
    }

    pub async fn inbox_checks_release(
        &self,
        job_ids: &[String],
        owner: &str,
    ) -> Result<(), DbError> {
        if job_ids.is_empty() {
            return Ok(());
        }
        let client = self.client().await?;
        let stmt = prepare(&client, "inbox_checks_release").await?;
        client
            .execute(&stmt, &[&job_ids, &owner])
            .await
            .map_err(|e| DbError::query("inbox_checks_release", e))?;
        Ok(())
    }

    /// Claims open jobs due a poll: never polled and older than `poll_after_secs`, or due again.
    pub async fn jobs_claim_due(
        &self,
        owner: &str,
        limit: i64,
        lease_secs: f64,
        poll_after_secs: f64,
    ) -> Result<Vec<ClaimedJob>, DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "jobs_claim_due").await?;
        let rows = client
            .query(&stmt, &[&owner, &limit, &lease_secs, &poll_after_secs])
            .await
            .map_err(|e| DbError::query("jobs_claim_due", e))?;
        Ok(rows
            .iter()
            .map(|r| ClaimedJob {
                job_id: r.get("job_id"),
                api_key: r.get("api_key"),
                created_at: r.get("created_at"),
                poll_attempts: r.get("poll_attempts"),
            })
            .collect())
    }

    /// A poll that did not close the job: record it, schedule the next one, release the lease.
    #[allow(clippy::too_many_arguments)]
    pub async fn job_poll_done(
        &self,
        job_id: &str,
        owner: &str,
        answer: &str,
        counts_as_attempt: bool,
        next_in_secs: f64,
        sume_status: Option<&str>,
    ) -> Result<(), DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "jobs_poll_done").await?;
        let inc: i32 = counts_as_attempt.into();
        client
            .execute(
                &stmt,
                &[&job_id, &owner, &answer, &inc, &next_in_secs, &sume_status],
            )
            .await
            .map_err(|e| DbError::query("jobs_poll_done", e))?;
        Ok(())
    }

    pub async fn jobs_release(&self, job_ids: &[String], owner: &str) -> Result<(), DbError> {
        if job_ids.is_empty() {
            return Ok(());
        }
        let client = self.client().await?;
        let stmt = prepare(&client, "jobs_release").await?;
        client
            .execute(&stmt, &[&job_ids, &owner])
            .await
            .map_err(|e| DbError::query("jobs_release", e))?;
        Ok(())
    }

    /// Closes the job as `expired` with `reason`; false if it was closed meanwhile.
    pub async fn job_give_up(
        &self,
        job_id: &str,
        owner: &str,
        reason: &str,
        sume_status: Option<&str>,
    ) -> Result<bool, DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "jobs_give_up").await?;
        let n = client
            .execute(&stmt, &[&job_id, &owner, &reason, &sume_status])
            .await
            .map_err(|e| DbError::query("jobs_give_up", e))?;
        Ok(n == 1)
    }

    /// A terminal status read by a poll goes through the same close as a webhook: under the
    /// job's row lock, folded onto its current state. Answers what the poll did.
    pub async fn close_by_poll(
        &self,
        job_id: &str,
        owner: &str,
        status: &str,
        result: Option<Value>,
        answer: &str,
    ) -> Result<Outcome, DbError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| DbError::query("poll_close_begin", e))?;
        let mut folds = jobs::lock(&tx, &[job_id.to_owned()]).await?;
        let Some(fold) = folds.first_mut() else {
            return Err(DbError::Invariant(format!(
                "polled job {job_id} has no row"
            )));
        };
        let outcome = fold.apply(&Observation {
            source: Source::Poll,
            event_id: None,
            status: Some(status.to_owned()),
            result,
        });
        jobs::write(&tx, &folds).await?;
        let stmt = prepare(&tx, "jobs_poll_closed").await?;
        tx.execute(&stmt, &[&job_id, &owner, &answer])
            .await
            .map_err(|e| DbError::query("jobs_poll_closed", e))?;
        tx.commit()
            .await
            .map_err(|e| DbError::query("poll_close_commit", e))?;
        for d in &folds[0].disagreements {
            tracing::warn!(job_id, kept = %d.kept, seen = %d.seen, "disagreement: the poll contradicts the job's final state; kept the first");
        }
        Ok(outcome)
    }

    pub async fn rate_bucket_ensure(&self, key_name: &str, capacity: f64) -> Result<(), DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "rate_buckets_ensure").await?;
        client
            .execute(&stmt, &[&key_name, &capacity])
            .await
            .map_err(|e| DbError::query("rate_buckets_ensure", e))?;
        Ok(())
    }

    pub async fn rate_bucket_take(
        &self,
        key_name: &str,
        per_sec: f64,
        capacity: f64,
    ) -> Result<Take, DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "rate_buckets_take").await?;
        let row = client
            .query_opt(&stmt, &[&key_name, &per_sec, &capacity])
            .await
            .map_err(|e| DbError::query("rate_buckets_take", e))?
            .ok_or_else(|| DbError::Invariant(format!("no rate bucket for key {key_name}")))?;
        Ok(Take {
            taken: row.get("taken"),
            available: row.get("available"),
            paused_for: row.get("paused_for"),
        })
    }

    pub async fn rate_bucket_pause(&self, key_name: &str, secs: f64) -> Result<(), DbError> {
        let client = self.client().await?;
        let stmt = prepare(&client, "rate_buckets_pause").await?;
        client
            .execute(&stmt, &[&key_name, &secs])
            .await
            .map_err(|e| DbError::query("rate_buckets_pause", e))?;
        Ok(())
    }
}
