//! Asking again about the events marked while no key could ask.
//!
//! Without `SUME_API_KEYS` on any live instance, the inbox check marks every event past
//! `INBOX_GRACE` with no job row (`orphaned_at`): nobody can ask Sume about it. Once an
//! instance with keys sweeps, those marks no longer stand: a marked event whose job id has no
//! orphan verdict (no key ever read the job) loses its mark, and the regular check asks every
//! key the fleet holds about its job id, so it is set aside as another workspace's, or kept as
//! an orphan's, instead of moving to the dead letters at `ORPHAN_RETENTION` unasked. An
//! orphan's events (a key reads the job; it has no row) keep their mark.
//!
//! The waiting events are walked in bounded steps from a cursor kept between passes, so a
//! large backlog drains at a constant cost per step, and with no backlog left a pass costs
//! one step.

use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::db::{DbError, Store};

/// Steps of one pass at most, while they find marks to clear.
const STEPS: usize = 10;

/// The cursor through the waiting events: the last one walked, or `None` to start over.
#[derive(Debug, Default)]
pub(super) struct AskAgain {
    cursor: Mutex<Option<(DateTime<Utc>, String)>>,
}

impl AskAgain {
    /// Clears the marks left by passes that had no key to ask with, walking up to `batch`
    /// waiting events a step, for up to ten steps while steps clear some. Answers how many
    /// events lost their mark.
    pub(super) async fn pass(&self, store: &Store, batch: i64) -> Result<u64, DbError> {
        let mut unmarked = 0;
        for _ in 0..STEPS {
            let after = self
                .cursor
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let step = store
                .events_orphan_unmark_askable(after.as_ref(), batch)
                .await?;
            let wrapped = step.walked < batch as u64;
            *self.cursor.lock().unwrap_or_else(|e| e.into_inner()) =
                if wrapped { None } else { step.last };
            unmarked += step.unmarked;
            if wrapped || step.unmarked == 0 {
                break;
            }
        }
        if unmarked > 0 {
            tracing::info!(
                events = unmarked,
                "events marked while no key could ask are asked about again with this instance's keys"
            );
        }
        Ok(unmarked)
    }
}
