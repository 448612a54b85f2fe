//! Retention: removing applied events, set-aside events, dead letters, settled foreign
//! checks and entries of the feed of closes older than RETENTION, in small batches.
//!
//! Batched deletes rather than time partitions: the inbox is deduplicated by `event_id`, and a
//! primary key on a partitioned table must include the partition key, so partitions by time
//! would let a redelivery that lands in a newer partition slip past the dedupe. Each batch is
//! its own short statement driven by a partial index, so a pass costs the rows it removes.

use super::{sql, DbError, Statement, Store};
use crate::db::clock::Clock;

/// Rows removed by one retention pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    /// Applied events.
    pub events_applied: u64,
    /// Events set aside as not ours.
    pub events_set_aside: u64,
    /// Dead letters.
    pub dead_letters: u64,
    /// Settled foreign checks whose events are gone.
    pub inbox_checks: u64,
    /// Closed jobs (JOB_RETENTION, off by default), with their disagreements.
    pub jobs: u64,
    /// Entries of the feed of closes (their jobs stay, unless JOB_RETENTION removes them).
    pub feed: u64,
}

impl Removed {
    /// Every row removed.
    pub fn total(&self) -> u64 {
        self.events_applied
            + self.events_set_aside
            + self.dead_letters
            + self.inbox_checks
            + self.jobs
            + self.feed
    }
}

const STATEMENTS: [Statement; 5] = [
    sql::EVENTS_DELETE_APPLIED,
    sql::EVENTS_DELETE_SET_ASIDE,
    sql::DEAD_LETTERS_DELETE_EXPIRED,
    sql::INBOX_CHECKS_DELETE_SETTLED,
    sql::JOB_CLOSES_DELETE_OLD,
];

impl Store {
    /// Deletes what is older than `older_than_secs` by `clock` (dead letters: older than
    /// `dead_letters_older_than_secs`, never when `None`), `batch` rows a statement, at most
    /// `max_batches` statements per kind (the rest waits for the next pass).
    pub async fn retention_pass(
        &self,
        older_than_secs: f64,
        dead_letters_older_than_secs: Option<f64>,
        batch: i64,
        max_batches: usize,
        clock: &Clock,
    ) -> Result<Removed, DbError> {
        let client = self.client().await?;
        let now = clock.now();
        let mut removed = [0u64; 5];
        for (i, statement) in STATEMENTS.iter().enumerate() {
            let age = if *statement == sql::DEAD_LETTERS_DELETE_EXPIRED {
                match dead_letters_older_than_secs {
                    Some(age) => age,
                    None => continue,
                }
            } else {
                older_than_secs
            };
            for _ in 0..max_batches {
                let n = statement.execute(&client, &[&age, &batch, &now]).await?;
                removed[i] += n;
                if n < batch as u64 {
                    break;
                }
            }
        }
        Ok(Removed {
            events_applied: removed[0],
            events_set_aside: removed[1],
            dead_letters: removed[2],
            inbox_checks: removed[3],
            jobs: 0,
            feed: removed[4],
        })
    }

    /// Deletes jobs closed more than `older_than_secs` ago by `clock`, with their
    /// disagreements, `batch` a statement, at most `max_batches` statements; answers how many.
    pub async fn jobs_delete_closed(
        &self,
        older_than_secs: f64,
        batch: i64,
        max_batches: usize,
        clock: &Clock,
    ) -> Result<u64, DbError> {
        let client = self.client().await?;
        let now = clock.now();
        let mut removed = 0;
        for _ in 0..max_batches {
            let row = sql::JOBS_DELETE_CLOSED
                .query_one(&client, &[&older_than_secs, &batch, &now])
                .await?;
            let n = row.get::<_, i64>(0) as u64;
            removed += n;
            if n < batch as u64 {
                break;
            }
        }
        Ok(removed)
    }
}
