//! The sweep actor: settles what webhooks alone leave open.
//!
//! - **Inbox sweep.** Events that waited longer than `INBOX_GRACE` with no job row are looked
//!   up at Sume with every configured key. A key reads only its own member's jobs, so a 404
//!   from every key means the job is not ours: its events are set aside (kept, marked with the
//!   reason, the time and the answers). A job some key can read but that has no row is an
//!   orphan: its events are kept waiting, counted, and logged.
//! - **Open-job sweep.** Open jobs are polled `POLL_AFTER` after registration, then at growing,
//!   jittered intervals (capped at `POLL_MAX_INTERVAL`). A terminal status closes the job
//!   through the same fold as a webhook (`closed_by = poll`); whichever comes first wins. A job
//!   still open after `POLL_GIVE_UP` is closed as `expired` with the reason.
//!
//! Work is claimed in bounded batches (`for update skip locked`) under a lease, so instances
//! share it without a leader and a crashed instance's claims return when the lease expires.
//! Every request first takes a token from the fleet-wide [`Budget`]; no request is sent unless
//! it can finish before its claim expires.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::Utc;
use futures_util::StreamExt;
use rand::Rng;
use serde_json::Value;
use sume_wire::{ClientError, StatusClient, StatusOutcome, StatusReply};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::budget::{Budget, BudgetError};
use crate::close::Outcome;
use crate::config::{ApiKey, SweepConfig};
use crate::db::{ClaimedCheck, ClaimedJob, Concluded, DbError, Removed, Store, Verdict};
use crate::health::Health;
use crate::metrics::Metrics;
use std::sync::Arc;

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepStats {
    pub checks_claimed: usize,
    pub foreign: usize,
    pub events_set_aside: u64,
    pub orphans: usize,
    pub checks_inconclusive: usize,
    pub jobs_claimed: usize,
    pub closed_by_poll: usize,
    pub still_open: usize,
    pub given_up: usize,
    pub disagreements: usize,
    /// Claims given back because the budget could not serve them before their lease ended.
    pub deferred: usize,
    pub requests: usize,
    /// Rows removed by retention.
    pub removed: Removed,
}

impl SweepStats {
    fn add(&mut self, o: SweepStats) {
        self.checks_claimed += o.checks_claimed;
        self.foreign += o.foreign;
        self.events_set_aside += o.events_set_aside;
        self.orphans += o.orphans;
        self.checks_inconclusive += o.checks_inconclusive;
        self.jobs_claimed += o.jobs_claimed;
        self.closed_by_poll += o.closed_by_poll;
        self.still_open += o.still_open;
        self.given_up += o.given_up;
        self.disagreements += o.disagreements;
        self.deferred += o.deferred;
        self.requests += o.requests;
        self.removed.events_applied += o.removed.events_applied;
        self.removed.events_set_aside += o.removed.events_set_aside;
        self.removed.dead_letters += o.removed.dead_letters;
        self.removed.inbox_checks += o.removed.inbox_checks;
    }
}

/// Retention statements per kind and pass: a backlog drains over several passes rather than
/// in one long burst.
const RETENTION_BATCHES_PER_PASS: usize = 10;

pub struct Sweep {
    store: Store,
    metrics: Arc<Metrics>,
    client: StatusClient,
    keys: Vec<ApiKey>,
    budget: Budget,
    config: SweepConfig,
    /// This instance's name on its leases.
    owner: String,
}

/// One call's answer as recorded: `"200 running"`, `"404"`, `"429"`, `"timeout"`.
fn describe(reply: &Result<StatusReply, ClientError>) -> String {
    match reply {
        Ok(r) => match &r.outcome {
            StatusOutcome::Found(job) => format!("{} {}", r.http_status, job.status),
            _ => r.http_status.to_string(),
        },
        Err(ClientError::Timeout) => "timeout".to_owned(),
        Err(e) => format!("error: {e}"),
    }
}

impl Sweep {
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        client: StatusClient,
        keys: Vec<ApiKey>,
        config: SweepConfig,
    ) -> Sweep {
        let budget = Budget::new(store.clone(), config.read_rate);
        let owner = format!(
            "{}-{}-{:04x}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "host".to_owned()),
            std::process::id(),
            rand::thread_rng().gen::<u16>()
        );
        Sweep {
            store,
            metrics,
            client,
            keys,
            budget,
            config,
            owner,
        }
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Runs a pass every `SWEEP_INTERVAL` (jittered, so instances drift apart) until shutdown.
    pub async fn run(self, shutdown: CancellationToken, health: Health) {
        let guard = health.task("sweep");
        if self.keys.is_empty() {
            tracing::warn!(
                "no SUME_API_KEYS: open jobs are not polled and stale inbox rows are not checked"
            );
        }
        while !shutdown.is_cancelled() {
            match self.run_once(&shutdown).await {
                Ok(stats) if stats != SweepStats::default() => tracing::info!(?stats, "sweep pass"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "sweep pass failed; will retry"),
            }
            let pause = jitter(self.config.interval);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(pause) => {}
            }
        }
        guard.finished();
    }

    /// One pass: the inbox sweep, then the open-job sweep, each until nothing due is left
    /// (or the budget ran out for this pass); then retention.
    pub async fn run_once(&self, shutdown: &CancellationToken) -> Result<SweepStats, DbError> {
        let mut total = SweepStats::default();
        if !self.keys.is_empty() {
            total.add(self.sume_pass(shutdown).await?);
        }
        total.removed = self
            .store
            .retention_pass(
                self.config.retention.as_secs_f64(),
                self.config.retention_batch as i64,
                RETENTION_BATCHES_PER_PASS,
            )
            .await?;
        self.metrics.retention_removed.inc_by(total.removed.total());
        Ok(total)
    }

    /// The part of a pass that asks Sume.
    async fn sume_pass(&self, shutdown: &CancellationToken) -> Result<SweepStats, DbError> {
        let mut total = SweepStats::default();
        let names: Vec<String> = self.keys.iter().map(|k| k.name.clone()).collect();
        self.budget.ensure(&names).await?;
        loop {
            let stats = self.inbox_batch(shutdown).await?;
            let more = stats.checks_claimed == self.config.batch && stats.deferred == 0;
            total.add(stats);
            if !more || shutdown.is_cancelled() {
                break;
            }
        }
        loop {
            let stats = self.jobs_batch(shutdown).await?;
            let more = stats.jobs_claimed == self.config.batch && stats.deferred == 0;
            total.add(stats);
            if !more || shutdown.is_cancelled() {
                break;
            }
        }
        Ok(total)
    }

    fn lease_secs(&self) -> f64 {
        self.config.lease.as_secs_f64()
    }

    /// The last moment a request may start and still finish within a claim made at `claimed`.
    fn send_deadline(&self, claimed: Instant) -> Instant {
        claimed
            + self
                .config
                .lease
                .saturating_sub(self.config.request_timeout * 2)
    }

    /// One status call under the budget. `None`: no budget before the deadline.
    async fn call(
        &self,
        key: &ApiKey,
        job_id: &str,
        deadline: Instant,
    ) -> Result<Option<Result<StatusReply, ClientError>>, DbError> {
        match self.budget.acquire(&key.name, deadline).await {
            Ok(waited) => self.metrics.budget_waited(waited),
            Err(BudgetError::Deadline) => return Ok(None),
            Err(BudgetError::Db(e)) => return Err(e),
        }
        let reply = self.client.job_status(&key.key, job_id).await;
        let code = match &reply {
            Ok(r) => r.http_status.to_string(),
            Err(ClientError::Timeout) => "timeout".to_owned(),
            Err(_) => "error".to_owned(),
        };
        self.metrics.sume_request(&key.name, &code);
        if let Ok(r) = &reply {
            if r.http_status == 429 {
                self.metrics.sume_rate_limited.inc();
            }
            self.budget
                .observe(&key.name, r.http_status, &r.rate)
                .await?;
            if r.outcome == StatusOutcome::Unauthorized {
                tracing::error!(key = %key.name, "Sume refused API key (401): check SUME_API_KEYS");
            }
        }
        Ok(Some(reply))
    }

    /// Serves claims, `SWEEP_CONCURRENCY` at a time; answers the merged stats and the claims
    /// to give back unserved.
    async fn serve<C, F, Fut>(
        &self,
        claims: Vec<C>,
        serve_one: F,
    ) -> Result<(SweepStats, Vec<String>), DbError>
    where
        F: FnMut(C) -> Fut,
        Fut: std::future::Future<Output = Result<(SweepStats, Option<String>), DbError>>,
    {
        let results: Vec<_> = futures_util::stream::iter(claims)
            .map(serve_one)
            .buffer_unordered(self.config.concurrency)
            .collect()
            .await;
        let mut stats = SweepStats::default();
        let mut unserved = Vec::new();
        for r in results {
            let (s, released) = r?;
            stats.add(s);
            unserved.extend(released);
        }
        Ok((stats, unserved))
    }

    async fn inbox_batch(&self, shutdown: &CancellationToken) -> Result<SweepStats, DbError> {
        let grace = self.config.inbox_grace.as_secs_f64();
        let batch = self.config.batch as i64;
        let resolved = self.store.inbox_checks_resolve_orphans().await?;
        if resolved > 0 {
            tracing::info!(
                jobs = resolved,
                "orphans resolved: their job rows exist again"
            );
        }
        self.store.inbox_checks_enqueue(grace, batch).await?;
        let claimed_at = Instant::now();
        let claims = self
            .store
            .inbox_checks_claim(&self.owner, batch, self.lease_secs())
            .await?;
        let mut stats = SweepStats {
            checks_claimed: claims.len(),
            ..SweepStats::default()
        };
        let deadline = self.send_deadline(claimed_at);
        let (served, unserved) = self
            .serve(claims, |c| self.check(c, deadline, shutdown))
            .await?;
        stats.add(served);
        self.store
            .inbox_checks_release(&unserved, &self.owner)
            .await?;
        Ok(stats)
    }

    /// Asks every key about one job id. Answers the stats, and the id when it must be released
    /// unserved.
    async fn check(
        &self,
        claim: ClaimedCheck,
        deadline: Instant,
        shutdown: &CancellationToken,
    ) -> Result<(SweepStats, Option<String>), DbError> {
        let mut stats = SweepStats::default();
        let mut answers = BTreeMap::new();
        let mut found = false;
        let mut inconclusive = false;
        for key in &self.keys {
            if shutdown.is_cancelled() {
                stats.deferred += 1;
                return Ok((stats, Some(claim.job_id)));
            }
            let Some(reply) = self.call(key, &claim.job_id, deadline).await? else {
                stats.deferred += 1;
                return Ok((stats, Some(claim.job_id)));
            };
            stats.requests += 1;
            answers.insert(key.name.clone(), Value::String(describe(&reply)));
            match reply.map(|r| r.outcome) {
                Ok(StatusOutcome::Found(_)) => {
                    found = true;
                    break;
                }
                Ok(StatusOutcome::NotFound) => {}
                _ => inconclusive = true,
            }
        }
        let answers = Value::Object(answers.into_iter().collect());
        let verdict = match (found, inconclusive) {
            (true, _) => Verdict::Orphan,
            (false, false) => Verdict::Foreign,
            (false, true) => {
                stats.checks_inconclusive += 1;
                let next = backoff(
                    claim.attempts,
                    self.config.poll_after,
                    self.config.poll_max_interval,
                );
                self.store
                    .inbox_checks_retry(&claim.job_id, &self.owner, &answers, next.as_secs_f64())
                    .await?;
                return Ok((stats, None));
            }
        };
        match self
            .store
            .conclude_inbox_check(&claim.job_id, &self.owner, verdict, &answers)
            .await?
        {
            Concluded::SetAside(n) => {
                self.metrics.events_set_aside.inc_by(n);
                stats.foreign += 1;
                stats.events_set_aside += n;
                tracing::info!(job_id = %claim.job_id, events = n, %answers, "not our job: events set aside");
            }
            Concluded::Orphan => {
                self.metrics.orphans_found.inc();
                stats.orphans += 1;
                tracing::warn!(job_id = %claim.job_id, %answers, "orphan: Sume knows this job but it has no row; its events are kept");
            }
            Concluded::RowAppeared | Concluded::LeaseLost => {}
        }
        Ok((stats, None))
    }

    async fn jobs_batch(&self, shutdown: &CancellationToken) -> Result<SweepStats, DbError> {
        let claimed_at = Instant::now();
        let claims = self
            .store
            .jobs_claim_due(
                &self.owner,
                self.config.batch as i64,
                self.lease_secs(),
                self.config.poll_after.as_secs_f64(),
            )
            .await?;
        let mut stats = SweepStats {
            jobs_claimed: claims.len(),
            ..SweepStats::default()
        };
        let deadline = self.send_deadline(claimed_at);
        let (served, unserved) = self
            .serve(claims, |c| self.poll(c, deadline, shutdown))
            .await?;
        stats.add(served);
        self.store.jobs_release(&unserved, &self.owner).await?;
        Ok(stats)
    }

    /// The keys to ask about a job: its own, or every key when it names none we know.
    fn keys_for(&self, job: &ClaimedJob) -> Vec<&ApiKey> {
        match job
            .api_key
            .as_deref()
            .and_then(|name| self.keys.iter().find(|k| k.name == name))
        {
            Some(key) => vec![key],
            None => self.keys.iter().collect(),
        }
    }

    async fn poll(
        &self,
        job: ClaimedJob,
        deadline: Instant,
        shutdown: &CancellationToken,
    ) -> Result<(SweepStats, Option<String>), DbError> {
        let mut stats = SweepStats::default();
        let age = (Utc::now() - job.created_at).to_std().unwrap_or_default();
        let past_give_up = age >= self.config.poll_give_up;
        let mut last_answer = None;
        let mut last_status = None;
        let mut retry_in = None;
        for key in self.keys_for(&job) {
            if shutdown.is_cancelled() {
                break;
            }
            let Some(reply) = self.call(key, &job.job_id, deadline).await? else {
                break;
            };
            stats.requests += 1;
            let answer = describe(&reply);
            match reply {
                Ok(StatusReply {
                    outcome: StatusOutcome::Found(object),
                    ..
                }) => {
                    if sume_wire::Status::parse(&object.status)
                        .terminal()
                        .is_some()
                    {
                        let outcome = self
                            .store
                            .close_by_poll(
                                &job.job_id,
                                &self.owner,
                                &object.status,
                                object.outcome_value(),
                                &answer,
                            )
                            .await?;
                        match outcome {
                            Outcome::Closed => {
                                self.metrics.closed("poll", 1);
                                stats.closed_by_poll += 1
                            }
                            Outcome::Disagreement => {
                                self.metrics.disagreements_seen.inc();
                                stats.disagreements += 1
                            }
                            _ => {}
                        }
                        return Ok((stats, None));
                    }
                    if !past_give_up {
                        stats.still_open += 1;
                        let next = backoff(
                            job.poll_attempts,
                            self.config.poll_after,
                            self.config.poll_max_interval,
                        );
                        self.store
                            .jobs_poll_done(
                                &job.job_id,
                                &self.owner,
                                &answer,
                                true,
                                next.as_secs_f64(),
                                Some(&object.status),
                            )
                            .await?;
                        return Ok((stats, None));
                    }
                    last_status = Some(object.status);
                    last_answer = Some(answer);
                    break;
                }
                Ok(StatusReply {
                    outcome: StatusOutcome::RateLimited,
                    rate,
                    ..
                }) => {
                    retry_in = Some(
                        rate.retry_after
                            .or(rate.reset)
                            .unwrap_or(Duration::from_secs(60)),
                    );
                    last_answer = Some(answer);
                    break;
                }
                _ => last_answer = Some(answer),
            }
        }
        let Some(answer) = last_answer else {
            // Not one request could be sent: give the claim back untouched.
            if past_give_up && !shutdown.is_cancelled() {
                return self
                    .give_up(job, "no answer from Sume", None)
                    .await
                    .map(|s| (s, None));
            }
            stats.deferred += 1;
            return Ok((stats, Some(job.job_id)));
        };
        if past_give_up {
            return self
                .give_up(job, &answer, last_status.as_deref())
                .await
                .map(|s| (s, None));
        }
        stats.still_open += 1;
        let (next, counts) = match retry_in {
            Some(after) => (after, false),
            None => (
                backoff(
                    job.poll_attempts,
                    self.config.poll_after,
                    self.config.poll_max_interval,
                ),
                true,
            ),
        };
        self.store
            .jobs_poll_done(
                &job.job_id,
                &self.owner,
                &answer,
                counts,
                next.as_secs_f64(),
                None,
            )
            .await?;
        Ok((stats, None))
    }

    async fn give_up(
        &self,
        job: ClaimedJob,
        last_answer: &str,
        status: Option<&str>,
    ) -> Result<SweepStats, DbError> {
        let reason = format!(
            "no terminal status within POLL_GIVE_UP ({}); last answer: {last_answer}",
            humantime::format_duration(self.config.poll_give_up)
        );
        let mut stats = SweepStats::default();
        if self
            .store
            .jobs_give_up(&job.job_id, &self.owner, &reason, status)
            .await?
        {
            stats.given_up += 1;
            self.metrics.closed("give_up", 1);
            tracing::warn!(job_id = %job.job_id, %reason, "gave up on job: closed as expired");
        }
        Ok(stats)
    }
}

/// The wait before poll number `attempts + 1`: `first * 2^attempts`, capped, jittered ±20%.
pub fn backoff(attempts: i32, first: Duration, cap: Duration) -> Duration {
    let exp = attempts.clamp(0, 30) as u32;
    let base = first.saturating_mul(2u32.saturating_pow(exp)).min(cap);
    jitter(base)
}

fn jitter(d: Duration) -> Duration {
    d.mul_f64(rand::thread_rng().gen_range(0.8..1.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_jitters() {
        let first = Duration::from_secs(120);
        let cap = Duration::from_secs(1800);
        for _ in 0..100 {
            let b0 = backoff(0, first, cap);
            assert!(b0 >= Duration::from_secs(96) && b0 <= Duration::from_secs(144));
            let b2 = backoff(2, first, cap);
            assert!(b2 >= Duration::from_secs(384) && b2 <= Duration::from_secs(576));
            let b9 = backoff(9, first, cap);
            assert!(b9 >= Duration::from_secs(1440) && b9 <= Duration::from_secs(2160));
            assert!(backoff(i32::MAX, first, cap) <= Duration::from_secs(2160));
        }
    }
}
