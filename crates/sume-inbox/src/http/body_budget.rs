//! MAX_BODY_MEMORY: the bytes of webhook bodies the port holds at once, from the first byte
//! read until the delivery's answer (its commit, or its refusal).
//!
//! MAX_IN_FLIGHT × MAX_BODY_BYTES (1 GiB with the defaults) is what a port full of uploads
//! could otherwise hold, far more than genuine deliveries (a few KiB each) ever need. A body
//! claims its bytes as they arrive, never what its `Content-Length` declares (which costs an
//! attacker nothing to write). When the budget cannot cover a body's next bytes, its reader
//! sheds older readers that hold enough ([`super::body_readers`]) and waits for their bytes at
//! most [`SHED_WAIT`]; failing that, the delivery is answered 503 with `Retry-After` and what it
//! held is released.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a body whose bytes do not fit waits for those of the readers it shed (their
/// handlers drop them as soon as they run).
pub const SHED_WAIT: Duration = Duration::from_millis(500);

/// The shared budget, in bytes.
#[derive(Clone, Debug)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
}

/// Bytes held for one delivery; released when dropped.
#[derive(Debug)]
pub struct Held(OwnedSemaphorePermit);

/// The budget could not cover a body right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget;

impl BodyBudget {
    /// A budget of `bytes` (at most `u32::MAX`, which the configuration checks).
    pub fn new(bytes: usize) -> BodyBudget {
        BodyBudget {
            bytes: Arc::new(Semaphore::new(bytes)),
        }
    }

    /// Reserves `n` bytes at once, or fails at once.
    pub fn reserve(&self, n: usize) -> Result<Held, OverBudget> {
        let n = u32::try_from(n).map_err(|_| OverBudget)?;
        self.bytes
            .clone()
            .try_acquire_many_owned(n)
            .map(Held)
            .map_err(|_| OverBudget)
    }

    /// Reserves `n` bytes, waiting at most `wait` for them to be released by others.
    pub async fn reserve_within(&self, n: usize, wait: Duration) -> Result<Held, OverBudget> {
        let n = u32::try_from(n).map_err(|_| OverBudget)?;
        match tokio::time::timeout(wait, self.bytes.clone().acquire_many_owned(n)).await {
            Ok(Ok(permit)) => Ok(Held(permit)),
            _ => Err(OverBudget),
        }
    }

    /// Bytes not held by any delivery now.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

impl Held {
    /// Adds `n` more bytes to what this delivery holds, or fails at once (what it held stays
    /// held until it is dropped).
    pub fn grow(&mut self, budget: &BodyBudget, n: usize) -> Result<(), OverBudget> {
        let more = budget.reserve(n)?;
        self.add(more);
        Ok(())
    }

    /// Adds what `more` holds to this delivery's bytes.
    pub fn add(&mut self, more: Held) {
        self.0.merge(more.0);
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.0.num_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_fail_at_once_beyond_the_budget_and_return_when_dropped() {
        let budget = BodyBudget::new(100);
        let mut first = budget.reserve(60).unwrap();
        assert_eq!(budget.reserve(41).unwrap_err(), OverBudget);
        first.grow(&budget, 30).unwrap();
        assert_eq!(first.bytes(), 90);
        assert_eq!(first.grow(&budget, 11).unwrap_err(), OverBudget);
        assert_eq!(first.bytes(), 90, "a failed growth keeps what was held");
        let second = budget.reserve(10).unwrap();
        assert_eq!(budget.available(), 0);
        drop(first);
        drop(second);
        assert_eq!(budget.available(), 100);
        assert_eq!(
            budget.reserve(usize::MAX).unwrap_err(),
            OverBudget,
            "a size beyond u32 is refused, not truncated"
        );
    }

    #[tokio::test]
    async fn a_reservation_waits_for_bytes_released_meanwhile_and_no_longer() {
        let budget = BodyBudget::new(100);
        let held = budget.reserve(80).unwrap();
        let short = Duration::from_millis(20);
        assert_eq!(
            budget.reserve_within(30, short).await.unwrap_err(),
            OverBudget
        );
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.reserve_within(30, Duration::from_secs(30)).await }
        });
        drop(held);
        let mut got = waiting
            .await
            .unwrap()
            .expect("the released bytes are taken");
        got.add(budget.reserve(70).unwrap());
        assert_eq!(got.bytes(), 100);
        assert_eq!(budget.available(), 0);
    }
}
