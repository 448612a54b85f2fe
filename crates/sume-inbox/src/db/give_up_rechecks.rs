//! `sume.give_up_rechecks` (statements of `sql/queries/give_up_rechecks.sql`): give-ups decided
//! while Sume gave no answer about the job, asked about again until their end. A terminal
//! status from Sume supersedes the give-up through the same fold as a poll, under the job's row
//! lock, in the transaction that ends the asking.

use super::{sql, DbError, Store};
use crate::db::clock::Clock;
use crate::decisions::job_fold::{Observation, Outcome, Source};

/// A recheck claimed by this instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedRecheck {
    /// Sume's job id.
    pub job_id: String,
    /// The key name the job was registered with, if any.
    pub api_key: Option<String>,
    /// Rechecks made before this one.
    pub attempts: i32,
}

impl Store {
    /// Claims up to `limit` due rechecks for `owner` for `lease_secs`, of jobs naming no key
    /// or one of `own_keys`.
    pub async fn give_up_rechecks_claim(
        &self,
        owner: &str,
        limit: i64,
        lease_secs: f64,
        own_keys: &[String],
        clock: &Clock,
    ) -> Result<Vec<ClaimedRecheck>, DbError> {
        let client = self.client().await?;
        let rows = sql::GIVE_UP_RECHECKS_CLAIM
            .query(
                &client,
                &[&owner, &limit, &lease_secs, &clock.now(), &own_keys],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| ClaimedRecheck {
                job_id: r.get(0),
                api_key: r.get(1),
                attempts: r.get(2),
            })
            .collect())
    }

    /// No answer again: record `answer` and ask again in `next_secs` (or stop at the end).
    pub async fn give_up_rechecks_again(
        &self,
        job_id: &str,
        owner: &str,
        answer: &str,
        next_secs: f64,
        clock: &Clock,
    ) -> Result<(), DbError> {
        let client = self.client().await?;
        sql::GIVE_UP_RECHECKS_AGAIN
            .execute(
                &client,
                &[&job_id, &owner, &answer, &next_secs, &clock.now()],
            )
            .await?;
        Ok(())
    }

    /// Stops asking about `job_id`: the give-up stands (Sume said `running`, or 404).
    pub async fn give_up_rechecks_done(&self, job_id: &str, owner: &str) -> Result<(), DbError> {
        let client = self.client().await?;
        sql::GIVE_UP_RECHECKS_DONE
            .execute(&client, &[&job_id, &owner])
            .await?;
        Ok(())
    }

    /// Gives claims back untouched.
    pub async fn give_up_rechecks_release(
        &self,
        job_ids: &[String],
        owner: &str,
    ) -> Result<(), DbError> {
        if job_ids.is_empty() {
            return Ok(());
        }
        let client = self.client().await?;
        sql::GIVE_UP_RECHECKS_RELEASE
            .execute(&client, &[&job_ids, &owner])
            .await?;
        Ok(())
    }

    /// Removes up to `limit` rechecks past their end.
    pub async fn give_up_rechecks_expire(&self, limit: i64, clock: &Clock) -> Result<u64, DbError> {
        let client = self.client().await?;
        sql::GIVE_UP_RECHECKS_EXPIRE
            .execute(&client, &[&clock.now(), &limit])
            .await
    }

    /// Sume's terminal `status` for a job given up blind: folded onto the job as a poll's
    /// (the give-up is superseded and kept in `superseded_give_up`, `closed_by = poll`), and
    /// the asking ends, in one transaction under the job's row lock and `owner`'s lease.
    pub async fn give_up_superseded(
        &self,
        job_id: &str,
        owner: &str,
        status: &str,
        result: Option<sume_wire::JsonText>,
    ) -> Result<Outcome, DbError> {
        const WHAT: &str = "give_up_superseded";
        let mut client = self.client().await?;
        let tx = super::begin(&mut client, WHAT).await?;
        let mut folds = super::jobs::lock(&tx, &[job_id.to_owned()]).await?;
        let outcome = match folds.first_mut() {
            Some(fold) => fold.apply(&Observation {
                source: Source::Poll,
                event_id: None,
                status: Some(status.to_owned()),
                result,
            }),
            None => Outcome::Ignored,
        };
        super::jobs::write(&tx, &folds).await?;
        sql::GIVE_UP_RECHECKS_DONE
            .execute(&tx, &[&job_id, &owner])
            .await?;
        super::commit(tx, WHAT).await?;
        Ok(outcome)
    }
}
