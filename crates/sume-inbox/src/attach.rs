//! The attach actor: applies waiting events to their jobs as soon as both exist.
//!
//! It learns of work three ways: ingest tells it which jobs got new events; PostgreSQL tells it
//! which job rows committed (the `sume_jobs` notification of the insert trigger, received on a
//! dedicated LISTEN connection); and a periodic catch-up scan finds waiting events whose job row
//! exists, covering a notification lost while the connection was down, or a crash. Behind a
//! transaction pooler without LISTEN_DATABASE_URL there is no LISTEN: the scan (every second by
//! default there) is how a job row committed after its events is found. Every path
//! ends in [`Store::attach_jobs`], which is idempotent and safe beside other instances.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::config::AttachConfig;
use crate::db::{AttachReport, DbError, Store};
use crate::health::{Health, TaskGuard};
use crate::metrics::Metrics;
use std::sync::Arc;

enum Msg {
    /// Jobs that may have work; nobody waits for the answer.
    Jobs(Vec<String>),
    /// Jobs to attach now; the caller waits.
    Now(
        Vec<String>,
        oneshot::Sender<Result<AttachReport, AttachError>>,
    ),
    /// Run the catch-up scan now (after the LISTEN connection was re-established).
    CatchUp,
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
    /// Hints that these jobs may have work. Never waits: when the queue is full the hint is
    /// dropped, and the catch-up scan finds the work instead.
    pub fn notify(&self, job_ids: Vec<String>) {
        if job_ids.is_empty() {
            return;
        }
        if self.tx.try_send(Msg::Jobs(job_ids)).is_err() {
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
/// hints, the job rows' notifications, `attach_now`) and on a catch-up ticker.
pub struct Attach {
    store: Store,
    metrics: Arc<Metrics>,
    config: AttachConfig,
    tx: mpsc::Sender<Msg>,
    rx: mpsc::Receiver<Msg>,
}

impl Attach {
    /// The actor and the handle other tasks reach it by.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        config: AttachConfig,
    ) -> (Attach, AttachHandle) {
        let (tx, rx) = mpsc::channel(4096);
        let handle = AttachHandle { tx: tx.clone() };
        (
            Attach {
                store,
                metrics,
                config,
                tx,
                rx,
            },
            handle,
        )
    }

    /// Runs until `shutdown`: the LISTEN connection on a task of its own (unless the store has
    /// none: behind a transaction pooler without LISTEN_DATABASE_URL), and here one loop over
    /// the queue and the catch-up ticker.
    pub async fn run(mut self, shutdown: CancellationToken, health: Health) {
        let guard = health.task("attach");
        let listener = self.store.can_listen().then(|| {
            tokio::spawn(listen(
                self.store.clone(),
                AttachHandle {
                    tx: self.tx.clone(),
                },
                shutdown.clone(),
                health.task("attach-listen"),
            ))
        });
        let mut ticker = tokio::time::interval(self.config.scan_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticker.tick() => {
                    if let Err(e) = self.catch_up().await {
                        tracing::warn!(error = %e, "attach catch-up scan failed; will retry");
                    }
                }
                Some(msg) = self.rx.recv() => self.handle(msg).await,
            }
        }
        if let Some(listener) = listener {
            let _ = listener.await;
        }
        guard.finished();
    }

    /// Takes `first` and whatever else is queued, and attaches it all in batches.
    async fn handle(&mut self, first: Msg) {
        let mut ids = BTreeSet::new();
        let mut waiters = Vec::new();
        let mut catch_up = false;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Jobs(j) => ids.extend(j),
                Msg::Now(j, done) => {
                    ids.extend(j);
                    waiters.push(done);
                }
                Msg::CatchUp => catch_up = true,
            }
            if ids.len() < self.config.batch_max {
                next = self.rx.try_recv().ok();
            }
        }
        let ids: Vec<String> = ids.into_iter().collect();
        let mut total = AttachReport::default();
        let mut failure = None;
        for chunk in ids.chunks(self.config.batch_max.max(1)) {
            match self.store.attach_jobs(chunk).await {
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
            let report = self.store.attach_jobs(&found.job_ids).await?;
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

/// Keeps a LISTEN connection open, forwarding each notification; reconnects with backoff and
/// asks for a catch-up scan after every (re)connect, since notifications sent while it was
/// down are gone.
async fn listen(store: Store, attach: AttachHandle, shutdown: CancellationToken, guard: TaskGuard) {
    let mut backoff = Duration::from_millis(250);
    while !shutdown.is_cancelled() {
        match listen_once(&store, &attach, &shutdown).await {
            Ok(()) => backoff = Duration::from_millis(250),
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "LISTEN connection lost");
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
    guard.finished();
}

async fn listen_once(
    store: &Store,
    attach: &AttachHandle,
    shutdown: &CancellationToken,
) -> Result<(), DbError> {
    let mut listener = store.jobs_listen().await?;
    tracing::debug!("listening for job rows");
    let _ = attach.tx.send(Msg::CatchUp).await;
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            n = listener.job_ids.recv_many(&mut batch, 1024) => {
                if n == 0 {
                    break;
                }
                attach.notify(std::mem::take(&mut batch));
            }
        }
    }
    drop(listener.client);
    match listener.connection.await {
        Ok(Err(e)) => Err(DbError::Connect(e)),
        _ => Err(DbError::Closed),
    }
}
