//! `sume.inbox_checks` (statements of `sql/queries/inbox_checks.sql`): job ids whose events
//! waited longer than INBOX_GRACE with no job row, checked against Sume under a lease.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{jobs, sql, DbError, Store};
use crate::db::clock::Clock;

/// An inbox check claimed for a look at Sume.
#[derive(Debug, Clone)]
pub struct ClaimedCheck {
    /// The job id the events wait for.
    pub job_id: String,
    /// Inconclusive looks so far.
    pub attempts: i32,
    /// Each key's answer recorded by earlier looks (`{"alt": "404"}`), this instance's or
    /// another's.
    pub answers: Value,
}

/// The verdict on a job id whose events waited with no job row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every key the fleet holds answered 404: not this service's job.
    Foreign,
    /// A key can read it, yet no row exists: a row was lost.
    Orphan,
}

impl Verdict {
    /// As stored in `inbox_checks.verdict`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Foreign => "foreign",
            Verdict::Orphan => "orphan",
        }
    }
}

/// What concluding a check did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concluded {
    /// Foreign: this many events were set aside.
    SetAside(u64),
    /// Recorded as an orphan; its events keep waiting, this many of them marked as an
    /// orphan's (out of the catch-up scan's way).
    Orphan(u64),
    /// The job row appeared meanwhile; attach owns the events now.
    RowAppeared,
    /// Another instance took the check over (our lease expired).
    LeaseLost,
}

/// An inbox check, for `jobs show`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct CheckRow {
    /// `pending`, `foreign` or `orphan`.
    #[schema(value_type = super::VerdictName)]
    pub verdict: String,
    /// Each key's last answer.
    pub answers: Value,
    /// Inconclusive looks so far.
    pub attempts: i32,
    /// When the verdict was made.
    pub checked_at: Option<DateTime<Utc>>,
    /// When the next look is due.
    pub next_check_at: DateTime<Utc>,
}

impl Store {
    /// Opens checks for job ids whose events waited longer than `grace_secs` (by `clock`)
    /// with no row.
    pub async fn inbox_checks_enqueue(
        &self,
        grace_secs: f64,
        limit: i64,
        clock: &Clock,
    ) -> Result<u64, DbError> {
        let client = self.client().await?;
        let now = clock.now();
        sql::INBOX_CHECKS_ENQUEUE
            .execute(&client, &[&grace_secs, &limit, &now])
            .await
    }

    /// Drops orphan verdicts whose job row exists again, and their events' marks; answers how
    /// many.
    pub async fn inbox_checks_resolve_orphans(&self) -> Result<u64, DbError> {
        let client = self.client().await?;
        let row = sql::INBOX_CHECKS_RESOLVE_ORPHANS
            .query_one(&client, &[])
            .await?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    /// Claims up to `limit` due checks for `owner` for `lease_secs`: those where a key of
    /// `own_keys` has not answered 404 yet, or every key of `fleet_keys` has.
    pub async fn inbox_checks_claim(
        &self,
        owner: &str,
        limit: i64,
        lease_secs: f64,
        own_keys: &[String],
        fleet_keys: &[String],
        clock: &Clock,
    ) -> Result<Vec<ClaimedCheck>, DbError> {
        let client = self.client().await?;
        let now = clock.now();
        let rows = sql::INBOX_CHECKS_CLAIM
            .query(
                &client,
                &[&owner, &limit, &lease_secs, &now, &own_keys, &fleet_keys],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| ClaimedCheck {
                job_id: r.get("job_id"),
                attempts: r.get("attempts"),
                answers: r.get("answers"),
            })
            .collect())
    }

    /// Inconclusive, or left to the instances holding the keys still to answer: records the
    /// answers (every key's so far) and tries again in `next_in_secs`.
    pub async fn inbox_checks_retry(
        &self,
        job_id: &str,
        owner: &str,
        answers: &Value,
        next_in_secs: f64,
        clock: &Clock,
    ) -> Result<(), DbError> {
        let client = self.client().await?;
        let now = clock.now();
        sql::INBOX_CHECKS_RETRY
            .execute(&client, &[&job_id, &owner, answers, &next_in_secs, &now])
            .await?;
        Ok(())
    }

    /// Records a verdict, and for a foreign job sets its waiting events aside (for an orphan:
    /// marks them), in one transaction; unless the job row has appeared, in which case the check is dropped.
    pub async fn conclude_inbox_check(
        &self,
        job_id: &str,
        owner: &str,
        verdict: Verdict,
        answers: &Value,
        clock: &Clock,
    ) -> Result<Concluded, DbError> {
        let now = clock.now();
        const WHAT: &str = "conclude_inbox_check";
        let mut client = self.client().await?;
        let tx = super::begin(&mut client, WHAT).await?;
        // Hold the job id against a concurrent registration: the row either exists now (and
        // attach owns the events) or its insert will see our marks, which attach ignores.
        let outcome = if jobs::lock_shared(&tx, job_id).await? {
            sql::INBOX_CHECKS_DROP
                .execute(&tx, &[&job_id, &owner])
                .await?;
            Concluded::RowAppeared
        } else {
            let updated = sql::INBOX_CHECKS_VERDICT
                .execute(&tx, &[&job_id, &owner, &verdict.as_str(), answers, &now])
                .await?;
            if updated == 0 {
                Concluded::LeaseLost
            } else if verdict == Verdict::Orphan {
                let n = sql::EVENTS_ORPHAN.execute(&tx, &[&job_id, &now]).await?;
                Concluded::Orphan(n)
            } else {
                let reason = format!("foreign: every key the fleet holds answered 404 ({answers})");
                let n = sql::EVENTS_SET_ASIDE
                    .execute(&tx, &[&job_id, &reason, &now])
                    .await?;
                Concluded::SetAside(n)
            }
        };
        super::commit(tx, WHAT).await?;
        Ok(outcome)
    }

    /// Gives claimed checks back untouched: due again at once.
    pub async fn inbox_checks_release(
        &self,
        job_ids: &[String],
        owner: &str,
    ) -> Result<(), DbError> {
        if job_ids.is_empty() {
            return Ok(());
        }
        let client = self.client().await?;
        sql::INBOX_CHECKS_RELEASE
            .execute(&client, &[&job_ids, &owner])
            .await?;
        Ok(())
    }
}
