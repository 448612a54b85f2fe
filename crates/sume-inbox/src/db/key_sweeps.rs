//! `sume.key_sweeps` (statements of `sql/queries/key_sweeps.sql`) and the open jobs per key:
//! what the sweep weighs when it chooses, per API key, between walking the key's list at
//! Sume (a page settles up to a hundred jobs) and reading each due job by itself, and when a
//! key's next walk falls due (its pace kept in `next_at`, its oldest job's own poll).

use chrono::{DateTime, Utc};

use super::{sql, DbError, Store};
use crate::db::clock::Clock;

/// The open jobs of one key name (`None`: registered without one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLoad {
    /// The key name the jobs were registered with.
    pub key_name: Option<String>,
    /// Open jobs registered at least POLL_AFTER ago: what a walk would settle.
    pub past_poll_after: i64,
    /// Open jobs.
    pub open: i64,
    /// One-by-one polls due within the horizon asked for: what reading the jobs by themselves
    /// would cost over it.
    pub polls_due: i64,
    /// The earliest own poll of the open jobs (never polled: POLL_AFTER after registration):
    /// when the key's next walk falls due, unless its pace says later.
    pub oldest_poll: Option<DateTime<Utc>>,
}

/// Where a key's walks stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySweep {
    /// The key's name.
    pub key_name: String,
    /// The earliest its pace lets the next walk start.
    pub not_before: DateTime<Utc>,
    /// Another walk holds it (a live lease).
    pub held: bool,
    /// The pages the last walk read, up to the last one that held a job it looked for.
    pub last_pages: Option<i32>,
    /// The clock both were read against.
    pub now: DateTime<Utc>,
}

impl Store {
    /// Open jobs per key name, those older than `poll_after_secs`, the polls due within
    /// `horizon_secs`, and the earliest own poll.
    pub async fn jobs_open_by_key(
        &self,
        poll_after_secs: f64,
        horizon_secs: f64,
        clock: &Clock,
    ) -> Result<Vec<KeyLoad>, DbError> {
        let client = self.client().await?;
        let rows = sql::JOBS_OPEN_BY_KEY
            .query(&client, &[&poll_after_secs, &clock.now(), &horizon_secs])
            .await?;
        Ok(rows
            .iter()
            .map(|r| KeyLoad {
                key_name: r.get(0),
                past_poll_after: r.get(1),
                open: r.get(2),
                polls_due: r.get(3),
                oldest_poll: r.get(4),
            })
            .collect())
    }

    /// The walks of `key_names`, their rows made where missing.
    pub async fn key_sweeps_state(
        &self,
        key_names: &[String],
        clock: &Clock,
    ) -> Result<Vec<KeySweep>, DbError> {
        let client = self.client().await?;
        sql::KEY_SWEEPS_ENSURE
            .execute(&client, &[&key_names, &clock.now()])
            .await?;
        let rows = sql::KEY_SWEEPS_STATE
            .query(&client, &[&key_names, &clock.now()])
            .await?;
        Ok(rows
            .iter()
            .map(|r| KeySweep {
                key_name: r.get(0),
                not_before: r.get(1),
                held: r.get(2),
                last_pages: r.get(3),
                now: r.get(4),
            })
            .collect())
    }

    /// Takes `key_name`'s walk for `owner` when its pace allows one and no other walk holds
    /// it; answers the pages the last walk read and the clock's time. `None`: not taken.
    pub async fn key_sweeps_claim(
        &self,
        key_name: &str,
        owner: &str,
        lease_secs: f64,
        clock: &Clock,
    ) -> Result<Option<(Option<i32>, DateTime<Utc>)>, DbError> {
        let client = self.client().await?;
        let row = sql::KEY_SWEEPS_CLAIM
            .query_opt(&client, &[&key_name, &owner, &lease_secs, &clock.now()])
            .await?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Ends `owner`'s walk of `key_name`: `pages`, the next walk's estimate (`None`: no page
    /// was read, the last estimate stands), and `seen` of the jobs looked for; the next may
    /// start `next_secs` after the clock.
    pub async fn key_sweeps_done(
        &self,
        key_name: &str,
        owner: &str,
        next_secs: f64,
        (pages, seen): (Option<i32>, i32),
        clock: &Clock,
    ) -> Result<(), DbError> {
        let client = self.client().await?;
        sql::KEY_SWEEPS_DONE
            .execute(
                &client,
                &[&key_name, &owner, &next_secs, &pages, &seen, &clock.now()],
            )
            .await?;
        Ok(())
    }
}
