//! Retention: removing applied events, set-aside events, dead letters and settled foreign
//! checks older than RETENTION, in small batches.
//!
//! Batched deletes rather than time partitions: the inbox is deduplicated by `event_id`, and a
//! primary key on a partitioned table must include the partition key, so partitions by time
//! would let a redelivery that lands in a newer partition slip past the dedupe. Each batch is
//! its own short statement driven by a partial index, so a pass costs the rows it removes.

use super::{prepare, DbError, Store};

/// Rows removed by one retention pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    pub events_applied: u64,
    pub events_set_aside: u64,
    pub dead_letters: u64,
    pub inbox_checks: u64,
}

impl Removed {
    pub fn total(&self) -> u64 {
        self.events_applied + self.events_set_aside + self.dead_letters + self.inbox_checks
    }
}

const STATEMENTS: [&str; 4] = [
    "retention_events_applied",
    "retention_events_set_aside",
    "retention_dead_letters",
    "retention_inbox_checks",
];

impl Store {
    /// Deletes what is older than `older_than_secs`, `batch` rows a statement, at most
    /// `max_batches` statements per kind (the rest waits for the next pass).
    pub async fn retention_pass(
        &self,
        older_than_secs: f64,
        batch: i64,
        max_batches: usize,
    ) -> Result<Removed, DbError> {
        let client = self.client().await?;
        let mut removed = [0u64; 4];
        for (i, name) in STATEMENTS.iter().enumerate() {
            let stmt = prepare(&client, name).await?;
            for _ in 0..max_batches {
                let n = client
                    .execute(&stmt, &[&older_than_secs, &batch])
                    .await
                    .map_err(|e| DbError::query(name, e))?;
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
        })
    }
}
