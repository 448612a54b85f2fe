//! Prometheus metrics, served as text at `GET /metrics` on ADMIN_ADDR.
//!
//! Counters and histograms are this instance's; the gauges read from the database at scrape
//! time (inbox depth, oldest waiting event, dead letters, orphans, disagreements, open jobs)
//! are the fleet's, so any one instance answers for all of them.

use std::fmt::Write;
use std::time::Duration;

use crate::db::Store;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

mod known;
mod labels;
mod port;
mod register;

pub use labels::*;
pub use port::PortMetrics;

/// Every metric of this instance, and the registry `/metrics` encodes. The public fields are
/// what the actors count; the gauges are set at scrape time by [`Metrics::render`].
pub struct Metrics {
    registry: Registry,
    /// When this instance started (Unix seconds): its counters stood at 0 then.
    start_time_seconds: Gauge<f64, AtomicU64>,
    /// Deliveries by how they were answered.
    pub webhooks: Family<OutcomeLabels, Counter>,
    /// Verified deliveries by the secret that verified them (watch a rotation with it).
    pub webhooks_by_secret: Family<SecretLabels, Counter>,
    /// Verified deliveries whose `X-Sume-Event-Id` names another event than their body's id.
    pub event_id_mismatch: Counter,
    /// This instance's clock minus the signed timestamp of the last verified delivery
    /// (seconds; negative when it was signed "in the future").
    pub webhook_clock_skew: Gauge<f64, AtomicU64>,
    /// Deliveries per ingest transaction.
    pub ingest_batch_size: Histogram,
    /// Time to write and commit one ingest batch.
    pub ingest_commit_seconds: Histogram,
    /// From an event stored to its job closed by it.
    pub attach_latency_seconds: Histogram,
    /// Jobs closed, by what closed them.
    pub jobs_closed: Family<ClosedLabels, Counter>,
    /// Events set aside as not ours.
    pub events_set_aside: Counter,
    /// Orphan verdicts made.
    pub orphans_found: Counter,
    /// Events whose job never got a row, moved from the inbox to the dead letters after
    /// ORPHAN_RETENTION.
    pub orphan_events_expired: Counter,
    /// Terminal observations that contradicted a job's final state.
    pub disagreements_seen: Counter,
    /// Statuses from Sume this version does not know (read as in flight), by where.
    pub unknown_statuses: Family<StatusSourceLabels, Counter>,
    /// Ingest's hints for jobs with no row, answered without the database (no registration
    /// since; see attach.rs).
    pub attach_hints_skipped: Counter,
    /// Blind give-ups asked about again, by what came of it.
    pub give_up_rechecks: Family<RecheckLabels, Counter>,
    /// Reads of Sume's jobs, by way (one job, or a page of the list).
    pub sume_reads: Family<ReadLabels, Counter>,
    /// Open jobs each list page settled (seen there, and due).
    pub list_page_settled: Histogram,
    /// Calls to Sume's API by key and answer.
    pub sume_requests: Family<ApiLabels, Counter>,
    /// 429 answers from Sume.
    pub sume_rate_limited: Counter,
    /// 402 (out of credits) and 403 (a key without the scope) answers from Sume, by key and
    /// code: never a verdict on a job, retried later, alerted on.
    pub sume_refused: Family<ApiLabels, Counter>,
    /// Seconds spent waiting for the fleet-wide request budget.
    pub rate_budget_wait_seconds: Counter<f64, AtomicU64>,
    /// Rows removed by retention.
    pub retention_removed: Counter,
    /// 1 while 404s from Sume are not taken as verdicts (a key failed its check, or the
    /// breaker is open).
    pub sume_api_verdicts_held: Gauge,
    sume_api_key_usable: Family<KeyLabels, Gauge>,
    reads_left_today: Family<KeyLabels, Gauge>,
    /// Connections open on the public port now.
    pub port_connections_open: Gauge,
    /// Connections closed at MAX_CONNECTIONS because they lingered after an answer given with
    /// their body unread, or were still sending (or had not started) their request headers, to
    /// make room for a new one.
    pub port_connections_shed: Counter,
    /// New connections closed at once at MAX_CONNECTIONS, when none could be shed.
    pub port_connections_refused: Counter,
    /// Connections closed (or requests answered 408) by a timeout, by which one.
    pub port_timeouts: Family<TimeoutLabels, Counter>,
    /// Requests answered 503 at once because MAX_IN_FLIGHT were being handled.
    pub port_in_flight_refused: Counter,
    /// Connections opened with a protocol the port does not speak, answered 505 and closed.
    pub port_protocols_refused: Family<ProtocolLabels, Counter>,
    /// Connections answered with their request body unread, reading what the client still
    /// sends before they close ([`crate::http::linger`]).
    pub port_lingering: Gauge,
    /// Those lingers ended, by what ended them.
    pub port_lingers: Family<LingerLabels, Counter>,
    /// Webhooks answered 503 because their next bytes did not fit in MAX_BODY_MEMORY and no
    /// other body still being read could make room.
    pub port_body_memory_refused: Counter,
    /// Webhooks still reading their body, cancelled (503) for a newer request: for its
    /// connection at MAX_CONNECTIONS, its slot at MAX_IN_FLIGHT, or its bytes under
    /// MAX_BODY_MEMORY.
    pub port_bodies_shed: Counter,
    /// The admin port's connections, timeouts and refusals.
    pub admin_port: PortMetrics,
    /// Requests waiting for a job to close on this instance (set at scrape time).
    pub waiters: Gauge,
    /// Waits refused with 503 because MAX_WAITERS were waiting.
    pub waiters_refused: Counter,
    db_up: Gauge,
    inbox_waiting: Gauge,
    inbox_oldest_age_seconds: Gauge<f64, AtomicU64>,
    dead_letters: Gauge,
    orphan_jobs: Gauge,
    disagreements: Gauge,
    open_jobs: Gauge,
    /// Open jobs naming an `api_key` this instance does not have (set by the heartbeat).
    pub open_jobs_unknown_key: Gauge,
    notification_queue_usage: Gauge<f64, AtomicU64>,
    pool_in_use: Gauge,
    pool_idle: Gauge,
    pool_waiting: Gauge,
    tasks_dead: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric at zero, registered under the `sume_inbox_` prefix; the series of every
    /// label value known without the settings exist from now, at 0 ([`Metrics::for_instance`]
    /// adds those of the settings).
    pub fn new() -> Metrics {
        let mut m = Metrics {
            start_time_seconds: Gauge::default(),
            webhooks: Family::default(),
            webhooks_by_secret: Family::default(),
            event_id_mismatch: Counter::default(),
            webhook_clock_skew: Gauge::default(),
            ingest_batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 11)),
            ingest_commit_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            attach_latency_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 18)),
            jobs_closed: Family::default(),
            events_set_aside: Counter::default(),
            orphans_found: Counter::default(),
            orphan_events_expired: Counter::default(),
            disagreements_seen: Counter::default(),
            unknown_statuses: Family::default(),
            attach_hints_skipped: Counter::default(),
            give_up_rechecks: Family::default(),
            sume_reads: Family::default(),
            list_page_settled: Histogram::new([0.0, 1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 100.0]),
            sume_requests: Family::default(),
            sume_rate_limited: Counter::default(),
            sume_refused: Family::default(),
            rate_budget_wait_seconds: Counter::default(),
            retention_removed: Counter::default(),
            sume_api_verdicts_held: Gauge::default(),
            sume_api_key_usable: Family::default(),
            reads_left_today: Family::default(),
            port_connections_open: Gauge::default(),
            port_connections_shed: Counter::default(),
            port_connections_refused: Counter::default(),
            port_timeouts: Family::default(),
            port_in_flight_refused: Counter::default(),
            port_protocols_refused: Family::default(),
            port_lingering: Gauge::default(),
            port_lingers: Family::default(),
            port_body_memory_refused: Counter::default(),
            port_bodies_shed: Counter::default(),
            admin_port: PortMetrics::default(),
            waiters: Gauge::default(),
            waiters_refused: Counter::default(),
            db_up: Gauge::default(),
            inbox_waiting: Gauge::default(),
            inbox_oldest_age_seconds: Gauge::default(),
            dead_letters: Gauge::default(),
            orphan_jobs: Gauge::default(),
            disagreements: Gauge::default(),
            open_jobs: Gauge::default(),
            open_jobs_unknown_key: Gauge::default(),
            notification_queue_usage: Gauge::default(),
            pool_in_use: Gauge::default(),
            pool_idle: Gauge::default(),
            pool_waiting: Gauge::default(),
            tasks_dead: Gauge::default(),
            registry: Registry::with_prefix("sume_inbox"),
        };
        let mut registry = std::mem::take(&mut m.registry);
        m.register_counters(&mut registry);
        m.register_gauges(&mut registry);
        m.count_from_zero();
        Metrics { registry, ..m }
    }

    /// Counts a delivery by how it was answered.
    pub fn webhook(&self, outcome: WebhookOutcome) {
        self.webhooks
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Counts a connection closed, or a request refused, by the timer `kind`.
    pub fn port_timeout(&self, kind: TimeoutKind) {
        self.port_timeouts
            .get_or_create(&TimeoutLabels { kind })
            .inc();
    }

    /// Counts a delivery verified by the secret at `index` of SUME_WEBHOOK_SECRET.
    pub fn verified_by(&self, index: usize) {
        self.webhooks_by_secret
            .get_or_create(&SecretLabels {
                secret: index.to_string(),
            })
            .inc();
    }

    /// Counts `n` jobs closed by `by` (`webhook`, `poll`, `give_up`).
    pub fn closed(&self, by: &str, n: u64) {
        if n > 0 {
            self.jobs_closed
                .get_or_create(&ClosedLabels { by: by.to_owned() })
                .inc_by(n);
        }
    }

    /// Counts a call to Sume's API with key `key` answered `code`.
    pub fn sume_request(&self, key: &str, code: &str) {
        self.sume_requests
            .get_or_create(&ApiLabels {
                key: key.to_owned(),
                code: code.to_owned(),
            })
            .inc();
    }

    /// Counts a read of Sume's jobs, by the way it went.
    pub fn sume_read(&self, way: ReadWay) {
        self.sume_reads.get_or_create(&ReadLabels { way }).inc();
    }

    /// This instance's reads of Sume's jobs since its start, by the way they went.
    pub fn sume_reads_of(&self, way: ReadWay) -> u64 {
        self.sume_reads.get_or_create(&ReadLabels { way }).get()
    }

    /// Counts a status this version does not know, read at `source`.
    pub fn unknown_status(&self, source: StatusSource) {
        self.unknown_statuses
            .get_or_create(&StatusSourceLabels { source })
            .inc();
    }

    /// Counts a call to Sume answered `code`, and a refusal (402, 403) apart; answers whether
    /// it was one.
    pub fn sume_answered(&self, key: &str, code: &str) -> bool {
        self.sume_request(key, code);
        let refused = ApiLabels::REFUSED.contains(&code);
        if refused {
            self.sume_refused
                .get_or_create(&ApiLabels {
                    key: key.to_owned(),
                    code: code.to_owned(),
                })
                .inc();
        }
        refused
    }

    /// Records a key's last check.
    pub fn sume_api_key_usable(&self, key: &str, usable: bool) {
        self.sume_api_key_usable
            .get_or_create(&KeyLabels {
                key: key.to_owned(),
            })
            .set(usable.into());
    }

    /// Records the reads a key has left today.
    pub fn reads_left_today(&self, key: &str, left: i64) {
        self.reads_left_today
            .get_or_create(&KeyLabels {
                key: key.to_owned(),
            })
            .set(left);
    }

    /// Adds time spent waiting for the request budget.
    pub fn budget_waited(&self, waited: Duration) {
        if !waited.is_zero() {
            self.rate_budget_wait_seconds.inc_by(waited.as_secs_f64());
        }
    }

    /// Reads the fleet-wide gauges and renders everything in the Prometheus text format.
    pub async fn render(&self, store: &Store, dead_tasks: usize) -> String {
        self.tasks_dead.set(dead_tasks as i64);
        let status = store.pools_status();
        self.pool_in_use
            .set((status.size.saturating_sub(status.available)) as i64);
        self.pool_idle.set(status.available as i64);
        self.pool_waiting.set(status.waiting as i64);
        match tokio::time::timeout(Duration::from_secs(2), store.stats_gauges()).await {
            Ok(Ok(g)) => {
                self.db_up.set(1);
                self.inbox_waiting.set(g.waiting);
                self.inbox_oldest_age_seconds.set(g.oldest_age);
                self.dead_letters.set(g.dead_letters);
                self.orphan_jobs.set(g.orphans);
                self.disagreements.set(g.disagreements);
                self.open_jobs.set(g.open_jobs);
                self.notification_queue_usage.set(g.notification_queue);
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: database gauges unavailable");
                self.db_up.set(0);
            }
            Err(_) => {
                self.db_up.set(0);
            }
        }
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            let _ = writeln!(out, "# encoding failed: {e}");
        }
        out
    }
}
