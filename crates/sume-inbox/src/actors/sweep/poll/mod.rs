//! The poll service: asks Sume about open jobs whose webhook has not closed them.
//!
//! Open jobs are polled `POLL_AFTER` after registration, then at growing, jittered intervals
//! (capped at `POLL_MAX_INTERVAL`). A terminal status closes the job through the same fold as
//! a webhook (`closed_by = poll`); whichever comes first wins. A job still open after
//! `POLL_GIVE_UP` is closed as `expired` with the reason. A 429 puts the next poll after its
//! `Retry-After` without counting as an attempt.
//!
//! Where a key has many jobs in flight, reading each by itself costs a read per job and poll;
//! a walk of the key's list at Sume settles up to a hundred with one read (`walk.rs`, the
//! choice in [`crate::decisions::walk_choice`]). Each pass first walks the lists of the keys
//! where that is cheaper (and due), then polls the due jobs of the other keys one by one.
//!
//! What a poll does is decided by [`PollFold`] (`poll_decision.rs`), a pure fold over the
//! answers read (no database, no clock of its own); [`Poll`] claims due jobs under a lease,
//! asks Sume, and performs the [`PollDecision`] with its one write. It owns the poll columns of `sume.jobs` (`next_poll_at`,
//! `poll_attempts`, `last_poll_answer`, the lease) and `sume.job_polls`, each job's latest
//! status calls for the operator: a batch's calls are written after it in one statement.

use std::ops::AddAssign;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

mod walk;

use super::schedule::{every, send_deadline, serve};
use crate::actors::supervision::Actor;
use crate::config::SweepConfig;
use crate::db::clock::Clock;
use crate::db::{Claim, ClaimedJob, DbError, GiveUp, PollDone, PolledCall, Store};
use crate::decisions::job_fold::Outcome;
use crate::decisions::poll_decision::{PollDecision, PollFold, PollRules};
use crate::metrics::Metrics;
use crate::process::traces;
use crate::sume_api::StatusReader;

/// What one poll pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PollStats {
    /// Jobs claimed.
    pub jobs_claimed: usize,
    /// Jobs a terminal status closed.
    pub closed_by_poll: usize,
    /// Jobs still open, polled again later.
    pub still_open: usize,
    /// Jobs closed as `expired` after `POLL_GIVE_UP`.
    pub given_up: usize,
    /// Terminal statuses that contradicted the one a job was closed with.
    pub disagreements: usize,
    /// Claims given back because the budget could not serve them before their lease ended.
    pub deferred: usize,
    /// Status calls sent (one job each).
    pub requests: usize,
    /// Pages of keys' lists read by walks.
    pub list_pages: usize,
    /// Claimed jobs a walk saw in the list (and settled without a read of their own).
    pub seen_in_list: usize,
}

impl AddAssign for PollStats {
    fn add_assign(&mut self, o: PollStats) {
        self.list_pages += o.list_pages;
        self.seen_in_list += o.seen_in_list;
        self.jobs_claimed += o.jobs_claimed;
        self.closed_by_poll += o.closed_by_poll;
        self.still_open += o.still_open;
        self.given_up += o.given_up;
        self.disagreements += o.disagreements;
        self.deferred += o.deferred;
        self.requests += o.requests;
    }
}

/// What serving claims answers: the stats, and the status calls made, for `sume.job_polls`.
#[derive(Default)]
struct Served {
    stats: PollStats,
    calls: Vec<PolledCall>,
}

impl AddAssign for Served {
    fn add_assign(&mut self, o: Served) {
        self.stats += o.stats;
        self.calls.extend(o.calls);
    }
}

/// Poll history writes that failed are logged at most this often.
static HISTORY_LOG: crate::process::log_budget::LogBudget =
    crate::process::log_budget::LogBudget::new(1, Duration::from_secs(60));

/// The open-job poll service.
pub struct Poll {
    store: Store,
    metrics: Arc<Metrics>,
    reader: StatusReader,
    config: SweepConfig,
    clock: Clock,
}

impl Poll {
    /// `clock` is [`Clock::Database`] outside tests.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        reader: StatusReader,
        config: SweepConfig,
        clock: Clock,
    ) -> Poll {
        Poll {
            store,
            metrics,
            reader,
            config,
            clock,
        }
    }
}

impl Actor for Poll {
    fn name(&self) -> String {
        "sweep-poll".into()
    }

    /// Runs a pass every `SWEEP_INTERVAL` (jittered) until `shutdown`.
    async fn run(self, shutdown: CancellationToken) {
        if self.reader.keys().is_empty() {
            tracing::warn!("no SUME_API_KEYS: open jobs are not polled");
        }
        every("poll", self.config.interval, &shutdown, || {
            self.run_once(&shutdown)
        })
        .await;
    }
}

impl Poll {
    /// One pass: claims due jobs a batch at a time until none is left (or the budget ran out
    /// for this pass), polls each. Does nothing without API keys.
    pub async fn run_once(&self, shutdown: &CancellationToken) -> Result<PollStats, DbError> {
        let mut total = PollStats::default();
        if self
            .reader
            .prepare_pass(self.config.request_timeout)
            .await?
            .is_none()
        {
            return Ok(total);
        }
        let (walked, walked_keys) = self.walks(shutdown).await?;
        total += walked;
        loop {
            // Re-read per batch: a pass can outlast a key's check, or see the breaker open.
            let hold_verdicts = !self.reader.verdicts_allowed();
            let stats = self.batch(shutdown, hold_verdicts, &walked_keys).await?;
            let more = stats.jobs_claimed == self.config.batch && stats.deferred == 0;
            total += stats;
            if !more || shutdown.is_cancelled() {
                break;
            }
        }
        Ok(total)
    }

    /// Claims a batch of due jobs (of the keys not walked) and polls each by itself.
    async fn batch(
        &self,
        shutdown: &CancellationToken,
        hold_verdicts: bool,
        walked_keys: &[String],
    ) -> Result<PollStats, DbError> {
        let claimed_at = Instant::now();
        let claim = self.claim(self.config.batch as i64);
        let claims = self
            .store
            .jobs_claim_due(&claim, walked_keys, &self.reader.key_names(), &self.clock)
            .await?;
        let mut stats = PollStats {
            jobs_claimed: claims.len(),
            ..PollStats::default()
        };
        let deadline = send_deadline(claimed_at, self.config.lease, self.config.request_timeout);
        let (served, unserved) = serve(claims, self.config.concurrency, |c| {
            let span = traces::span!("poll", otel.name = "poll", sume.job_id = c.job_id.as_str());
            self.poll(c, deadline, shutdown, hold_verdicts)
                .instrument(span)
        })
        .await?;
        stats += served.stats;
        self.record(&served.calls).await;
        self.store
            .jobs_release(&unserved, self.reader.owner())
            .await?;
        Ok(stats)
    }

    /// A claim of up to `limit` jobs by this instance, under its lease.
    fn claim(&self, limit: i64) -> Claim<'_> {
        Claim {
            owner: self.reader.owner(),
            limit,
            lease_secs: self.config.lease.as_secs_f64(),
            poll_after_secs: self.config.poll_after.as_secs_f64(),
        }
    }

    /// Writes the batch's status calls to each job's history, one statement for the batch. The
    /// history is for reading: a failure to write it is logged, and the poll goes on.
    async fn record(&self, calls: &[PolledCall]) {
        if let Err(e) = self.store.job_polls_insert(calls, &self.clock).await {
            if let Some(left_out) = HISTORY_LOG.allow() {
                tracing::warn!(error = %e, left_out, calls = calls.len(), "writing the poll history failed");
            }
        }
    }

    /// Polls one job: asks its keys, folds the answers, performs the decision. Answers the
    /// stats, and the id when it must be released unserved.
    async fn poll(
        &self,
        job: ClaimedJob,
        deadline: Instant,
        shutdown: &CancellationToken,
        hold_verdicts: bool,
    ) -> Result<(Served, Option<String>), DbError> {
        let age = Duration::try_from_secs_f64(job.age_secs).unwrap_or_default();
        let rules = PollRules {
            hold_verdicts,
            ..PollRules::of(&self.config)
        };
        let (keys, _) = self.reader.keys_for(job.api_key.as_deref());
        let mut fold = PollFold::new(rules, age, job.poll_attempts).with_keys(keys.len());
        let asked = self
            .reader
            .ask_about(
                &job.job_id,
                job.api_key.as_deref(),
                deadline,
                shutdown,
                |a| fold.read(a),
            )
            .await?;
        let mut stats = PollStats {
            requests: asked.calls.len(),
            ..PollStats::default()
        };
        let decision = fold.decide(shutdown.is_cancelled());
        let released = self.perform(&job.job_id, decision, &mut stats).await?;
        let served = Served {
            stats,
            calls: asked.calls,
        };
        Ok((served, released.then_some(job.job_id)))
    }

    /// Writes what the decision says; true when the claim is to be released unserved.
    async fn perform(
        &self,
        job_id: &str,
        decision: PollDecision,
        stats: &mut PollStats,
    ) -> Result<bool, DbError> {
        let owner = self.reader.owner();
        match decision {
            PollDecision::Close {
                status,
                result,
                answer,
            } => {
                let outcome = self
                    .store
                    .close_by_poll(job_id, owner, &status, result, &answer, &self.clock)
                    .await?;
                match outcome {
                    Outcome::Closed => {
                        self.metrics.closed("poll", 1);
                        stats.closed_by_poll += 1;
                    }
                    Outcome::Disagreement => {
                        self.metrics.disagreements_seen.inc();
                        stats.disagreements += 1;
                    }
                    _ => {}
                }
            }
            PollDecision::StillOpen {
                answer,
                status,
                next,
            } => {
                stats.still_open += 1;
                let done = PollDone {
                    answer: &answer,
                    sume_status: status.as_deref(),
                    next_in_secs: next.wait().as_secs_f64(),
                    counts_as_attempt: next.counts_as_attempt(),
                };
                self.store
                    .poll_still_open(job_id, owner, &done, &self.clock)
                    .await?;
            }
            PollDecision::GiveUp {
                reason,
                status,
                blind,
            } => {
                let recheck = match (blind, self.config.give_up_recheck) {
                    (true, Some(until)) => Some((until, self.config.poll_max_interval)),
                    _ => None,
                };
                let give_up = GiveUp {
                    job_id,
                    owner,
                    reason: &reason,
                    sume_status: status.as_deref(),
                    recheck,
                };
                if self.store.jobs_give_up(&give_up, &self.clock).await? {
                    stats.given_up += 1;
                    self.metrics.closed("give_up", 1);
                    tracing::warn!(job_id, %reason, blind, "gave up on job: closed as expired");
                }
            }
            PollDecision::Release => {
                stats.deferred += 1;
                return Ok(true);
            }
        }
        Ok(false)
    }
}
