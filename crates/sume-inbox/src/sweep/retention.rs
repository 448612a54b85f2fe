//! The retention service: removes applied events, set-aside events, dead letters and settled
//! foreign checks older than `RETENTION`, in bounded batches (see `db/retention.rs` for why
//! batched deletes and not partitions). Open jobs and waiting events are never removed, and
//! job rows not at all. It asks nothing of Sume and runs with or without API keys.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::every;
use crate::clock::Clock;
use crate::config::SweepConfig;
use crate::db::{DbError, Removed, Store};
use crate::health::Health;
use crate::metrics::Metrics;

/// Retention statements per kind and pass: a backlog drains over several passes rather than
/// in one long burst.
const BATCHES_PER_PASS: usize = 10;

/// The retention service.
pub struct Retention {
    store: Store,
    metrics: Arc<Metrics>,
    config: SweepConfig,
    clock: Clock,
}

impl Retention {
    /// Reads `retention`, `retention_batch` and `interval` of `config`; `clock` is
    /// [`Clock::Database`] outside tests.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        config: SweepConfig,
        clock: Clock,
    ) -> Retention {
        Retention {
            store,
            metrics,
            config,
            clock,
        }
    }

    /// Runs a pass every `SWEEP_INTERVAL` (jittered) until shutdown.
    pub async fn run(self, shutdown: CancellationToken, health: Health) {
        let guard = health.task("sweep-retention");
        every("retention", self.config.interval, &shutdown, || {
            self.run_once()
        })
        .await;
        guard.finished();
    }

    /// One pass: at most ten batches of `RETENTION_BATCH` rows per kind; a larger backlog
    /// waits for the next pass.
    pub async fn run_once(&self) -> Result<Removed, DbError> {
        let removed = self
            .store
            .retention_pass(
                self.config.retention.as_secs_f64(),
                self.config.dead_letter_retention.map(|d| d.as_secs_f64()),
                self.config.retention_batch as i64,
                BATCHES_PER_PASS,
                &self.clock,
            )
            .await?;
        self.metrics.retention_removed.inc_by(removed.total());
        Ok(removed)
    }
}
