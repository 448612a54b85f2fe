//! The poll's statements on `sume.jobs` (of `sql/queries/jobs.sql`): claiming due jobs, one by
//! one or for a walk of a key's list, recording a poll that left its job open, releasing what
//! could not be served, and giving up.

use chrono::{DateTime, Utc};

use super::{sql, DbError, Store};
use crate::db::clock::Clock;
use crate::decisions::job_fold::{Observation, Source};

/// An open job claimed for a poll.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    /// Sume's job id.
    pub job_id: String,
    /// The name of the key that created it, if known.
    pub api_key: Option<String>,
    /// When the row was committed.
    pub created_at: DateTime<Utc>,
    /// Seconds since the row was committed, by the clock the claim was made with.
    pub age_secs: f64,
    /// Polls so far that counted towards the backoff.
    pub poll_attempts: i32,
    /// Whether its own poll is due (always, for a poll's claim; for a walk's, only when the
    /// job's backoff has run out).
    pub poll_due: bool,
}

/// A poll that left its job open, as `jobs_poll_done` records it.
#[derive(Debug, Clone, Copy)]
pub struct PollDone<'a> {
    /// The answer seen, e.g. `"200 running"` or `"429"`.
    pub answer: &'a str,
    /// The in-flight status read, if any.
    pub sume_status: Option<&'a str>,
    /// Seconds from now to the next poll.
    pub next_in_secs: f64,
    /// Whether it counts towards the backoff (a 429 does not).
    pub counts_as_attempt: bool,
}

/// What a claim of jobs for polling asks for.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    /// The instance claiming (its lease owner name).
    pub owner: &'a str,
    /// The most jobs to claim.
    pub limit: i64,
    /// How long the claim holds, in seconds.
    pub lease_secs: f64,
    /// POLL_AFTER, in seconds: jobs registered more recently are not due.
    pub poll_after_secs: f64,
}

impl ClaimedJob {
    fn from_row(r: &tokio_postgres::Row) -> ClaimedJob {
        ClaimedJob {
            job_id: r.get("job_id"),
            api_key: r.get("api_key"),
            created_at: r.get("created_at"),
            age_secs: r.get("age_secs"),
            poll_attempts: r.get("poll_attempts"),
            poll_due: r.try_get("poll_due").unwrap_or(true),
        }
    }
}

/// A give-up, as the poll decided it.
#[derive(Debug, Clone, Copy)]
pub struct GiveUp<'a> {
    /// Sume's job id.
    pub job_id: &'a str,
    /// The instance whose lease holds the job.
    pub owner: &'a str,
    /// Why, with the last answer.
    pub reason: &'a str,
    /// The last in-flight status read, if any.
    pub sume_status: Option<&'a str>,
    /// Made blind (no answer about the job from Sume): ask again until the first duration from
    /// now, first after the second; `None` when Sume answered, or rechecks are off.
    pub recheck: Option<(std::time::Duration, std::time::Duration)>,
}

impl Store {
    /// Claims open jobs due a poll by `clock`: never polled and older than `poll_after_secs`,
    /// or due again; none of the keys in `skip_keys` (walked), none naming a key outside
    /// `own_keys` (this instance's).
    pub async fn jobs_claim_due(
        &self,
        claim: &Claim<'_>,
        skip_keys: &[String],
        own_keys: &[String],
        clock: &Clock,
    ) -> Result<Vec<ClaimedJob>, DbError> {
        let client = self.client().await?;
        let now = clock.now();
        let c = claim;
        let rows = sql::JOBS_CLAIM_DUE
            .query(
                &client,
                &[
                    &c.owner,
                    &c.limit,
                    &c.lease_secs,
                    &c.poll_after_secs,
                    &now,
                    &skip_keys,
                    &own_keys,
                ],
            )
            .await?;
        Ok(rows.iter().map(ClaimedJob::from_row).collect())
    }

    /// Claims, for a walk of `key_name`'s list, its open jobs registered at least
    /// `poll_after_secs` ago, oldest first.
    pub async fn jobs_claim_walk(
        &self,
        claim: &Claim<'_>,
        key_name: &str,
        clock: &Clock,
    ) -> Result<Vec<ClaimedJob>, DbError> {
        let client = self.client().await?;
        let c = claim;
        let rows = sql::JOBS_CLAIM_WALK
            .query(
                &client,
                &[
                    &c.owner,
                    &key_name,
                    &c.limit,
                    &c.lease_secs,
                    &c.poll_after_secs,
                    &clock.now(),
                ],
            )
            .await?;
        Ok(rows.iter().map(ClaimedJob::from_row).collect())
    }

    /// A poll that did not close the job: records the answer, schedules the next poll and
    /// releases the lease; an in-flight status read goes through the fold under the job's row
    /// lock, in the same transaction.
    pub async fn poll_still_open(
        &self,
        job_id: &str,
        owner: &str,
        done: &PollDone<'_>,
        clock: &Clock,
    ) -> Result<(), DbError> {
        const WHAT: &str = "poll_still_open";
        let mut client = self.client().await?;
        let tx = super::begin(&mut client, WHAT).await?;
        if let Some(status) = done.sume_status {
            let mut folds = super::jobs::lock(&tx, &[job_id.to_owned()]).await?;
            for fold in &mut folds {
                fold.apply(&Observation {
                    source: Source::Poll,
                    event_id: None,
                    status: Some(status.to_owned()),
                    result: None,
                });
            }
            super::jobs::write(&tx, &folds).await?;
        }
        let inc: i32 = done.counts_as_attempt.into();
        let now = clock.now();
        sql::JOBS_POLL_DONE
            .execute(
                &tx,
                &[
                    &job_id,
                    &owner,
                    &done.answer,
                    &inc,
                    &done.next_in_secs,
                    &now,
                ],
            )
            .await?;
        super::commit(tx, WHAT).await
    }

    /// Gives claimed jobs back untouched: due again at once.
    pub async fn jobs_release(&self, job_ids: &[String], owner: &str) -> Result<(), DbError> {
        if job_ids.is_empty() {
            return Ok(());
        }
        let client = self.client().await?;
        sql::JOBS_RELEASE
            .execute(&client, &[&job_ids, &owner])
            .await?;
        Ok(())
    }

    /// Closes the job as `expired` with `reason`; false if it was closed meanwhile.
    pub async fn jobs_give_up(&self, give_up: &GiveUp<'_>, clock: &Clock) -> Result<bool, DbError> {
        let client = self.client().await?;
        let now = clock.now();
        let (until, first) = match give_up.recheck {
            Some((until, first)) => (Some(until.as_secs_f64()), Some(first.as_secs_f64())),
            None => (None, None),
        };
        let g = give_up;
        let row = sql::JOBS_GIVE_UP
            .query_one(
                &client,
                &[
                    &g.job_id,
                    &g.owner,
                    &g.reason,
                    &g.sume_status,
                    &now,
                    &until,
                    &first,
                ],
            )
            .await?;
        Ok(row.get::<_, i64>(0) == 1)
    }
}
