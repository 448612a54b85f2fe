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

mod inbox_check;
mod poll;
mod poll_decision;
mod retention;

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
use serde_json::Value;
use sume_wire::{ClientError, StatusClient, StatusOutcome, StatusReply};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::budget::{Budget, BudgetError};
use crate::config::{ApiKey, Rate};
use crate::db::{DbError, Store};
use crate::metrics::Metrics;

/// How long a 429 without `Retry-After` or `RateLimit-Reset` keeps a job from its next poll.
const DEFAULT_RETRY_IN: Duration = Duration::from_secs(60);

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

    /// One status call under the budget. `None`: no budget before `deadline`, nothing sent.
    async fn call(
        &self,
        key: &ApiKey,
        job_id: &str,
        deadline: Instant,
    ) -> Result<Option<Answer>, DbError> {
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
        Ok(Some(Answer::read(reply)))
    }
}

/// This instance's name on its leases: host, process and a random suffix.
pub fn lease_owner() -> String {
    format!(
        "{}-{}-{:04x}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "host".to_owned()),
        std::process::id(),
        rand::thread_rng().gen::<u16>()
    )
}

/// One key's answer about one job, as the decisions read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// As recorded: `"200 running"`, `"404"`, `"429"`, `"timeout"`, `"error: ..."`.
    pub text: String,
    pub reply: Reply,
}

/// What an answer says.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The key can read the job; its status as spelt by Sume, and its result.
    Found {
        status: String,
        result: Option<Value>,
    },
    /// 404: this key cannot see the job.
    NotFound,
    /// 429: ask again after `retry_in` (`Retry-After`, else `RateLimit-Reset`, else a minute).
    RateLimited { retry_in: Duration },
    /// Anything else: 401, 5xx, an unexpected answer, a timeout, a transport error.
    Failed,
}

impl Answer {
    /// Reads a status call's reply.
    pub fn read(reply: Result<StatusReply, ClientError>) -> Answer {
        match reply {
            Ok(r) => {
                let (text, reply) = match r.outcome {
                    StatusOutcome::Found(job) => (
                        format!("{} {}", r.http_status, job.status),
                        Reply::Found {
                            result: job.outcome_value(),
                            status: job.status,
                        },
                    ),
                    StatusOutcome::NotFound => (r.http_status.to_string(), Reply::NotFound),
                    StatusOutcome::RateLimited => (
                        r.http_status.to_string(),
                        Reply::RateLimited {
                            retry_in: r
                                .rate
                                .retry_after
                                .or(r.rate.reset)
                                .unwrap_or(DEFAULT_RETRY_IN),
                        },
                    ),
                    _ => (r.http_status.to_string(), Reply::Failed),
                };
                Answer { text, reply }
            }
            Err(ClientError::Timeout) => Answer {
                text: "timeout".to_owned(),
                reply: Reply::Failed,
            },
            Err(e) => Answer {
                text: format!("error: {e}"),
                reply: Reply::Failed,
            },
        }
    }
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

/// Waits a jittered `interval` (so instances drift apart); false if shutdown came first.
async fn pause(interval: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => false,
        _ = tokio::time::sleep(jitter(interval)) => true,
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
}
