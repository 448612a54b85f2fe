//! The retention service: removes applied events, set-aside events, dead letters and settled
//! foreign checks older than `RETENTION`, in bounded batches (see `db/retention.rs` for why
//! batched deletes and not partitions). Open jobs are never removed; closed jobs only with
//! `JOB_RETENTION` (off by default: the rows are the application's), once an hour, since no
//! index finds them. An event still waiting is never removed: one that waited longer than
//! `ORPHAN_RETENTION` for a job row that never came moves to the dead letters, counted in
//! `sume_inbox_orphan_events_expired_total`. It asks nothing of Sume and runs with or without
//! API keys.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::schedule::every;
use crate::actors::supervision::Actor;
use crate::config::SweepConfig;
use crate::db::clock::Clock;
use crate::db::{Ages, DbError, Removed, Store};
use crate::metrics::Metrics;

/// Retention statements per kind and pass: a backlog drains over several passes rather than
/// in one long burst.
const BATCHES_PER_PASS: usize = 10;

/// How often closed jobs are looked for (JOB_RETENTION): a scan of `sume.jobs` without an
/// index, too dear for every pass. A retention shorter than this (below what the configuration
/// accepts: only a library caller such as the soak benchmark sets one) is its own period.
const JOBS_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// How long after a look for closed jobs the next one is due: [`JOBS_EVERY`], or JOB_RETENTION
/// when shorter.
fn jobs_period(keep: std::time::Duration) -> std::time::Duration {
    JOBS_EVERY.min(keep)
}

/// The retention service.
pub struct Retention {
    store: Store,
    metrics: Arc<Metrics>,
    config: SweepConfig,
    clock: Clock,
    /// When closed jobs are next looked for (none yet: at the first pass).
    jobs_due: std::sync::Mutex<Option<tokio::time::Instant>>,
}

impl Retention {
    /// Reads `retention`, `dead_letter_retention`, `orphan_retention`, `retention_batch`,
    /// `job_retention` and `interval` of `config`; `clock` is
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
            jobs_due: std::sync::Mutex::new(None),
        }
    }
}

impl Actor for Retention {
    fn name(&self) -> String {
        "sweep-retention".into()
    }

    /// Runs a pass every `SWEEP_INTERVAL` (jittered) until `shutdown`.
    async fn run(self, shutdown: CancellationToken) {
        every("retention", self.config.interval, &shutdown, || {
            self.run_once()
        })
        .await;
    }
}

impl Retention {
    /// One pass: at most ten batches of `RETENTION_BATCH` rows per kind; a larger backlog
    /// waits for the next pass (closed jobs: the next hour's).
    pub async fn run_once(&self) -> Result<Removed, DbError> {
        let ages = Ages {
            settled: self.config.retention.as_secs_f64(),
            dead_letters: self.config.dead_letter_retention.map(|d| d.as_secs_f64()),
            orphans: self.config.orphan_retention.as_secs_f64(),
        };
        let removed = self
            .store
            .retention_pass(
                &ages,
                self.config.retention_batch as i64,
                BATCHES_PER_PASS,
                &self.clock,
            )
            .await?;
        let removed = Removed {
            jobs: self.closed_jobs_pass().await?,
            ..removed
        };
        if removed.orphan_events > 0 {
            self.metrics
                .orphan_events_expired
                .inc_by(removed.orphan_events);
            tracing::warn!(
                events = removed.orphan_events,
                after = %humantime::format_duration(self.config.orphan_retention),
                "events whose job never got a row moved to the dead letters (ORPHAN_RETENTION); `sume-inbox replay --dead-letters` applies them once their jobs are registered"
            );
        }
        self.metrics.retention_removed.inc_by(removed.total());
        Ok(removed)
    }

    /// With JOB_RETENTION, at the first pass and then once an hour (or once per JOB_RETENTION,
    /// when shorter): closed jobs older than it.
    async fn closed_jobs_pass(&self) -> Result<u64, DbError> {
        let Some(keep) = self.config.job_retention else {
            return Ok(0);
        };
        let now = tokio::time::Instant::now();
        {
            let mut due = self.jobs_due.lock().expect("jobs_due");
            if due.is_some_and(|at| now < at) {
                return Ok(0);
            }
            *due = Some(now + jobs_period(keep));
        }
        self.store
            .jobs_delete_closed(
                keep.as_secs_f64(),
                self.config.retention_batch as i64,
                BATCHES_PER_PASS,
                &self.clock,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn closed_jobs_are_looked_for_hourly_or_once_per_a_shorter_job_retention() {
        assert_eq!(jobs_period(Duration::from_secs(90 * 86_400)), JOBS_EVERY);
        assert_eq!(jobs_period(Duration::from_secs(3600)), JOBS_EVERY);
        assert_eq!(
            jobs_period(Duration::from_secs(60)),
            Duration::from_secs(60)
        );
    }
}
