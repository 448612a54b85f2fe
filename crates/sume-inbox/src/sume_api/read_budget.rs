//! The request budget for Sume's API, one per API key, shared by the whole fleet.
//!
//! Sume limits reads per key (120 a minute). Every instance calls the status endpoint with the
//! same keys, so a per-instance limit would multiply with the number of instances. The budget
//! is therefore a token bucket per key in PostgreSQL (`sume.rate_buckets`), the one thing the
//! instances already share: each request first takes a token in one short `UPDATE`, timed by
//! the database's clock. The fleet as a whole stays within `SUME_READ_RATE` however many
//! instances run or die, with no membership to track; and a `Retry-After` (or
//! `RateLimit-Remaining: 0`) seen by any instance pauses the key for all of them.
//!
//! The bucket holds at most a tenth of a window's tokens (at least one), so a burst plus a
//! window's refill stays under Sume's limit: with 100 a minute, at most 10 + 100 in any minute.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::NaiveDate;
use sume_wire::RateLimit;
use tokio::time::Instant;

use crate::config::Rate;
use crate::db::{DbError, Store};

/// The longest pause a 503's `Retry-After` makes: an outage said to last longer is asked
/// about again after this, so a front's mistake (`Retry-After: 86400` on a maintenance page)
/// cannot stop the fleet's reads for a day.
pub const LONGEST_503_PAUSE: Duration = Duration::from_secs(3600);

/// The fleet-wide request budget of every API key: a token bucket per key in
/// `sume.rate_buckets`, plus the pauses Sume asked for (429). Cheap to clone.
#[derive(Clone)]
pub struct Budget {
    store: Store,
    rate: Rate,
    daily: u32,
    /// Pauses this instance has seen, applied at once to its own tasks; the database carries
    /// them to the other instances a round trip later.
    paused: Arc<Mutex<HashMap<String, Instant>>>,
    /// The reads each key had left, as of its last take, and the UTC day they were left of.
    left_today: Arc<Mutex<HashMap<String, (NaiveDate, i64)>>>,
}

/// Why no token was taken.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// No token could be had before the caller's deadline: give the work back for later.
    #[error("no request budget before the deadline")]
    Deadline,
    /// The bucket could not be read or written.
    #[error(transparent)]
    Db(#[from] DbError),
}

impl Budget {
    /// A budget of `rate` per key for the whole fleet, kept in `store`.
    pub fn new(store: Store, rate: Rate) -> Budget {
        Budget {
            store,
            rate,
            daily: crate::config::SweepConfig::default().daily_reads,
            paused: Arc::default(),
            left_today: Arc::default(),
        }
    }

    /// The same with `daily` reads per key and UTC day.
    pub fn with_daily_reads(self, daily: u32) -> Budget {
        Budget { daily, ..self }
    }

    /// The reads per key and UTC day this budget allows.
    pub fn daily_reads(&self) -> u32 {
        self.daily
    }

    fn local_pause(&self, key_name: &str) -> Option<Instant> {
        let paused = self.paused.lock().expect("budget lock");
        paused
            .get(key_name)
            .copied()
            .filter(|until| *until > Instant::now())
    }

    /// The bucket's size: a tenth of the rate's count (at least 1), so a burst after a quiet
    /// while stays small.
    pub fn capacity(&self) -> f64 {
        self.rate.burst()
    }

    /// Creates the buckets of these keys (full) where they do not exist yet.
    pub async fn ensure(&self, key_names: &[String]) -> Result<(), DbError> {
        for name in key_names {
            self.store
                .rate_buckets_ensure(name, self.capacity())
                .await?;
        }
        Ok(())
    }

    /// Waits for a token of `key_name`, up to `deadline`; answers how long it waited.
    pub async fn acquire(
        &self,
        key_name: &str,
        deadline: Instant,
    ) -> Result<Duration, BudgetError> {
        let started = Instant::now();
        loop {
            if let Some(until) = self.local_pause(key_name) {
                if until > deadline {
                    return Err(BudgetError::Deadline);
                }
                tokio::time::sleep_until(until).await;
                continue;
            }
            let take = self
                .store
                .rate_buckets_take(
                    key_name,
                    self.rate.per_second(),
                    self.capacity(),
                    self.daily.min(i32::MAX as u32) as i32,
                )
                .await?;
            self.left_today
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key_name.to_owned(), (take.today, take.left_today));
            if take.taken {
                // A pause seen while the token was being taken still applies to this request.
                if let Some(until) = self.local_pause(key_name) {
                    if until > deadline {
                        return Err(BudgetError::Deadline);
                    }
                    tokio::time::sleep_until(until).await;
                }
                return Ok(started.elapsed());
            }
            let refill = ((1.0 - take.available).max(0.0) / self.rate.per_second()).max(0.001);
            let wait = Duration::from_secs_f64(take.paused_for.max(refill));
            if Instant::now() + wait > deadline {
                return Err(BudgetError::Deadline);
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// The reads `key_name` had left today as of its last take, if it took any.
    pub fn left_today(&self, key_name: &str) -> Option<i64> {
        self.left_of(key_name).map(|(_, left)| left)
    }

    /// The reads `key_name` has left on the UTC day `day`, for the whole fleet, as of this
    /// instance's last take: the day's whole allowance when its last take was of an earlier
    /// day, or it took none.
    pub fn left_on(&self, key_name: &str, day: NaiveDate) -> i64 {
        match self.left_of(key_name) {
            Some((of, left)) if of >= day => left,
            _ => i64::from(self.daily),
        }
    }

    fn left_of(&self, key_name: &str) -> Option<(NaiveDate, i64)> {
        self.left_today
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key_name)
            .copied()
    }

    /// Applies what an answer said about the key's limit: a `Retry-After` on a 429, or on a
    /// 503 (Sume, or its front, unavailable for that long; at most [`LONGEST_503_PAUSE`]), or a
    /// `RateLimit-Remaining` of 0 until `RateLimit-Reset`. Answers the pause, if any.
    pub async fn observe(
        &self,
        key_name: &str,
        status: u16,
        rate: &RateLimit,
    ) -> Result<Option<Duration>, DbError> {
        let pause = match (status, rate.retry_after, rate.remaining, rate.reset) {
            (429, _, _, _) => Some(rate.wait_after_429()),
            (503, Some(after), _, _) => Some(after.min(LONGEST_503_PAUSE)),
            (_, _, Some(0), Some(reset)) => Some(reset),
            _ => None,
        };
        if let Some(p) = pause.filter(|p| !p.is_zero()) {
            {
                let mut paused = self.paused.lock().expect("budget lock");
                let until = paused
                    .entry(key_name.to_owned())
                    .or_insert_with(Instant::now);
                *until = (*until).max(Instant::now() + p);
            }
            self.store
                .rate_buckets_pause(key_name, p.as_secs_f64())
                .await?;
            tracing::info!(
                key = key_name,
                status,
                pause_ms = p.as_millis() as u64,
                "Sume asked to slow down; pausing this key for every instance"
            );
        }
        Ok(pause)
    }
}
