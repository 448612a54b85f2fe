//! The give-up recheck service: asks Sume again about jobs given up blind.
//!
//! A give-up decided while Sume gave no answer about the job (no answer at all, a timeout, a
//! 429, a 5xx, no read budget) is the daemon's guess. Such a job is kept in
//! `sume.give_up_rechecks` and asked about again for GIVE_UP_RECHECK, at a low cadence, and only
//! with reads the open jobs' polls leave: a read is taken only when it is free at once (never
//! waited for) and while the key has more than a tenth of its day's reads left. What comes of
//! it is [`RecheckFold`]'s decision: Sume's terminal status supersedes the give-up through the
//! same fold as a poll (`closed_by = poll`, the give-up kept in `superseded_give_up`; the
//! application hears of it through the feed and `NOTIFY sume_job_closed`), `running` or a 404
//! under every working key lets it stand, anything else is asked again later.

use std::ops::AddAssign;
use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::schedule::{every, serve};
use crate::actors::supervision::Actor;
use crate::config::SweepConfig;
use crate::db::{ClaimedRecheck, Clock, DbError, Store};
use crate::decisions::backoff::jitter;
use crate::decisions::job_fold::Outcome;
use crate::decisions::recheck_decision::{RecheckDecision, RecheckFold};
use crate::metrics::{Metrics, RecheckLabels, RecheckOutcome};
use crate::sume_api::StatusReader;

/// What one recheck pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecheckStats {
    /// Rechecks claimed.
    pub claimed: usize,
    /// Give-ups superseded by Sume's terminal status.
    pub superseded: usize,
    /// Give-ups that stand (Sume said `running`, or 404 under every working key).
    pub stands: usize,
    /// Jobs still without an answer, asked again later.
    pub again: usize,
    /// Claims given back: no read to spare now.
    pub deferred: usize,
    /// Rechecks past their end, removed.
    pub expired: u64,
    /// Status calls sent.
    pub requests: usize,
}

impl AddAssign for RecheckStats {
    fn add_assign(&mut self, o: RecheckStats) {
        self.claimed += o.claimed;
        self.superseded += o.superseded;
        self.stands += o.stands;
        self.again += o.again;
        self.deferred += o.deferred;
        self.expired += o.expired;
        self.requests += o.requests;
    }
}

/// The give-up recheck service.
pub struct Recheck {
    store: Store,
    metrics: Arc<Metrics>,
    reader: StatusReader,
    config: SweepConfig,
    clock: Clock,
}

impl Recheck {
    /// `clock` is [`Clock::Database`] outside tests.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        reader: StatusReader,
        config: SweepConfig,
        clock: Clock,
    ) -> Recheck {
        Recheck {
            store,
            metrics,
            reader,
            config,
            clock,
        }
    }

    /// One pass: removes rechecks past their end, then asks about the due ones a batch at a
    /// time while reads are to spare. Does nothing without API keys or with GIVE_UP_RECHECK off.
    pub async fn run_once(&self, shutdown: &CancellationToken) -> Result<RecheckStats, DbError> {
        let mut total = RecheckStats::default();
        if self.config.give_up_recheck.is_none() || self.reader.keys().is_empty() {
            return Ok(total);
        }
        // The keys' checks are the poll's and the inbox check's (shared through the reader):
        // this pass only reads them, and sends nothing but the rechecks themselves.
        self.reader.ensure_budget().await?;
        let batch = self.config.batch as i64;
        total.expired = self
            .store
            .give_up_rechecks_expire(batch, &self.clock)
            .await?;
        loop {
            let claims = self
                .store
                .give_up_rechecks_claim(
                    self.reader.owner(),
                    batch,
                    self.config.lease.as_secs_f64(),
                    &self.reader.key_names(),
                    &self.clock,
                )
                .await?;
            let claimed = claims.len();
            let verdicts_allowed = self.reader.verdicts_allowed();
            let (stats, unserved) = serve(claims, self.config.concurrency, |c| {
                self.recheck(c, verdicts_allowed, shutdown)
            })
            .await?;
            self.store
                .give_up_rechecks_release(&unserved, self.reader.owner())
                .await?;
            let more = claimed == self.config.batch && stats.deferred == 0;
            total += RecheckStats { claimed, ..stats };
            if !more || shutdown.is_cancelled() {
                break;
            }
        }
        Ok(total)
    }

    /// Asks about one job given up blind and writes what comes of it. Answers the stats, and
    /// the id when it must be released unserved.
    async fn recheck(
        &self,
        claim: ClaimedRecheck,
        verdicts_allowed: bool,
        shutdown: &CancellationToken,
    ) -> Result<(RecheckStats, Option<String>), DbError> {
        let (keys, _) = self.reader.keys_for(claim.api_key.as_deref());
        if !keys.iter().all(|k| self.reader.spare_read(k)) {
            let stats = RecheckStats {
                deferred: 1,
                ..RecheckStats::default()
            };
            return Ok((stats, Some(claim.job_id)));
        }
        let first = self.config.poll_max_interval;
        let mut fold = RecheckFold::new(keys.len(), verdicts_allowed, claim.attempts, first);
        // Never waits for the budget: the reads open jobs' polls leave, or none.
        let asked = self
            .reader
            .ask_about(
                &claim.job_id,
                claim.api_key.as_deref(),
                Instant::now(),
                shutdown,
                |a| fold.read(a),
            )
            .await?;
        let mut stats = RecheckStats {
            requests: asked.calls.len(),
            ..RecheckStats::default()
        };
        if let Err(e) = self.store.job_polls_insert(&asked.calls, &self.clock).await {
            tracing::warn!(error = %e, job_id = %claim.job_id, "writing the recheck's history failed");
        }
        let released = self
            .perform(&claim.job_id, fold.decide(), &mut stats)
            .await?;
        Ok((stats, released.then_some(claim.job_id)))
    }

    /// Writes what the decision says; true when the claim is to be released unserved.
    async fn perform(
        &self,
        job_id: &str,
        decision: RecheckDecision,
        stats: &mut RecheckStats,
    ) -> Result<bool, DbError> {
        let owner = self.reader.owner();
        let outcome = match decision {
            RecheckDecision::Supersede { status, result, .. } => {
                let o = self
                    .store
                    .give_up_superseded(job_id, owner, &status, result)
                    .await?;
                if o == Outcome::Closed {
                    self.metrics.closed("poll", 1);
                    tracing::info!(job_id, %status, "a give-up made without Sume's answer is superseded by Sume's status");
                }
                stats.superseded += 1;
                RecheckOutcome::superseded
            }
            RecheckDecision::Stands { answer } => {
                self.store.give_up_rechecks_done(job_id, owner).await?;
                tracing::info!(job_id, %answer, "Sume answered about a job given up blind: the give-up stands");
                stats.stands += 1;
                RecheckOutcome::stands
            }
            RecheckDecision::Again { answer, next } => {
                let next = jitter(next).as_secs_f64();
                self.store
                    .give_up_rechecks_again(job_id, owner, &answer, next, &self.clock)
                    .await?;
                stats.again += 1;
                RecheckOutcome::again
            }
            RecheckDecision::Release => {
                stats.deferred += 1;
                return Ok(true);
            }
        };
        self.metrics
            .give_up_rechecks
            .get_or_create(&RecheckLabels { outcome })
            .inc();
        Ok(false)
    }
}

impl Actor for Recheck {
    fn name(&self) -> String {
        "sweep-give-up-recheck".into()
    }

    /// Runs a pass every `SWEEP_INTERVAL` (jittered) until `shutdown`.
    async fn run(self, shutdown: CancellationToken) {
        every("give-up recheck", self.config.interval, &shutdown, || {
            self.run_once(&shutdown)
        })
        .await;
    }
}
