//! Signed load that records every answer: N persistent connections, each sending one new
//! delivery at a time (ids unique within the run, see [`Generator`]), as Sume would: after a
//! failed attempt a sender waits a little before its next one, so a dead port is not spun on.
//!
//! Each answer keeps the event id, when it was sent and answered, and its status, so that a
//! scenario can tell afterwards which deliveries were acknowledged (and must be stored) and
//! when 2xx answers resumed after a fault.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::bail;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::load::Conn;
use crate::webhook::Generator;

/// How long a sender waits after an attempt that was not answered 2xx.
const BACKOFF: Duration = Duration::from_millis(10);

/// One attempt: microseconds are counted from the traffic's start.
#[derive(Debug, Clone)]
pub(super) struct Answer {
    pub(super) event_id: String,
    pub(super) sent_us: u64,
    pub(super) answered_us: u64,
    /// The HTTP status, or `None` when no answer came (connection refused, reset, timeout).
    pub(super) status: Option<u16>,
}

impl Answer {
    pub(super) fn ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

#[derive(Default)]
struct Shared {
    acked: AtomicU64,
    /// The latest `sent_us` among the 2xx answers so far.
    last_ok_sent_us: AtomicU64,
    answers: Mutex<Vec<Answer>>,
}

/// The load while it runs.
pub(super) struct Traffic {
    stop: CancellationToken,
    senders: JoinSet<()>,
    shared: Arc<Shared>,
    epoch: Instant,
}

impl Traffic {
    /// Starts `connections` senders against `addr`.
    pub(super) fn start(addr: SocketAddr, generator: Arc<Generator>, connections: usize) -> Self {
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared::default());
        let epoch = Instant::now();
        let mut senders = JoinSet::new();
        for _ in 0..connections {
            let (stop, shared, generator) = (stop.clone(), shared.clone(), generator.clone());
            senders.spawn(async move { send_loop(addr, &generator, &stop, &shared, epoch).await });
        }
        Traffic {
            stop,
            senders,
            shared,
            epoch,
        }
    }

    /// Microseconds since the traffic started: the clock of [`Answer`].
    pub(super) fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// 2xx answers so far.
    pub(super) fn acked(&self) -> u64 {
        self.shared.acked.load(Ordering::Relaxed)
    }

    /// Waits until `n` deliveries have been answered 2xx.
    pub(super) async fn wait_acked(&self, n: u64, patience: Duration) -> anyhow::Result<()> {
        let what = format!("{n} deliveries answered 2xx");
        self.wait(&what, patience, || self.acked() >= n).await
    }

    /// Waits until a delivery sent at `t_us` or later has been answered 2xx.
    pub(super) async fn wait_ok_sent_after(
        &self,
        t_us: u64,
        patience: Duration,
    ) -> anyhow::Result<()> {
        self.wait("a 2xx after the fault", patience, || {
            self.shared.last_ok_sent_us.load(Ordering::Relaxed) >= t_us
        })
        .await
    }

    async fn wait(
        &self,
        what: &str,
        patience: Duration,
        done: impl Fn() -> bool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + patience;
        while !done() {
            if Instant::now() > deadline {
                bail!("no {what} within {patience:?} ({} so far)", self.acked());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Stops the senders, waits for the answers in flight, and answers every attempt.
    pub(super) async fn finish(mut self) -> Answers {
        self.stop.cancel();
        while self.senders.join_next().await.is_some() {}
        let answers = std::mem::take(&mut *self.shared.answers.lock().expect("answers"));
        Answers(answers)
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn since(epoch: Instant) -> u64 {
    epoch.elapsed().as_micros() as u64
}

async fn send_loop(
    addr: SocketAddr,
    generator: &Generator,
    stop: &CancellationToken,
    shared: &Shared,
    epoch: Instant,
) {
    let mut conn: Option<Conn> = None;
    while !stop.is_cancelled() {
        let Some(c) = conn.as_mut() else {
            match Conn::open(addr).await {
                Ok(c) => conn = Some(c),
                Err(_) => tokio::time::sleep(BACKOFF).await,
            }
            continue;
        };
        let delivery = generator.next(chrono::Utc::now().timestamp());
        let sent_us = since(epoch);
        let status = c.send(&delivery).await.map(|s| s.as_u16());
        let answer = Answer {
            event_id: delivery.event_id,
            sent_us,
            answered_us: since(epoch),
            status,
        };
        let ok = answer.ok();
        if ok {
            shared.acked.fetch_add(1, Ordering::Relaxed);
            shared.last_ok_sent_us.fetch_max(sent_us, Ordering::Relaxed);
        }
        shared.answers.lock().expect("answers").push(answer);
        if !ok {
            tokio::time::sleep(BACKOFF).await;
        }
    }
}

/// Every attempt of a scenario, in no particular order.
pub(super) struct Answers(pub(super) Vec<Answer>);

impl Answers {
    /// The event ids answered 2xx.
    pub(super) fn acked_ids(&self) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(|a| a.ok())
            .map(|a| a.event_id.as_str())
    }

    /// Attempts answered other than 2xx, and attempts not answered at all.
    pub(super) fn failures(&self) -> (u64, u64) {
        let not_2xx = self
            .0
            .iter()
            .filter(|a| a.status.is_some() && !a.ok())
            .count();
        let none = self.0.iter().filter(|a| a.status.is_none()).count();
        (not_2xx as u64, none as u64)
    }

    /// From `back_us` to the first 2xx of a delivery sent at `back_us` or later.
    pub(super) fn recovery(&self, back_us: u64) -> Option<Duration> {
        self.0
            .iter()
            .filter(|a| a.ok() && a.sent_us >= back_us)
            .map(|a| a.answered_us)
            .min()
            .map(|t| Duration::from_micros(t - back_us))
    }

    /// Deliveries answered 2xx per second, and the median and 99th percentile of their time,
    /// leaving out those sent in the first `warmup`.
    pub(super) fn rate_and_latency(&self, warmup: Duration) -> (f64, Duration, Duration) {
        let from = warmup.as_micros() as u64;
        let mut times: Vec<u64> = self
            .0
            .iter()
            .filter(|a| a.ok() && a.sent_us >= from)
            .map(|a| a.answered_us - a.sent_us)
            .collect();
        times.sort_unstable();
        let end = self.0.iter().map(|a| a.answered_us).max().unwrap_or(from);
        let span = Duration::from_micros(end.saturating_sub(from)).as_secs_f64();
        let at = |q: f64| {
            let i = ((times.len() as f64 * q) as usize).min(times.len().saturating_sub(1));
            Duration::from_micros(times.get(i).copied().unwrap_or(0))
        };
        let rate = if span > 0.0 {
            times.len() as f64 / span
        } else {
            0.0
        };
        (rate, at(0.5), at(0.99))
    }

    /// The longest time without any 2xx around a fault: from the last 2xx answered before
    /// `fault_us` to the first one answered after `back_us`.
    pub(super) fn silence(&self, fault_us: u64, back_us: u64) -> Option<Duration> {
        let before = self
            .0
            .iter()
            .filter(|a| a.ok() && a.answered_us <= fault_us)
            .map(|a| a.answered_us)
            .max()?;
        let after = self
            .0
            .iter()
            .filter(|a| a.ok() && a.answered_us >= back_us)
            .map(|a| a.answered_us)
            .min()?;
        Some(Duration::from_micros(after.saturating_sub(before)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(id: &str, sent: u64, answered: u64, status: Option<u16>) -> Answer {
        Answer {
            event_id: id.into(),
            sent_us: sent,
            answered_us: answered,
            status,
        }
    }

    #[test]
    fn recovery_and_silence_read_the_answers() {
        let answers = Answers(vec![
            a("e1", 0, 100, Some(204)),
            a("e2", 150, 900, Some(503)),
            a("e3", 200, 1_200, None),
            // Sent before the database came back, answered after: not a recovery.
            a("e4", 950, 1_500, Some(204)),
            a("e5", 1_100, 1_700, Some(204)),
        ]);
        assert_eq!(answers.acked_ids().collect::<Vec<_>>(), ["e1", "e4", "e5"]);
        assert_eq!(answers.failures(), (1, 1));
        assert_eq!(answers.recovery(1_000), Some(Duration::from_micros(700)));
        assert_eq!(answers.recovery(2_000), None);
        assert_eq!(
            answers.silence(120, 1_000),
            Some(Duration::from_micros(1_400))
        );
    }
}
