//! The fleet task: once a minute this instance writes its heartbeat (host, pid, version, each
//! task's state) and what it counted since the last write (webhooks stored, duplicates, 401s,
//! 503s, closes by webhook, poll and give-up) to `sume.instances` and `sume.instance_minutes`,
//! with one statement. Any instance's console then shows every instance and the fleet's last
//! hour from those rows.
//!
//! Nothing is written per request: the counts are deltas of the Prometheus counters the
//! handlers already keep ([`crate::metrics`]), so a 401 costs an attacker no database write.
//! A delta leaves the counters for a list of pending minutes, each with its flush number, and
//! leaves that list only once a write of it committed: a write that fails (the database is
//! down) is retried with the next minute's, and a write whose commit happened but whose answer
//! was lost is recognised by its numbers and not counted twice. The database adds each minute's
//! counts to what it holds, so a minute written in several flushes adds up. The task also
//! writes a second after start and once at shutdown (the last, partial minute), and once an hour
//! removes minute rows older than [`KEEP_MINUTES_HOURS`] and instances unseen for
//! [`FORGET_INSTANCES_HOURS`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use tokio_util::sync::CancellationToken;

use crate::actors::supervision::{Actor, Health, TaskState};
use crate::config::FleetConfig;
use crate::db::clock::Clock;
use crate::db::{DbError, Heartbeat, MinuteCounts, PendingMinute, Store};
use crate::metrics::{ClosedLabels, Metrics, OutcomeLabels, WebhookOutcome};
use crate::process::log_budget::LogBudget;

/// The task's name among the instance's tasks.
pub const TASK: &str = "fleet";
/// Hours of minute rows kept.
pub const KEEP_MINUTES_HOURS: i32 = 48;
/// Hours after which an instance not seen is removed from the picture.
pub const FORGET_INSTANCES_HOURS: i32 = 7 * 24;
/// Minute rows removed per pruning statement.
const PRUNE_BATCH: i64 = 5_000;
/// How often old rows are pruned.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// The most pending minutes held while the database is down: the rows kept anyway.
const MAX_PENDING: usize = (KEEP_MINUTES_HOURS as usize) * 60;
/// How long after start the first write waits, so the instance's other tasks have started
/// and are in it.
const SETTLE: Duration = Duration::from_secs(1);
/// At most one warning about jobs naming unknown keys per ten minutes.
static UNKNOWN_KEYS_LOG: LogBudget = LogBudget::new(1, Duration::from_secs(600));
/// How long the last write at shutdown may take.
pub const LAST_FLUSH_TIMEOUT: Duration = Duration::from_secs(3);

/// What this instance counted so far, read from its Prometheus counters.
pub fn totals(metrics: &Metrics) -> MinuteCounts {
    let outcome = |outcome| {
        metrics
            .webhooks
            .get(&OutcomeLabels { outcome })
            .map_or(0, |c| c.get())
    };
    let closed = |by: &str| {
        metrics
            .jobs_closed
            .get(&ClosedLabels { by: by.to_owned() })
            .map_or(0, |c| c.get())
    };
    let unavailable = outcome(WebhookOutcome::unavailable)
        + metrics.port_in_flight_refused.get()
        + metrics.port_body_memory_refused.get()
        + metrics.port_bodies_shed.get();
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    MinuteCounts {
        stored: n(outcome(WebhookOutcome::stored)),
        duplicates: n(outcome(WebhookOutcome::duplicate)),
        unauthorized: n(outcome(WebhookOutcome::unauthorized)),
        unavailable: n(unavailable),
        closed_by_webhook: n(closed("webhook")),
        closed_by_poll: n(closed("poll")),
        given_up: n(closed("give_up")),
    }
}

/// What the task carries between flushes.
#[derive(Debug)]
struct Ledger {
    /// The counters' totals when the last delta was taken.
    taken: MinuteCounts,
    /// When that was.
    since: DateTime<Utc>,
    /// The next flush number.
    next_seq: i64,
    /// Deltas not yet written.
    pending: Vec<PendingMinute>,
}

/// The fleet task of one instance; cheap to clone.
#[derive(Clone)]
pub struct Fleet {
    store: Store,
    metrics: Arc<Metrics>,
    health: Health,
    identity: Arc<Heartbeat>,
    clock: Clock,
    ledger: Arc<Mutex<Ledger>>,
    config: FleetConfig,
}

impl Fleet {
    /// The task of the instance named `instance` (its lease owner name), started now.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        health: Health,
        instance: &str,
        clock: Clock,
    ) -> Fleet {
        let started = clock.now().unwrap_or_else(Utc::now);
        let identity = Heartbeat {
            instance: instance.to_owned(),
            hostname: crate::process::instance_name::kernel_hostname()
                .unwrap_or_else(|| "unknown".into()),
            pid: std::process::id() as i32,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: started,
            tasks: serde_json::Value::Null,
            api_keys: Vec::new(),
        };
        // From zero: the metrics are this process's, so whatever they counted before the
        // task started belongs to its first minute.
        let ledger = Ledger {
            taken: MinuteCounts::default(),
            since: started,
            next_seq: 1,
            pending: Vec::new(),
        };
        Fleet {
            store,
            metrics,
            health,
            identity: Arc::new(identity),
            clock,
            ledger: Arc::new(Mutex::new(ledger)),
            config: FleetConfig::default(),
        }
    }

    /// The same, writing as often as `config` says.
    pub fn with_config(self, config: FleetConfig) -> Fleet {
        Fleet { config, ..self }
    }

    /// The same, for an instance whose SUME_API_KEYS have these names: written with every
    /// heartbeat, and open jobs naming any other key are reported each minute.
    pub fn with_api_keys(self, names: Vec<String>) -> Fleet {
        let identity = Heartbeat {
            api_keys: names,
            ..(*self.identity).clone()
        };
        Fleet {
            identity: Arc::new(identity),
            ..self
        }
    }

    /// Counts the open jobs naming a key this instance does not have (the gauge
    /// `sume_inbox_open_jobs_unknown_key`) and names them in a warning, at most every ten
    /// minutes: without this they would only never be polled.
    pub async fn report_unknown_keys(&self) -> Result<i64, DbError> {
        let unknown = self
            .store
            .jobs_open_unknown_keys(&self.identity.api_keys)
            .await?;
        let jobs: i64 = unknown.iter().map(|(_, n)| n).sum();
        self.metrics.open_jobs_unknown_key.set(jobs);
        if jobs > 0 {
            if let Some(left_out) = UNKNOWN_KEYS_LOG.allow() {
                let keys: Vec<&str> = unknown.iter().map(|(k, _)| k.as_str()).collect();
                tracing::warn!(
                    jobs,
                    keys = keys.join(","),
                    configured = self.identity.api_keys.join(","),
                    left_out,
                    "open jobs name an api_key this instance does not have (SUME_API_KEYS): it never polls them"
                );
            }
        }
        Ok(jobs)
    }

    /// The instance's name.
    pub fn instance(&self) -> &str {
        &self.identity.instance
    }

    /// Moves what was counted since the last take into the pending minutes: the whole delta
    /// goes to the minute holding the middle of the time it covers (a flush on a minute
    /// boundary writes the minute that just ended).
    fn take(&self) {
        let now = self.clock.now().unwrap_or_else(Utc::now);
        let totals = totals(&self.metrics);
        let mut ledger = self.ledger.lock().expect("fleet ledger");
        let delta = totals.combine(&ledger.taken, -1);
        let middle = ledger.since + (now - ledger.since) / 2;
        ledger.taken = totals;
        ledger.since = now;
        if delta.is_zero() {
            return;
        }
        let minute = middle
            .duration_trunc(chrono::Duration::minutes(1))
            .unwrap_or(middle);
        let seq = ledger.next_seq;
        ledger.next_seq += 1;
        ledger.pending.push(PendingMinute {
            seq,
            minute,
            counts: delta,
        });
        if ledger.pending.len() > MAX_PENDING {
            let over = ledger.pending.len() - MAX_PENDING;
            ledger.pending.drain(..over);
            tracing::warn!(
                dropped = over,
                "fleet: the oldest unwritten minutes were dropped"
            );
        }
    }

    /// The instance's tasks and their states; `last` says this task is finishing.
    fn tasks(&self, last: bool) -> serde_json::Value {
        let mut tasks: BTreeMap<String, &str> = self
            .health
            .snapshot()
            .into_iter()
            .map(|(name, state)| (name, state.as_str()))
            .collect();
        if last {
            tasks.insert(TASK.to_owned(), TaskState::Finished.as_str());
        }
        serde_json::json!(tasks)
    }

    /// One flush: takes the delta, writes the heartbeat and every pending minute; answers the
    /// minute rows written. On failure the pending minutes stay for the next flush.
    pub async fn flush(&self) -> Result<u64, DbError> {
        self.flush_as(false).await
    }

    async fn flush_as(&self, last: bool) -> Result<u64, DbError> {
        self.take();
        let pending = self.ledger.lock().expect("fleet ledger").pending.clone();
        let beat = Heartbeat {
            tasks: self.tasks(last),
            ..(*self.identity).clone()
        };
        let written = self
            .store
            .instances_flush(&beat, &pending, &self.clock)
            .await?;
        // Only what was written leaves the list; a take in between added after it.
        let mut ledger = self.ledger.lock().expect("fleet ledger");
        ledger.pending.retain(|p| !pending.contains(p));
        Ok(written)
    }

    /// Counts not written yet (waiting for the database), summed.
    pub fn unwritten(&self) -> MinuteCounts {
        let ledger = self.ledger.lock().expect("fleet ledger");
        ledger
            .pending
            .iter()
            .fold(MinuteCounts::default(), |sum, p| sum.combine(&p.counts, 1))
    }

    /// Removes old minute rows and long-unseen instances.
    pub async fn prune(&self) -> Result<u64, DbError> {
        let minutes = self
            .store
            .instance_minutes_prune(KEEP_MINUTES_HOURS, PRUNE_BATCH, &self.clock)
            .await?;
        let instances = self
            .store
            .instances_prune(FORGET_INSTANCES_HOURS, &self.clock)
            .await?;
        Ok(minutes + instances)
    }
}

impl Actor for Fleet {
    fn name(&self) -> String {
        TASK.into()
    }

    /// Flushes a second after start, every `config.interval` (on its boundaries), and a last
    /// time when `stop` is cancelled; prunes at start and hourly. Start it on tasks of its own,
    /// stopped after the others, so that its last write shows them finished.
    async fn run(self, stop: CancellationToken) {
        let config = self.config.clone();
        let mut pruned_at: Option<tokio::time::Instant> = None;
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(SETTLE.min(config.interval)) => {}
        }
        while !stop.is_cancelled() {
            if let Err(e) = self.flush().await {
                tracing::warn!(error = %e, "fleet: heartbeat not written; counts kept for the next");
            }
            if let Err(e) = self.report_unknown_keys().await {
                tracing::warn!(error = %e, "fleet: open jobs' keys not read");
            }
            if pruned_at.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
                pruned_at = Some(tokio::time::Instant::now());
                match self.prune().await {
                    Ok(n) if n > 0 => tracing::info!(removed = n, "fleet: old minutes pruned"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "fleet: pruning failed"),
                }
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(until_boundary(config.interval)) => {}
            }
        }
        match tokio::time::timeout(LAST_FLUSH_TIMEOUT, self.flush_as(true)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "fleet: the last minute was not written"),
            Err(_) => tracing::warn!("fleet: the last minute was not written in time"),
        }
    }
}

/// The time to the next multiple of `interval` on the wall clock (the next minute boundary
/// for a minute); never under 100 ms, so a tiny interval cannot spin.
fn until_boundary(interval: Duration) -> Duration {
    let step = interval.as_millis().max(100);
    let now = Utc::now().timestamp_millis().max(0) as u128;
    Duration::from_millis((step - now % step) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_boundary_is_within_one_interval() {
        let d = until_boundary(Duration::from_secs(60));
        assert!(d > Duration::ZERO && d <= Duration::from_secs(60), "{d:?}");
    }

    #[test]
    fn totals_read_the_counters_and_503s_of_every_cause() {
        let m = Metrics::new();
        m.webhook(WebhookOutcome::stored);
        m.webhook(WebhookOutcome::unauthorized);
        m.webhook(WebhookOutcome::unauthorized);
        m.webhook(WebhookOutcome::unavailable);
        m.port_in_flight_refused.inc();
        m.port_bodies_shed.inc();
        m.closed("give_up", 3);
        let t = totals(&m);
        assert_eq!(
            t.values(),
            [1, 0, 2, 3, 0, 0, 3],
            "stored, duplicates, 401, 503, webhook, poll, give_up"
        );
    }
}
