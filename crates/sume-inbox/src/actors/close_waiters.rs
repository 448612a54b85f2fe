//! Requests waiting for a job to close (`GET /v1/jobs/{id}?wait=30s`), and what wakes them.
//!
//! [`Waiters`] is the registry: at most MAX_WAITERS at once (a request beyond is refused at
//! once), each holding no database connection while it waits, only a [`Notify`] per job id.
//! [`Wakeup`]'s task wakes them: with `listen`, one LISTEN `sume_job_closed` connection per
//! instance (outside the pool), so a close made by any instance wakes the waiters of all;
//! with `poll`, or while that connection cannot be had, one query per WAIT_POLL_INTERVAL asks
//! which waited-for jobs are closed. A wake-up only says "read the job again": the handler
//! reads the row, so a lost or spurious wake-up costs a read, never a wrong answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::actors::supervision::Actor;
use crate::config::WaitConfig;
pub use crate::config::Wakeup;
use crate::db::Store;

/// The waiters of one instance, by job id. Cloning shares them.
#[derive(Clone)]
pub struct Waiters {
    jobs: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
    permits: Arc<Semaphore>,
    limit: usize,
}

/// One request's place among the waiters; leaving it (drop) frees the place.
pub struct Waiting {
    job_id: String,
    notify: Arc<Notify>,
    waiters: Waiters,
    _permit: OwnedSemaphorePermit,
}

impl Waiters {
    /// Room for `limit` waiters at once.
    pub fn new(limit: usize) -> Waiters {
        Waiters {
            jobs: Arc::default(),
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    /// A place to wait for `job_id`, or `None` when MAX_WAITERS are waiting already.
    pub fn join(&self, job_id: &str) -> Option<Waiting> {
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        let notify = self
            .jobs
            .lock()
            .expect("waiters lock")
            .entry(job_id.to_owned())
            .or_default()
            .clone();
        Some(Waiting {
            job_id: job_id.to_owned(),
            notify,
            waiters: self.clone(),
            _permit: permit,
        })
    }

    /// Wakes every waiter of `job_id` on this instance.
    pub fn wake(&self, job_id: &str) {
        if let Some(n) = self.jobs.lock().expect("waiters lock").get(job_id) {
            n.notify_waiters();
        }
    }

    /// Wakes every waiter (after a reconnect: a close may have been missed meanwhile).
    pub fn wake_all(&self) {
        for n in self.jobs.lock().expect("waiters lock").values() {
            n.notify_waiters();
        }
    }

    /// The job ids waited for now.
    pub fn job_ids(&self) -> Vec<String> {
        self.jobs
            .lock()
            .expect("waiters lock")
            .keys()
            .cloned()
            .collect()
    }

    /// Requests waiting now.
    pub fn len(&self) -> usize {
        self.limit - self.permits.available_permits()
    }

    /// No request is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Waiting {
    /// The wake-up to wait for. Create it before reading the job: a wake-up sent between the
    /// read and the wait is then not missed.
    pub fn woken(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut jobs = self.waiters.jobs.lock().expect("waiters lock");
        // The map's reference and this one: nobody else waits for the job.
        if Arc::strong_count(&self.notify) <= 2 {
            jobs.remove(&self.job_id);
        }
    }
}

/// A LISTEN that keeps failing (the database is down) is retried at every poll, logged less often.
static LISTEN_ERRORS_LOG: crate::process::log_budget::LogBudget =
    crate::process::log_budget::LogBudget::new(1, Duration::from_secs(60));

/// The task that wakes the waiters: LISTEN `sume_job_closed`, or polling.
pub struct WaiterWakeup {
    store: Store,
    waiters: Waiters,
    wakeup: Wakeup,
    poll_interval: Duration,
}

impl WaiterWakeup {
    /// Wakes `waiters` as `config` says; without a direct connection to LISTEN on (behind a
    /// transaction pooler without LISTEN_DATABASE_URL), by polling.
    pub fn new(store: Store, waiters: Waiters, config: &WaitConfig) -> WaiterWakeup {
        let wakeup = match config.wakeup {
            Wakeup::Listen if !store.can_listen() => {
                tracing::info!("no direct connection for LISTEN: waiters are woken by polling");
                Wakeup::Poll
            }
            wakeup => wakeup,
        };
        WaiterWakeup {
            store,
            waiters,
            wakeup,
            poll_interval: config.poll_interval,
        }
    }
}

impl Actor for WaiterWakeup {
    fn name(&self) -> String {
        "waiters-wakeup".into()
    }

    async fn run(self, stop: CancellationToken) {
        wake(
            self.store,
            self.waiters,
            self.wakeup,
            self.poll_interval,
            stop,
        )
        .await
    }
}

/// Runs the wake-up of `waiters` until shutdown.
async fn wake(
    store: Store,
    waiters: Waiters,
    wakeup: Wakeup,
    poll_interval: Duration,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(poll_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if wakeup == Wakeup::Listen {
            match store.job_closes_listen().await {
                Ok(listener) => {
                    // Closes made while no connection listened are found by a read.
                    waiters.wake_all();
                    if listen(listener, &waiters, &shutdown).await {
                        break;
                    }
                    tracing::warn!("waiters' LISTEN connection lost; polling until it is back");
                    waiters.wake_all();
                }
                Err(e) => {
                    if let Some(left_out) = LISTEN_ERRORS_LOG.allow() {
                        tracing::warn!(error = %e, left_out, "waiters cannot LISTEN; polling meanwhile");
                    }
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = ticker.tick() => poll(&store, &waiters).await,
        }
    }
}

/// Forwards each notification until the connection ends (false) or shutdown (true).
async fn listen(
    mut listener: crate::db::ClosesListener,
    waiters: &Waiters,
    shutdown: &CancellationToken,
) -> bool {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return true,
            id = listener.job_ids.recv() => match id {
                Some(id) => waiters.wake(&id),
                None => return false,
            },
        }
    }
}

/// One polling pass: wakes the waiters of the jobs that are closed.
async fn poll(store: &Store, waiters: &Waiters) {
    let ids = waiters.job_ids();
    if ids.is_empty() {
        return;
    }
    match store.jobs_closed_among(&ids).await {
        Ok(closed) => closed.iter().for_each(|id| waiters.wake(id)),
        Err(e) => tracing::warn!(error = %e, "polling the waited-for jobs failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_are_bounded_woken_by_job_and_forgotten_when_gone() {
        let waiters = Waiters::new(2);
        let a = waiters.join("job_a").unwrap();
        let b = waiters.join("job_a").unwrap();
        assert!(waiters.join("job_b").is_none(), "full");
        assert_eq!(waiters.len(), 2);
        let woken_a = a.woken();
        let woken_b = b.woken();
        waiters.wake("job_other");
        waiters.wake("job_a");
        woken_a.await;
        woken_b.await;
        drop(a);
        assert_eq!(waiters.job_ids(), vec!["job_a".to_owned()]);
        drop(b);
        assert!(waiters.job_ids().is_empty());
        assert!(waiters.is_empty());
        assert!(waiters.join("job_b").is_some(), "room again");
    }
}
