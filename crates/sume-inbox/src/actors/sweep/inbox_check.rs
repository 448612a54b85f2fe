//! The inbox-check service: asks Sume about job ids whose events wait with no job row.
//!
//! Events that waited longer than `INBOX_GRACE` with no job row get a check
//! (`sume.inbox_checks`), looked up at Sume with this instance's keys. A key reads only its own
//! member's jobs, so a job is foreign (not ours) only once every key the fleet holds answered
//! 404: this instance's, and those the other instances heard from in the last five minutes
//! hold (their heartbeats say which). Each instance records its keys' answers on the check and
//! asks only what has not answered 404 yet; when every key it holds answered 404 and another
//! instance's key has not, the check is left, due at once, to that instance, which adds its
//! answers and may conclude (this one claims it no more). A foreign job's events are set aside
//! (kept, marked with the reason, the time and the answers). A job some key can read but that
//! has no row is an orphan: its events are kept waiting, counted, and logged; when its row
//! comes back the verdict is dropped and attach applies them. Any other answer (429, 5xx, a
//! timeout) is inconclusive, and the check is tried again later with the poll's backoff.
//!
//! An orphan's events are marked (`orphaned_at`) at the verdict, and so are those that come
//! after it once their grace has passed; without API keys nobody can be asked, so every event
//! past the grace with no row is marked, until an instance with keys sweeps: it clears those
//! marks (but an orphan's), so their job ids are asked about (`ask_again.rs`). Marked events
//! leave the index the catch-up scan and the checks walk, so neither costs more with the
//! orphans kept; they still attach when their job is registered, and after ORPHAN_RETENTION
//! retention moves them to the dead letters.
//!
//! [`CheckFold`] decides the verdict from the answers alone; [`InboxCheck`] claims due checks
//! under a lease, reads the fleet's keys, asks Sume, and writes the [`CheckDecision`]. It owns
//! `sume.inbox_checks` (retention removes settled ones) and the set-aside marks on
//! `sume.events`.

use std::collections::BTreeSet;
use std::ops::AddAssign;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::ask_again::AskAgain;
use super::schedule::{every, send_deadline, serve};
use crate::actors::supervision::Actor;
use crate::config::SweepConfig;
use crate::db::clock::Clock;
use crate::db::{ClaimedCheck, Concluded, DbError, Store};
use crate::decisions::backoff::jitter;
use crate::decisions::inbox_verdict::{CheckDecision, CheckFold};
use crate::metrics::Metrics;
use crate::process::log_budget::LogBudget;
use crate::process::traces;
use crate::sume_api::StatusReader;

/// Warnings that the fleet's keys cannot be read, at most one a minute.
static FLEET_KEYS_LOG: LogBudget = LogBudget::new(1, Duration::from_secs(60));

/// What one inbox-check pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxCheckStats {
    /// Orphan verdicts dropped because their job row exists again.
    pub orphans_resolved: u64,
    /// Checks claimed.
    pub checks_claimed: usize,
    /// Job ids every key the fleet holds answered 404 for.
    pub foreign: usize,
    /// Events set aside with them.
    pub events_set_aside: u64,
    /// Job ids a key can read that have no row.
    pub orphans: usize,
    /// Events marked as an orphan's (or, without keys, as nobody's to ask about): out of the
    /// catch-up scan's way until their job is registered or ORPHAN_RETENTION ends.
    pub events_orphaned: u64,
    /// Events marked while no key could ask whose marks were cleared, to be asked about.
    pub events_asked_again: u64,
    /// Checks to try again (a 429, 5xx or timeout among the answers).
    pub checks_inconclusive: usize,
    /// Checks every key here answered 404 for, left to the instances holding the fleet's
    /// keys that have not answered yet.
    pub left_to_other_keys: usize,
    /// Claims given back because the budget could not serve them before their lease ended.
    pub deferred: usize,
    /// Status calls sent.
    pub requests: usize,
}

impl AddAssign for InboxCheckStats {
    fn add_assign(&mut self, o: InboxCheckStats) {
        self.orphans_resolved += o.orphans_resolved;
        self.checks_claimed += o.checks_claimed;
        self.foreign += o.foreign;
        self.events_set_aside += o.events_set_aside;
        self.orphans += o.orphans;
        self.events_orphaned += o.events_orphaned;
        self.events_asked_again += o.events_asked_again;
        self.checks_inconclusive += o.checks_inconclusive;
        self.left_to_other_keys += o.left_to_other_keys;
        self.deferred += o.deferred;
        self.requests += o.requests;
    }
}

/// The inbox-check service.
pub struct InboxCheck {
    store: Store,
    metrics: Arc<Metrics>,
    reader: StatusReader,
    config: SweepConfig,
    clock: Clock,
    ask_again: AskAgain,
}

impl InboxCheck {
    /// `clock` is [`Clock::Database`] outside tests.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        reader: StatusReader,
        config: SweepConfig,
        clock: Clock,
    ) -> InboxCheck {
        InboxCheck {
            store,
            metrics,
            reader,
            config,
            clock,
            ask_again: AskAgain::default(),
        }
    }
}

impl Actor for InboxCheck {
    fn name(&self) -> String {
        "sweep-inbox-check".into()
    }

    /// Runs a pass every `SWEEP_INTERVAL` (jittered) until `shutdown`.
    async fn run(self, shutdown: CancellationToken) {
        if self.reader.keys().is_empty() {
            tracing::warn!("no SUME_API_KEYS: stale inbox rows are not checked; past INBOX_GRACE they are marked, and after ORPHAN_RETENTION they move to the dead letters");
        }
        every("inbox-check", self.config.interval, &shutdown, || {
            self.run_once(&shutdown)
        })
        .await;
    }
}

impl InboxCheck {
    /// One pass: marks the events nobody will ask about, clears the marks left while no key
    /// could ask (`ask_again.rs`), drops orphan verdicts whose row is back, opens checks for
    /// events past the grace, and serves due checks a batch at a time until none is left (or
    /// the budget ran out for this pass). Without API keys it only marks.
    pub async fn run_once(&self, shutdown: &CancellationToken) -> Result<InboxCheckStats, DbError> {
        let mut total = InboxCheckStats {
            events_orphaned: self.mark_orphans().await?,
            ..InboxCheckStats::default()
        };
        // No keys, or 404s are not verdicts right now: nothing to check.
        let prepared = self
            .reader
            .prepare_pass(self.config.request_timeout)
            .await?;
        if prepared != Some(true) {
            return Ok(total);
        }
        let batch = self.config.batch.max(1) as i64;
        total.events_asked_again = self.ask_again.pass(&self.store, batch).await?;
        loop {
            let stats = self.batch(shutdown).await?;
            let more = stats.checks_claimed == self.config.batch && stats.deferred == 0;
            total += stats;
            // Re-read per batch: a pass can outlast a key's check, or see the breaker open.
            if !more || shutdown.is_cancelled() || !self.reader.verdicts_allowed() {
                break;
            }
        }
        Ok(total)
    }

    /// Marks the events past the grace that nobody will ask about: an orphan's that came after
    /// its verdict, and without keys every one with no row. At most ten statements of a batch
    /// each; the rest waits for the next pass.
    async fn mark_orphans(&self) -> Result<u64, DbError> {
        // The fleet's keys are read only by an instance without keys of its own: one with keys
        // never needs sume.instances here (a role granted its rights before migration 9).
        let no_keys = self.reader.keys().is_empty() && !self.store.instances_keyed_live().await?;
        let grace = self.config.inbox_grace.as_secs_f64();
        let batch = self.config.batch.max(1) as i64;
        let mut marked = 0;
        for _ in 0..10 {
            let n = self
                .store
                .events_orphan_late(grace, no_keys, batch, &self.clock)
                .await?;
            marked += n;
            if n < batch as u64 {
                break;
            }
        }
        if marked > 0 {
            tracing::info!(
                events = marked,
                no_keys,
                "events with no job row past INBOX_GRACE marked as nobody's to ask about; they attach if their job is registered, and move to the dead letters after ORPHAN_RETENTION"
            );
        }
        Ok(marked)
    }

    async fn batch(&self, shutdown: &CancellationToken) -> Result<InboxCheckStats, DbError> {
        let batch = self.config.batch as i64;
        let resolved = self.store.inbox_checks_resolve_orphans().await?;
        if resolved > 0 {
            tracing::info!(
                jobs = resolved,
                "orphans resolved: their job rows exist again"
            );
        }
        let grace = self.config.inbox_grace.as_secs_f64();
        let late = self
            .store
            .events_set_aside_late_foreign(grace, &self.clock)
            .await?;
        if late > 0 {
            self.metrics.events_set_aside.inc_by(late);
            tracing::info!(
                events = late,
                "events of job ids judged foreign before they arrived: set aside"
            );
        }
        self.store
            .inbox_checks_enqueue(grace, batch, &self.clock)
            .await?;
        let own_keys = self.reader.key_names();
        let fleet_keys = self.fleet_keys(&own_keys).await?;
        let claimed_at = Instant::now();
        let claims = self
            .store
            .inbox_checks_claim(
                self.reader.owner(),
                batch,
                self.config.lease.as_secs_f64(),
                &own_keys,
                &fleet_keys.iter().cloned().collect::<Vec<_>>(),
                &self.clock,
            )
            .await?;
        let mut stats = InboxCheckStats {
            orphans_resolved: resolved,
            events_set_aside: late,
            checks_claimed: claims.len(),
            ..InboxCheckStats::default()
        };
        let deadline = send_deadline(claimed_at, self.config.lease, self.config.request_timeout);
        let (served, unserved) = serve(claims, self.config.concurrency, |c| {
            let span = traces::span!(
                "inbox check",
                otel.name = "inbox check",
                sume.job_id = c.job_id.as_str()
            );
            self.check(c, &fleet_keys, deadline, shutdown)
                .instrument(span)
        })
        .await?;
        stats += served;
        self.store
            .inbox_checks_release(&unserved, self.reader.owner())
            .await?;
        Ok(stats)
    }

    /// The names of the keys whose 404 a foreign verdict needs: this instance's, and those the
    /// instances heard from in the last five minutes hold. A role without the rights on
    /// `sume.instances` (granted before migration 9) cannot read them, and no heartbeat is
    /// written either, so the fleet's keys are unknown: this instance's alone count, as before
    /// the fleet's keys were read, with a warning.
    async fn fleet_keys(&self, own_keys: &[String]) -> Result<BTreeSet<String>, DbError> {
        let mut keys: BTreeSet<String> = own_keys.iter().cloned().collect();
        match self.store.instances_recent_key_names().await {
            Ok(names) => keys.extend(names),
            Err(e) if e.is_denied() => {
                if let Some(left_out) = FLEET_KEYS_LOG.allow() {
                    tracing::warn!(error = %e, left_out, "the fleet's API keys cannot be read: a job is judged foreign on this instance's keys alone; in a fleet whose instances hold different keys, give the grants");
                }
            }
            Err(e) => return Err(e),
        }
        Ok(keys)
    }

    /// Asks this instance's keys about one job id, but those that answered 404 before: a key
    /// reads only its member's jobs, and a job stays its member's.
    async fn ask(
        &self,
        claim: &ClaimedCheck,
        deadline: Instant,
        shutdown: &CancellationToken,
        stats: &mut InboxCheckStats,
    ) -> Result<CheckFold, DbError> {
        let mut fold = CheckFold::after(&claim.answers);
        let keys = self.reader.keys().iter();
        let to_ask: Vec<_> = keys.filter(|k| !fold.answered_404(&k.name)).collect();
        for key in to_ask {
            if shutdown.is_cancelled() {
                fold.unasked(&key.name);
                break;
            }
            let Some((answer, _)) = self.reader.call(key, &claim.job_id, deadline).await? else {
                fold.unasked(&key.name);
                break;
            };
            stats.requests += 1;
            if !fold.read(&key.name, answer) {
                break;
            }
        }
        Ok(fold)
    }

    /// Asks this instance's keys about one job id and writes the decision, with every key the
    /// fleet holds (`fleet_keys`) needed for a foreign verdict. Answers the stats, and the id
    /// when it must be released unserved.
    async fn check(
        &self,
        claim: ClaimedCheck,
        fleet_keys: &BTreeSet<String>,
        deadline: Instant,
        shutdown: &CancellationToken,
    ) -> Result<(InboxCheckStats, Option<String>), DbError> {
        let mut stats = InboxCheckStats::default();
        let fold = self.ask(&claim, deadline, shutdown, &mut stats).await?;
        let decision = fold.decide(
            fleet_keys,
            claim.attempts,
            self.config.poll_after,
            self.config.poll_max_interval,
        );
        let owner = self.reader.owner();
        let (verdict, answers) = match decision {
            CheckDecision::Release => {
                stats.deferred += 1;
                return Ok((stats, Some(claim.job_id)));
            }
            CheckDecision::Retry { answers, next_in } => {
                stats.checks_inconclusive += 1;
                self.look_again(&claim.job_id, &answers, next_in).await?;
                return Ok((stats, None));
            }
            CheckDecision::LeftToOthers { answers, missing } => {
                stats.left_to_other_keys += 1;
                // Due at once for the instances holding the keys still to answer; this one,
                // with no key left to ask, claims it no more.
                self.look_again(&claim.job_id, &answers, Duration::ZERO)
                    .await?;
                let (job_id, missing) = (claim.job_id.as_str(), missing.join(","));
                tracing::debug!(job_id, %answers, missing, "every key here answered 404: left to the instances holding the others");
                return Ok((stats, None));
            }
            CheckDecision::Conclude { verdict, answers } => (verdict, answers),
        };
        let job_id = claim.job_id.as_str();
        match self
            .store
            .conclude_inbox_check(job_id, owner, verdict, &answers, &self.clock)
            .await?
        {
            Concluded::SetAside(n) => {
                self.metrics.events_set_aside.inc_by(n);
                stats.foreign += 1;
                stats.events_set_aside += n;
                tracing::info!(job_id, events = n, %answers, "not our job: events set aside");
            }
            Concluded::Orphan(n) => {
                self.metrics.orphans_found.inc();
                stats.orphans += 1;
                stats.events_orphaned += n;
                tracing::warn!(job_id, events = n, %answers, "orphan: Sume knows this job but it has no row; its events are kept until ORPHAN_RETENTION");
            }
            Concluded::RowAppeared | Concluded::LeaseLost => {}
        }
        Ok((stats, None))
    }

    /// Records `answers` (every key's so far) on the check and gives it back, due again after
    /// `next_in` (jittered).
    async fn look_again(
        &self,
        job_id: &str,
        answers: &serde_json::Value,
        next_in: Duration,
    ) -> Result<(), DbError> {
        let next = jitter(next_in).as_secs_f64();
        let owner = self.reader.owner();
        self.store
            .inbox_checks_retry(job_id, owner, answers, next, &self.clock)
            .await
    }
}
