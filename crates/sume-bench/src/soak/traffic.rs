//! The soak's traffic: signed deliveries at a fixed rate (open loop, latency from the intended
//! send time as in `sume-bench run`'s fixed-rate step, into a histogram the sampler empties
//! every window), and an application registering the jobs of those deliveries.
//!
//! The application, delivery `n` by delivery `n` (see [`Kind`]): most jobs are registered
//! shortly after their webhook (the race the daemon exists for), one in ten shortly before, and
//! one in 4,000 never (Sume does not know them either, so the sweep's inbox check finds 404
//! under the key and sets their events aside). Beside them, one job every 2 s is created at the
//! simulator and registered with no webhook ever coming: the sweep's poll closes it
//! (`POLL_AFTER`, a minute here).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::load::Conn;
use crate::sql;
use crate::stats::Latencies;
use crate::webhook::Generator;

/// What the application does with the job of delivery `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Registered about 100-300 ms after the delivery is made.
    After,
    /// Registered about 200 ms before the delivery is made.
    Before,
    /// Never registered: its event waits until the inbox check sets it aside.
    Never,
}

/// One in this many jobs is never registered.
pub const NEVER_EVERY: u64 = 4_000;
/// One in this many is registered before its webhook.
pub const BEFORE_EVERY: u64 = 10;

impl Kind {
    /// The kind of delivery `n`.
    pub fn of(n: u64) -> Kind {
        if n % NEVER_EVERY == 1 {
            Kind::Never
        } else if n.is_multiple_of(BEFORE_EVERY) {
            Kind::Before
        } else {
            Kind::After
        }
    }
}

/// What the senders share with the sampler.
#[derive(Default)]
pub struct Shared {
    /// Latencies of the current window; the sampler takes and replaces it.
    pub window: Mutex<Latencies>,
    /// Every request sent, every 2xx, every other answer or none.
    pub sent: AtomicU64,
    /// 2xx answers.
    pub acked: AtomicU64,
    /// Answers that were not 2xx, and requests without an answer.
    pub failed: AtomicU64,
    /// Jobs registered by the application (deliveries' and the simulator's).
    pub registered: AtomicU64,
    /// Jobs created at the simulator and registered, for the poll to close.
    pub polled_jobs: AtomicU64,
    /// Set when the load is over: the application stops too.
    pub done: AtomicBool,
}

impl Shared {
    /// The p99 of the window so far, and a fresh window.
    pub fn take_window(&self) -> Latencies {
        std::mem::take(&mut *self.window.lock().expect("window lock"))
    }
}

/// Sends `rate` deliveries a second over `connections` connections until `end`.
pub async fn send(
    addr: std::net::SocketAddr,
    connections: usize,
    rate: f64,
    end: Instant,
    generator: Arc<Generator>,
    shared: Arc<Shared>,
) -> anyhow::Result<()> {
    let mut conns = Vec::with_capacity(connections);
    for _ in 0..connections {
        conns.push(Conn::open(addr).await?);
    }
    let start = Instant::now();
    let due = Arc::new(AtomicU64::new(0));
    let mut senders = JoinSet::new();
    for mut conn in conns {
        let (generator, shared, due) = (generator.clone(), shared.clone(), due.clone());
        senders.spawn(async move {
            loop {
                let i = due.fetch_add(1, Ordering::Relaxed);
                let intended = start + Duration::from_secs_f64(i as f64 / rate);
                if intended >= end {
                    break;
                }
                tokio::time::sleep_until(intended).await;
                let unix = chrono::Utc::now().timestamp();
                let delivery = generator.next(unix);
                let answer = conn.send(&delivery).await;
                let latency = Instant::now() - intended;
                shared.sent.fetch_add(1, Ordering::Relaxed);
                if answer.is_some_and(|s| s.is_success()) {
                    shared.acked.fetch_add(1, Ordering::Relaxed);
                } else {
                    shared.failed.fetch_add(1, Ordering::Relaxed);
                }
                shared.window.lock().expect("window lock").record(latency);
            }
        });
    }
    while let Some(r) = senders.join_next().await {
        r?;
    }
    shared.done.store(true, Ordering::Relaxed);
    Ok(())
}

/// The application: every 100 ms, registers (in one transaction) the jobs made since the last
/// tick that are due: [`Kind::After`] ones 200 deliveries behind the generator, [`Kind::Before`]
/// ones 400 ahead of it. Stops once the load is over.
pub async fn register(
    db: tokio_postgres::Client,
    generator: Arc<Generator>,
    rate: f64,
    shared: Arc<Shared>,
) -> anyhow::Result<()> {
    let lag = (rate * 0.1) as u64;
    let ahead = (rate * 0.2) as u64;
    let (mut after_next, mut before_next) = (0u64, 0u64);
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    while !shared.done.load(Ordering::Relaxed) {
        ticker.tick().await;
        let made = generator.made();
        let mut ids = Vec::new();
        let after_until = made.saturating_sub(lag);
        ids.extend(
            (after_next..after_until)
                .filter(|&n| Kind::of(n) == Kind::After)
                .map(|n| generator.job_id(n)),
        );
        after_next = after_next.max(after_until);
        let before_until = made + ahead;
        ids.extend(
            (before_next.max(made)..before_until)
                .filter(|&n| Kind::of(n) == Kind::Before)
                .map(|n| generator.job_id(n)),
        );
        before_next = before_until;
        if !ids.is_empty() {
            db.execute(sql::JOBS_REGISTER_MANY.sql(), &[&ids, &super::KEY_NAME])
                .await?;
            shared
                .registered
                .fetch_add(ids.len() as u64, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// Every 2 s, a job created at the simulator (no webhook configured: none comes) and
/// registered, for the sweep's poll to close.
pub async fn polled_jobs(
    db: tokio_postgres::Client,
    api_url: String,
    shared: Arc<Shared>,
) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    while !shared.done.load(Ordering::Relaxed) {
        ticker.tick().await;
        let created: serde_json::Value = http
            .post(format!("{api_url}/videos/generations"))
            .bearer_auth(super::KEY_SECRET)
            .json(&json!({"prompt": "soak", "sim": {"duration_ms": 1}}))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let id = created["job_id"].as_str().unwrap_or_default().to_owned();
        anyhow::ensure!(
            !id.is_empty(),
            "the simulator answered no job_id: {created}"
        );
        db.execute(
            sql::JOBS_REGISTER_MANY.sql(),
            &[&vec![id], &super::KEY_NAME],
        )
        .await?;
        shared.polled_jobs.fetch_add(1, Ordering::Relaxed);
        shared.registered.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_of_registrations() {
        let kinds: Vec<Kind> = (0..40_000).map(Kind::of).collect();
        let count = |k| kinds.iter().filter(|&&x| x == k).count();
        assert_eq!(count(Kind::Never), 10);
        assert_eq!(count(Kind::Before), 4_000);
        assert_eq!(count(Kind::After), 40_000 - 4_010);
    }
}
