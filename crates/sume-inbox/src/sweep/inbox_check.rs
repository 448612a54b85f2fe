//! The inbox-check service: asks Sume about job ids whose events wait with no job row.
//!
//! Events that waited longer than `INBOX_GRACE` with no job row get a check
//! (`sume.inbox_checks`), looked up at Sume with every configured key. A key reads only its own
//! member's jobs, so a 404 from every key means the job is not ours: its events are set aside
//! (kept, marked with the reason, the time and the answers). A job some key can read but that
//! has no row is an orphan: its events are kept waiting, counted, and logged; when its row
//! comes back the verdict is dropped and attach applies them. Any other answer (429, 5xx, a
//! timeout) is inconclusive, and the check is tried again later with the poll's backoff.
//!
//! [`CheckFold`] decides the verdict from the answers alone; [`InboxCheck`] claims due checks
//! under a lease, asks Sume, and writes the [`CheckDecision`]. It owns `sume.inbox_checks`
//! (retention removes settled ones) and the set-aside marks on `sume.events`.

use std::collections::BTreeMap;
use std::ops::AddAssign;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{backoff_base, every, jitter, send_deadline, serve, Answer, Reply, StatusReader};
use crate::clock::Clock;
use crate::config::SweepConfig;
use crate::db::{ClaimedCheck, Concluded, DbError, Store, Verdict};
use crate::health::Health;
use crate::metrics::Metrics;

/// What one inbox-check pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxCheckStats {
    /// Orphan verdicts dropped because their job row exists again.
    pub orphans_resolved: u64,
    /// Checks claimed.
    pub checks_claimed: usize,
    /// Job ids every key answered 404 for.
    pub foreign: usize,
    /// Events set aside with them.
    pub events_set_aside: u64,
    /// Job ids a key can read that have no row.
    pub orphans: usize,
    /// Checks to try again (a 429, 5xx or timeout among the answers).
    pub checks_inconclusive: usize,
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
        self.checks_inconclusive += o.checks_inconclusive;
        self.deferred += o.deferred;
        self.requests += o.requests;
    }
}

/// What a check concludes.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckDecision {
    /// A verdict, with each key's answer (`{"main": "404"}`).
    Conclude {
        /// Foreign (404 everywhere) or orphan (a key can read it).
        verdict: Verdict,
        /// Each key's answer.
        answers: Value,
    },
    /// Inconclusive: record the answers, look again after the backoff step (before jitter).
    Retry {
        /// Each key's answer so far.
        answers: Value,
        /// When to look again, before jitter.
        next_in: Duration,
    },
    /// A key could not be asked (no budget, shutdown): give the claim back untouched.
    Release,
}

/// The answers about one job id, key by key, folded into a [`CheckDecision`].
#[derive(Debug, Clone, Default)]
pub struct CheckFold {
    answers: BTreeMap<String, Value>,
    found: bool,
    inconclusive: bool,
    unasked: bool,
}

impl CheckFold {
    /// No answer yet.
    pub fn new() -> CheckFold {
        CheckFold::default()
    }

    /// Adds the answer of key `key_name`; false when no further key should be asked.
    pub fn read(&mut self, key_name: &str, answer: Answer) -> bool {
        self.answers
            .insert(key_name.to_owned(), Value::String(answer.text));
        match answer.reply {
            Reply::Found { .. } => {
                self.found = true;
                false
            }
            Reply::NotFound => true,
            Reply::RateLimited { .. } | Reply::Refused | Reply::Failed => {
                self.inconclusive = true;
                true
            }
        }
    }

    /// A key was left unasked (no budget before the lease ends, or shutdown).
    pub fn unasked(&mut self) {
        self.unasked = true;
    }

    /// The decision for a check tried `attempts` times before, with the poll's timings.
    pub fn decide(self, attempts: i32, first: Duration, cap: Duration) -> CheckDecision {
        if self.unasked {
            return CheckDecision::Release;
        }
        let answers = Value::Object(self.answers.into_iter().collect());
        match (self.found, self.inconclusive) {
            (true, _) => CheckDecision::Conclude {
                verdict: Verdict::Orphan,
                answers,
            },
            (false, false) => CheckDecision::Conclude {
                verdict: Verdict::Foreign,
                answers,
            },
            (false, true) => CheckDecision::Retry {
                answers,
                next_in: backoff_base(attempts, first, cap),
            },
        }
    }
}

/// The inbox-check service.
pub struct InboxCheck {
    store: Store,
    metrics: Arc<Metrics>,
    reader: StatusReader,
    config: SweepConfig,
    clock: Clock,
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
        }
    }

    /// Runs a pass every `SWEEP_INTERVAL` (jittered) until shutdown.
    pub async fn run(self, shutdown: CancellationToken, health: Health) {
        let guard = health.task("sweep-inbox-check");
        if self.reader.keys().is_empty() {
            tracing::warn!("no SUME_API_KEYS: stale inbox rows are not checked");
        }
        every("inbox-check", self.config.interval, &shutdown, || {
            self.run_once(&shutdown)
        })
        .await;
        guard.finished();
    }

    /// One pass: drops orphan verdicts whose row is back, opens checks for events past the
    /// grace, and serves due checks a batch at a time until none is left (or the budget ran
    /// out for this pass). Does nothing without API keys.
    pub async fn run_once(&self, shutdown: &CancellationToken) -> Result<InboxCheckStats, DbError> {
        let mut total = InboxCheckStats::default();
        // No keys, or 404s are not verdicts right now: nothing to check.
        let prepared = self
            .reader
            .prepare_pass(self.config.request_timeout)
            .await?;
        if prepared != Some(true) {
            return Ok(total);
        }
        loop {
            let stats = self.batch(shutdown).await?;
            let more = stats.checks_claimed == self.config.batch && stats.deferred == 0;
            total += stats;
            if !more || shutdown.is_cancelled() {
                break;
            }
        }
        Ok(total)
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
        let claimed_at = Instant::now();
        let claims = self
            .store
            .inbox_checks_claim(
                self.reader.owner(),
                batch,
                self.config.lease.as_secs_f64(),
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
            self.check(c, deadline, shutdown)
        })
        .await?;
        stats += served;
        self.store
            .inbox_checks_release(&unserved, self.reader.owner())
            .await?;
        Ok(stats)
    }

    /// Asks every key about one job id and writes the decision. Answers the stats, and the id
    /// when it must be released unserved.
    async fn check(
        &self,
        claim: ClaimedCheck,
        deadline: Instant,
        shutdown: &CancellationToken,
    ) -> Result<(InboxCheckStats, Option<String>), DbError> {
        let mut stats = InboxCheckStats::default();
        let mut fold = CheckFold::new();
        for key in self.reader.keys() {
            if shutdown.is_cancelled() {
                fold.unasked();
                break;
            }
            let Some((answer, _)) = self.reader.call(key, &claim.job_id, deadline).await? else {
                fold.unasked();
                break;
            };
            stats.requests += 1;
            if !fold.read(&key.name, answer) {
                break;
            }
        }
        let decision = fold.decide(
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
                let next = jitter(next_in).as_secs_f64();
                self.store
                    .inbox_checks_retry(&claim.job_id, owner, &answers, next, &self.clock)
                    .await?;
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
            Concluded::Orphan => {
                self.metrics.orphans_found.inc();
                stats.orphans += 1;
                tracing::warn!(job_id, %answers, "orphan: Sume knows this job but it has no row; its events are kept");
            }
            Concluded::RowAppeared | Concluded::LeaseLost => {}
        }
        Ok((stats, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FIRST: Duration = Duration::from_secs(120);
    const CAP: Duration = Duration::from_secs(1800);

    fn answer(text: &str, reply: Reply) -> Answer {
        Answer {
            text: text.into(),
            reply,
        }
    }

    fn not_found() -> Answer {
        answer("404", Reply::NotFound)
    }

    #[test]
    fn every_key_404_is_foreign() {
        let mut fold = CheckFold::new();
        assert!(fold.read("a", not_found()));
        assert!(fold.read("b", not_found()));
        assert_eq!(
            fold.decide(0, FIRST, CAP),
            CheckDecision::Conclude {
                verdict: Verdict::Foreign,
                answers: json!({"a": "404", "b": "404"}),
            }
        );
    }

    #[test]
    fn a_key_that_reads_it_makes_an_orphan_and_stops_the_asking() {
        let mut fold = CheckFold::new();
        assert!(fold.read("a", answer("503", Reply::Failed)));
        let found = Reply::Found {
            status: "completed".into(),
            result: None,
        };
        assert!(!fold.read("b", answer("200 completed", found)));
        assert_eq!(
            fold.decide(0, FIRST, CAP),
            CheckDecision::Conclude {
                verdict: Verdict::Orphan,
                answers: json!({"a": "503", "b": "200 completed"}),
            }
        );
    }

    #[test]
    fn a_404_beside_a_429_or_timeout_is_inconclusive_and_backs_off() {
        let mut fold = CheckFold::new();
        fold.read("a", not_found());
        let limited = Reply::RateLimited {
            retry_in: Duration::from_secs(5),
        };
        assert!(fold.read("b", answer("429", limited)));
        assert_eq!(
            fold.decide(2, FIRST, CAP),
            CheckDecision::Retry {
                answers: json!({"a": "404", "b": "429"}),
                next_in: Duration::from_secs(480),
            }
        );
        let mut fold = CheckFold::new();
        fold.read("a", answer("timeout", Reply::Failed));
        assert!(matches!(
            fold.decide(20, FIRST, CAP),
            CheckDecision::Retry { next_in, .. } if next_in == CAP
        ));
    }

    #[test]
    fn a_key_left_unasked_releases_the_claim() {
        let mut fold = CheckFold::new();
        fold.read("a", not_found());
        fold.unasked();
        assert_eq!(fold.decide(0, FIRST, CAP), CheckDecision::Release);
    }
}
