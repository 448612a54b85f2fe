//! The sweep: three services that settle what webhooks alone leave open, each a task of its own.
//!
//! - [`InboxCheck`] (`inbox_check.rs`): events that waited longer than `INBOX_GRACE` with no
//!   job row are looked up at Sume with every key; 404 from every key sets them aside as not
//!   ours, a key that can read the job makes it an orphan (kept, counted, logged).
//! - [`Poll`] (`poll.rs`, its decision in `poll_decision.rs`): open jobs are polled
//!   `POLL_AFTER` after registration, then at growing, jittered intervals, and given up as
//!   `expired` after `POLL_GIVE_UP`.
//! - [`Retention`] (`retention.rs`): removes what is old and settled.
//!
//! Each has a `run` that only schedules, logs and waits, and a `run_once` that does one pass
//! and answers what it did; tests call `run_once` with a [`Clock`] they move.
//!
//! This file holds what the two services that ask Sume share: the [`StatusReader`] (one status
//! call under the fleet-wide [`Budget`], this instance's name on its leases), `serve` (claims
//! served a few at a time), the [`Answer`] a call is read as, and [`backoff`]. Work is claimed
//! in bounded batches (`for update skip locked`) under a lease, so instances share it without a
//! leader and a crashed instance's claims return when the lease expires; no request is sent
//! unless it can finish before its claim expires.

mod answer;
mod api_check;
mod inbox_check;
mod poll;
mod poll_decision;
mod retention;

pub use answer::{Answer, Reply};
pub use api_check::{ApiCheck, Hold};
pub use inbox_check::{CheckDecision, CheckFold, InboxCheck, InboxCheckStats};
pub use poll::{Poll, PollStats};
pub use poll_decision::{NextPoll, PollDecision, PollFold, PollRules};
pub use retention::Retention;

pub use crate::clock::Clock;

use std::future::Future;
use std::ops::AddAssign;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use rand::Rng;
use sume_wire::{ClientError, StatusClient};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::budget::{Budget, BudgetError};
use crate::config::{ApiKey, Rate};
use crate::db::{DbError, Store};
use crate::metrics::Metrics;

/// Verdict holds are logged at most this often.
static HOLDS_LOG: crate::ratelog::LogBudget =
    crate::ratelog::LogBudget::new(1, Duration::from_secs(60));

/// This instance's way to Sume's status endpoint: the keys, the client, the fleet-wide budget,
/// and the name its leases carry. Cloned into the services that ask Sume, so they share one
/// budget (a `Retry-After` seen by one pauses the other at once) and one lease owner.
#[derive(Clone)]
pub struct StatusReader {
    metrics: Arc<Metrics>,
    client: StatusClient,
    keys: Arc<Vec<ApiKey>>,
    budget: Budget,
    owner: Arc<str>,
    api: ApiCheck,
}

impl StatusReader {
    /// `rate` is the fleet's budget per key (`SUME_READ_RATE`), kept in `store`.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        client: StatusClient,
        keys: Vec<ApiKey>,
        rate: Rate,
    ) -> StatusReader {
        StatusReader {
            metrics,
            client,
            keys: Arc::new(keys),
            budget: Budget::new(store, rate),
            owner: lease_owner().into(),
            api: ApiCheck::default(),
        }
    }

    /// Checks the keys that are due a positive check (see [`ApiCheck`]), each under the
    /// budget; a key whose check cannot get a token before `deadline` waits for the next pass.
    pub async fn verify_keys(&self, deadline: Instant) -> Result<(), DbError> {
        for key in self.keys.iter() {
            if !self.api.due(&key.name, Instant::now()) {
                continue;
            }
            if !self.take(key, deadline).await? {
                continue;
            }
            let check = self.client.check_key(&key.key).await;
            let (code, usable) = match &check {
                Ok(c) => (c.http_status.to_string(), c.usable),
                Err(ClientError::Timeout) => ("timeout".to_owned(), false),
                Err(_) => ("error".to_owned(), false),
            };
            self.metrics.sume_answered(&key.name, &code);
            if let Ok(c) = &check {
                self.budget
                    .observe(&key.name, c.http_status, &c.rate)
                    .await?;
            }
            self.api.checked(&key.name, usable, Instant::now());
            self.metrics.sume_api_key_usable(&key.name, usable);
            if !usable {
                self.report_unusable(key, &code, check.ok().and_then(|c| c.request_id));
            }
        }
        Ok(())
    }

    fn report_unusable(&self, key: &ApiKey, code: &str, request_id: Option<String>) {
        let request_id = request_id.as_deref().unwrap_or("-");
        let url = self.client.base_url();
        match code {
            "404" => {
                tracing::error!(%url, key = %key.name, request_id, "SUME_API_URL looks wrong: listing jobs answered 404; no job is set aside or given up until it answers 200")
            }
            "401" | "403" => {
                tracing::error!(key = %key.name, code, request_id, "Sume refused API key {}: check SUME_API_KEYS (403: the key lacks the scope to read jobs); no job is set aside or given up until it works", key.name)
            }
            "402" => {
                tracing::error!(key = %key.name, code, request_id, "Sume says the workspace of API key {} is out of credits (402); no job is set aside or given up until reads work again", key.name)
            }
            _ => {
                tracing::warn!(%url, key = %key.name, code, request_id, "the check of an API key failed; no job is set aside or given up until it answers 200")
            }
        }
    }

    /// What a pass that asks Sume does first: nothing without keys (`None`); else the budget's
    /// buckets exist, due keys are checked, and the answer says whether 404s are verdicts now.
    pub async fn prepare_pass(&self, check_for: Duration) -> Result<Option<bool>, DbError> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        self.ensure_budget().await?;
        self.verify_keys(Instant::now() + check_for).await?;
        Ok(Some(self.verdicts_allowed()))
    }

    /// Whether 404s may be taken as verdicts now (every key checked and usable, the breaker
    /// closed). Holds are logged and shown by `sume_inbox_sume_api_verdicts_held`.
    pub fn verdicts_allowed(&self) -> bool {
        let names: Vec<String> = self.keys.iter().map(|k| k.name.clone()).collect();
        let hold = self.api.verdicts(&names, Instant::now());
        self.metrics
            .sume_api_verdicts_held
            .set(hold.is_err().into());
        if let Err(hold) = &hold {
            if let Some(left_out) = HOLDS_LOG.allow() {
                tracing::warn!(?hold, left_out, "verdicts on Sume's 404s are held");
            }
        }
        hold.is_ok()
    }

    /// Feeds the breaker with one poll of a job under its own key.
    pub fn polled_own_key(&self, not_found: bool) {
        if self.api.polled(not_found, Instant::now()) {
            tracing::error!(
                url = %self.client.base_url(),
                "nearly every poll of our own jobs answered 404 under their own key: SUME_API_URL or the keys look wrong; no job is set aside or given up for a while"
            );
        }
    }

    /// The same with `daily` reads per key and UTC day for the fleet (SUME_READ_DAILY).
    pub fn with_daily_reads(self, daily: u32) -> StatusReader {
        StatusReader {
            budget: self.budget.with_daily_reads(daily),
            ..self
        }
    }

    /// This instance's name on its leases.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The configured keys, in order.
    pub fn keys(&self) -> &[ApiKey] {
        &self.keys
    }

    /// Creates the budget's buckets of the keys where they do not exist yet.
    async fn ensure_budget(&self) -> Result<(), DbError> {
        let names: Vec<String> = self.keys.iter().map(|k| k.name.clone()).collect();
        self.budget.ensure(&names).await
    }

    /// Takes a read from `key`'s budget, waiting up to `deadline`; false when there is none
    /// by then (the minute's or the day's).
    async fn take(&self, key: &ApiKey, deadline: Instant) -> Result<bool, DbError> {
        let taken = match self.budget.acquire(&key.name, deadline).await {
            Ok(waited) => {
                self.metrics.budget_waited(waited);
                true
            }
            Err(BudgetError::Deadline) => false,
            Err(BudgetError::Db(e)) => return Err(e),
        };
        if let Some(left) = self.budget.left_today(&key.name) {
            self.metrics.reads_left_today(&key.name, left);
        }
        Ok(taken)
    }

    /// One status call under the budget, and how long the request itself took (not the wait
    /// for the budget). `None`: no budget before `deadline`, nothing sent.
    async fn call(
        &self,
        key: &ApiKey,
        job_id: &str,
        deadline: Instant,
    ) -> Result<Option<(Answer, Duration)>, DbError> {
        if !self.take(key, deadline).await? {
            return Ok(None);
        }
        let sent = Instant::now();
        let reply = self.client.job_status(&key.key, job_id).await;
        let latency = sent.elapsed();
        let code = match &reply {
            Ok(r) => r.http_status.to_string(),
            Err(ClientError::Timeout) => "timeout".to_owned(),
            Err(_) => "error".to_owned(),
        };
        self.metrics.sume_answered(&key.name, &code);
        if let Ok(r) = &reply {
            if r.http_status == 429 {
                self.metrics.sume_rate_limited.inc();
            }
            self.budget
                .observe(&key.name, r.http_status, &r.rate)
                .await?;
            let request_id = r.request_id.as_deref().unwrap_or("-");
            match r.http_status {
                401 => {
                    tracing::error!(key = %key.name, request_id, "Sume refused API key (401): check SUME_API_KEYS")
                }
                200 | 404 => {}
                402 => {
                    tracing::error!(key = %key.name, job_id, request_id, "Sume answered 402 (out of credits) to a status read: the job stays as it is and is asked again later")
                }
                403 => {
                    tracing::error!(key = %key.name, job_id, request_id, "Sume answered 403 (the key lacks the scope) to a status read: the job stays as it is and is asked again later; check SUME_API_KEYS")
                }
                status => {
                    tracing::warn!(key = %key.name, job_id, status, request_id, "Sume answered a status call with an error")
                }
            }
        }
        Ok(Some((Answer::read(reply), latency)))
    }
}

/// The kernel's host name (gethostname(2): no file to read, so it works inside a sandbox that
/// hides /proc/sys).
pub(crate) fn kernel_hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; the kernel writes a NUL-terminated name.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..end].to_vec()).ok()
}

/// This process's name on its leases: the host's name (the kernel's, since `HOSTNAME` is unset
/// under systemd), the process id and 64 random bits, so two processes never share a name,
/// even on hosts with one name (containers, clones).
pub fn lease_owner() -> String {
    let host = kernel_hostname()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    format!(
        "{host}-{}-{:016x}",
        std::process::id(),
        rand::thread_rng().gen::<u64>()
    )
}

/// The last moment a request may start and still finish within a claim made at `claimed`
/// (on the process clock: it bounds real requests, not the statements' clock).
fn send_deadline(claimed: Instant, lease: Duration, request_timeout: Duration) -> Instant {
    claimed + lease.saturating_sub(request_timeout * 2)
}

/// Serves claims, `concurrency` at a time; answers the merged stats and the claims to give
/// back unserved.
async fn serve<C, S, F, Fut>(
    claims: Vec<C>,
    concurrency: usize,
    serve_one: F,
) -> Result<(S, Vec<String>), DbError>
where
    S: Default + AddAssign,
    F: FnMut(C) -> Fut,
    Fut: Future<Output = Result<(S, Option<String>), DbError>>,
{
    let results: Vec<_> = futures_util::stream::iter(claims)
        .map(serve_one)
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut stats = S::default();
    let mut unserved = Vec::new();
    for r in results {
        let (s, released) = r?;
        stats += s;
        unserved.extend(released);
    }
    Ok((stats, unserved))
}

/// A service's loop: `pass` every `interval` (jittered, so instances drift apart) until
/// shutdown. A pass that did something is logged with its stats, a failed one is logged and
/// tried again at the next tick; the loop only schedules, `pass` does the work.
async fn every<S, F, Fut>(what: &str, interval: Duration, shutdown: &CancellationToken, mut pass: F)
where
    S: std::fmt::Debug + Default + PartialEq,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<S, DbError>>,
{
    while !shutdown.is_cancelled() {
        match pass().await {
            Ok(stats) if stats != S::default() => tracing::info!(?stats, "{what} pass"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "{what} pass failed; will retry"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(jitter(interval)) => {}
        }
    }
}

/// The wait before poll number `attempts + 1`: `first * 2^attempts`, capped, jittered ±20%.
pub fn backoff(attempts: i32, first: Duration, cap: Duration) -> Duration {
    jitter(backoff_base(attempts, first, cap))
}

/// [`backoff`] before the jitter: `first * 2^attempts`, capped.
pub fn backoff_base(attempts: i32, first: Duration, cap: Duration) -> Duration {
    let exp = attempts.clamp(0, 30) as u32;
    first.saturating_mul(2u32.saturating_pow(exp)).min(cap)
}

/// ±20%, so that work scheduled together spreads out.
pub fn jitter(d: Duration) -> Duration {
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
        assert_eq!(backoff_base(-3, first, cap), first);
        assert_eq!(backoff_base(1, first, cap), Duration::from_secs(240));
    }

    #[test]
    fn answers_are_read_and_described() {
        let timeout = Answer::read(Err(ClientError::Timeout));
        assert_eq!(timeout.text, "timeout");
        assert_eq!(timeout.reply, Reply::Failed);
    }

    #[test]
    fn lease_owners_are_unique_per_process_and_named_for_the_host() {
        let (a, b) = (lease_owner(), lease_owner());
        assert_ne!(a, b);
        assert!(
            !a.starts_with('-') && a.contains(&format!("-{}-", std::process::id())),
            "{a}"
        );
    }
}
