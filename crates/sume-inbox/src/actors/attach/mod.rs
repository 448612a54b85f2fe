//! The attach actor: applies waiting events to their jobs as soon as both exist.
//!
//! It learns of work three ways: ingest tells it which jobs got new events; PostgreSQL tells it
//! which job rows committed (the `sume_jobs` notification of the insert trigger, received on a
//! dedicated LISTEN connection); and a periodic catch-up scan finds waiting events whose job row
//! exists, covering a notification lost while the connection was down, or a crash. Behind a
//! transaction pooler without LISTEN_DATABASE_URL there is no LISTEN: the scan (every second by
//! default there) is how a job row committed after its events is found. Every path
//! ends in [`Store::attach_jobs`], which is idempotent and safe beside other instances.
//!
//! ## Which of ingest's hints need the database
//! Ingest's insert answers, for each new event, whether its job's row existed in the insert's
//! snapshot. Those jobs are attached. A job whose row did not exist then can only have been
//! registered since, and that registration's notification reaches this task too: if it came
//! first, the job is among the recently registered (`Recent`) and is attached; if it comes
//! later, attaching it then sees the event, committed before its hint was sent. So a hint for
//! a job neither known to the insert nor registered recently is dropped without asking the
//! database: the race the daemon exists for (events before their row) costs no query per
//! batch. Where notifications may have been missed (no LISTEN connection, or one younger than
//! [`HINT_WINDOW`], which may have come up after such a registration) every hint is checked.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::actors::supervision::Actor;
use crate::config::AttachConfig;
use crate::db::{AttachReport, DbError, Store};
use crate::metrics::Metrics;
use std::sync::Arc;

/// How long a registration's notification is remembered, and how long after LISTEN comes up
/// every hint is still checked: far longer than an ingest statement between its snapshot and
/// its commit, which is the window a registration can fall into unseen by both sides. A longer
/// statement leaves its events to the catch-up scan.
pub const HINT_WINDOW: Duration = Duration::from_secs(10);

mod job_listener;
mod recent;

pub use job_listener::JobListener;
use recent::Recent;

enum Msg {
    /// Events were stored for these jobs, each with whether its row existed then.
    Stored(Vec<(String, bool)>),
    /// These job rows were committed (their notification).
    Registered(Vec<String>),
    /// The LISTEN connection is up (`true`: catch up now, notifications flow again) or lost.
    Listening(bool),
    /// Jobs to attach now; the caller waits.
    Now(
        Vec<String>,
        oneshot::Sender<Result<AttachReport, AttachError>>,
    ),
}

/// Why [`AttachHandle::attach_now`] could not report an attach.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AttachError {
    /// The attach task has ended (shutdown).
    #[error("attach task stopped")]
    Stopped,
    /// The attach transaction failed; the catch-up scan retries it.
    #[error("attach failed: {0}")]
    Failed(Arc<DbError>),
}

/// How other actors reach the attach task. Cheap to clone.
#[derive(Clone)]
pub struct AttachHandle {
    tx: mpsc::Sender<Msg>,
}

impl AttachHandle {
    /// Hints that events were stored for these jobs, each with whether its row existed in the
    /// storing statement's snapshot. Never waits: when the queue is full the hint is dropped,
    /// and the catch-up scan finds the work instead.
    pub fn stored(&self, jobs: Vec<(String, bool)>) {
        if !jobs.is_empty() {
            self.hint(Msg::Stored(jobs));
        }
    }

    /// Hints that these job rows were committed; as [`AttachHandle::stored`].
    pub fn registered(&self, job_ids: Vec<String>) {
        if !job_ids.is_empty() {
            self.hint(Msg::Registered(job_ids));
        }
    }

    fn hint(&self, msg: Msg) {
        if self.tx.try_send(msg).is_err() {
            tracing::debug!("attach queue full; leaving the work to the catch-up scan");
        }
    }

    /// Attaches these jobs and waits until it is done.
    pub async fn attach_now(&self, job_ids: Vec<String>) -> Result<AttachReport, AttachError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::Now(job_ids, tx))
            .await
            .map_err(|_| AttachError::Stopped)?;
        rx.await.map_err(|_| AttachError::Stopped)?
    }
}

/// The attach actor: applies waiting events to jobs whose rows exist, when told (ingest's
/// hints, the job rows' notifications, `attach_now`) and on a catch-up ticker. Its LISTEN
/// connection is an actor of its own, [`JobListener`].
pub struct Attach {
    store: Store,
    metrics: Arc<Metrics>,
    config: AttachConfig,
    rx: mpsc::Receiver<Msg>,
    /// Since when notifications have been flowing; `None` while there is no LISTEN connection.
    listening_since: Option<Instant>,
    recent: Recent,
}

impl Attach {
    /// The actor and the handle other tasks reach it by.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        config: AttachConfig,
    ) -> (Attach, AttachHandle) {
        let (tx, rx) = mpsc::channel(4096);
        let handle = AttachHandle { tx };
        (
            Attach {
                store,
                metrics,
                config,
                rx,
                listening_since: None,
                recent: Recent::default(),
            },
            handle,
        )
    }

    /// One loop over the queue and the catch-up ticker, until `stop`.
    async fn serve(mut self, stop: CancellationToken) {
        let mut ticker = tokio::time::interval(self.config.scan_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = ticker.tick() => {
                    if let Err(e) = self.catch_up().await {
                        tracing::warn!(error = %e, "attach catch-up scan failed; will retry");
                    }
                }
                Some(msg) = self.rx.recv() => self.handle(msg).await,
            }
        }
    }

    /// Takes `first` and whatever else is queued, and attaches it all in batches.
    async fn handle(&mut self, first: Msg) {
        let mut ids = BTreeSet::new();
        let mut waiters = Vec::new();
        let mut catch_up = false;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            let now = Instant::now();
            match msg {
                Msg::Stored(jobs) => {
                    let check_all = self
                        .listening_since
                        .is_none_or(|since| now.duration_since(since) < HINT_WINDOW);
                    for (job_id, known) in jobs {
                        if known || check_all || self.recent.contains(&job_id, now) {
                            ids.insert(job_id);
                        } else {
                            self.metrics.attach_hints_skipped.inc();
                        }
                    }
                }
                Msg::Registered(j) => {
                    for job_id in &j {
                        self.recent.insert(job_id, now);
                    }
                    ids.extend(j);
                }
                Msg::Now(j, done) => {
                    ids.extend(j);
                    waiters.push(done);
                }
                Msg::Listening(true) => {
                    self.listening_since = Some(now);
                    catch_up = true;
                }
                Msg::Listening(false) => self.listening_since = None,
            }
            if ids.len() < self.config.batch_max {
                next = self.rx.try_recv().ok();
            }
        }
        let ids: Vec<String> = ids.into_iter().collect();
        let mut total = AttachReport::default();
        let mut failure = None;
        for chunk in ids.chunks(self.config.batch_max.max(1)) {
            match self
                .store
                .attach_jobs(chunk)
                .instrument(attach_span(chunk))
                .await
            {
                Ok(report) => {
                    self.observe(&report);
                    total.merge(report)
                }
                Err(e) => {
                    tracing::warn!(error = %e, jobs = chunk.len(), "attach failed; the catch-up scan will retry");
                    failure = Some(Arc::new(e));
                }
            }
        }
        log_report(&total);
        for done in waiters {
            let _ = done.send(match &failure {
                Some(e) => Err(AttachError::Failed(e.clone())),
                None => Ok(total.clone()),
            });
        }
        if catch_up {
            if let Err(e) = self.catch_up().await {
                tracing::warn!(error = %e, "attach catch-up scan failed; will retry");
            }
        }
    }

    fn observe(&self, report: &AttachReport) {
        self.metrics.closed("webhook", report.closed.len() as u64);
        self.metrics
            .disagreements_seen
            .inc_by(report.disagreements as u64);
        for latency in &report.closed_latency {
            self.metrics.attach_latency_seconds.observe(*latency);
        }
    }

    /// One catch-up pass: attaches every job with a row and waiting events, in batches.
    pub async fn catch_up(&self) -> Result<AttachReport, DbError> {
        let limit = self.config.batch_max.max(1) as i64;
        let mut total = AttachReport::default();
        loop {
            let found = self.store.events_attachable_scan(limit).await?;
            let full = found.more;
            if found.job_ids.is_empty() {
                break;
            }
            let report = self
                .store
                .attach_jobs(&found.job_ids)
                .instrument(attach_span(&found.job_ids))
                .await?;
            self.observe(&report);
            let progressed = report.events_applied > 0;
            total.merge(report);
            // Stop when the scan came back short, or nothing moved (another instance holds
            // these jobs right now; the next tick will see).
            if !full || !progressed {
                break;
            }
        }
        if total.events_applied > 0 {
            tracing::info!(
                jobs = total.jobs,
                events = total.events_applied,
                "catch-up scan attached waiting events"
            );
        }
        Ok(total)
    }
}

impl Actor for Attach {
    fn name(&self) -> String {
        "attach".into()
    }

    async fn run(self, stop: CancellationToken) {
        self.serve(stop).await
    }
}

/// One attach transaction's span (traces exported); its closes are its children.
fn attach_span(job_ids: &[String]) -> tracing::Span {
    crate::process::traces::span!(
        "attach",
        otel.name = "attach",
        sume.jobs = crate::process::traces::int(job_ids.len())
    )
}

fn log_report(r: &AttachReport) {
    if r.events_applied > 0 {
        tracing::debug!(
            jobs = r.jobs,
            events = r.events_applied,
            closed = r.closed.len(),
            "attached"
        );
    }
}
