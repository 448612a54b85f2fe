//! Retention: removing applied events, set-aside events, dead letters, settled foreign
//! checks and entries of the feed of closes older than RETENTION, and moving the events whose
//! job never got a row to the dead letters after ORPHAN_RETENTION, in small batches.
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
    /// Events whose job never got a row, moved to the dead letters (ORPHAN_RETENTION).
    pub orphan_events: u64,
    /// Orphan verdicts whose events have all left the inbox.
    pub orphan_checks: u64,
    /// Marked events whose job row turned out to exist: unmarked (not removed), for attach.
    pub orphans_unmarked: u64,
}

/// How old each kind is when retention takes it, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ages {
    /// RETENTION: applied and set-aside events, settled foreign checks, the feed's entries.
    pub settled: f64,
    /// DEAD_LETTER_RETENTION (`None`: dead letters are never removed).
    pub dead_letters: Option<f64>,
    /// ORPHAN_RETENTION: events still waiting for a job row, and their orphan verdicts.
    pub orphans: f64,
}

impl Removed {
    /// Every row removed (an event moved to the dead letters counts as removed from the inbox;
    /// an unmarked one does not).
    pub fn total(&self) -> u64 {
        self.events_applied
            + self.events_set_aside
            + self.dead_letters
            + self.inbox_checks
            + self.jobs
            + self.feed
            + self.orphan_events
            + self.orphan_checks
    }
}

const STATEMENTS: [Statement; 8] = [
    sql::EVENTS_DELETE_APPLIED,
    sql::EVENTS_DELETE_SET_ASIDE,
    sql::DEAD_LETTERS_DELETE_EXPIRED,
    sql::INBOX_CHECKS_DELETE_SETTLED,
    sql::JOB_CLOSES_DELETE_OLD,
    // After the dead letters' own: a letter just moved is never removed in the same pass.
    sql::EVENTS_EXPIRE_ORPHANS,
    sql::INBOX_CHECKS_DELETE_EXPIRED_ORPHANS,
    sql::EVENTS_ORPHAN_UNMARK_REGISTERED,
];

impl Store {
    /// Deletes (or, for events waiting for a row, moves to the dead letters) what is older
    /// than its age in `ages` by `clock`, `batch` rows a statement, at most `max_batches`
    /// statements per kind (the rest waits for the next pass).
    pub async fn retention_pass(
        &self,
        ages: &Ages,
        batch: i64,
        max_batches: usize,
        clock: &Clock,
    ) -> Result<Removed, DbError> {
        let client = self.client().await?;
        let now = clock.now();
        let mut removed = [0u64; STATEMENTS.len()];
        for (i, statement) in STATEMENTS.iter().enumerate() {
            let age = match *statement {
                sql::DEAD_LETTERS_DELETE_EXPIRED => match ages.dead_letters {
                    Some(age) => age,
                    None => continue,
                },
                sql::EVENTS_EXPIRE_ORPHANS
                | sql::INBOX_CHECKS_DELETE_EXPIRED_ORPHANS
                | sql::EVENTS_ORPHAN_UNMARK_REGISTERED => ages.orphans,
                _ => ages.settled,
            };
            for _ in 0..max_batches {
                // Rows the statement answers (the moved events' job ids) or changes.
                let n = if *statement == sql::EVENTS_EXPIRE_ORPHANS {
                    statement.query(&client, &[&age, &batch, &now]).await?.len() as u64
                } else {
                    statement.execute(&client, &[&age, &batch, &now]).await?
                };
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
            orphan_events: removed[5],
            orphan_checks: removed[6],
            orphans_unmarked: removed[7],
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
