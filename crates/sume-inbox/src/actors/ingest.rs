//! The ingest actor: writes verified deliveries to the inbox in batches, and answers each
//! request only after the transaction holding it has committed.
//!
//! HTTP handlers never touch the database. They send a [`Delivery`] with a `oneshot` over an
//! mpsc channel ([`IngestHandle`]); writer tasks take everything that has queued up (up to a
//! batch limit), store it in one transaction, then answer every waiting request. Several
//! writers share the channel, so while one commits the next is already collecting (for as long
//! as that commit, and up to as many deliveries as it holds: `ingest_pace.rs`): under load the
//! batches grow, and the cost of a commit is shared by many requests. Each new event's job id
//! goes to attach, with whether its row existed (the insert answers it). A delivery whose event
//! id is stored already for another job or status is answered [`Stored::IdReused`]: kept as a
//! dead letter by the store, counted, and logged here.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::SpanContext;
use sume_wire::{body_key, usable_id};
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::ingest_pace::Pace;
use crate::actors::attach::AttachHandle;
use crate::actors::supervision::Actor;
use crate::config::IngestConfig;
use crate::db::{NewDeadLetter, NewEvent, Store};
pub use crate::decisions::delivery::Delivery;
use crate::decisions::reused_id::EventFate;
use crate::metrics::Metrics;
use crate::process::log_budget::LogBudget;
use crate::process::traces;

/// Deliveries reusing a stored event id are counted always and logged at most this often (a
/// faulty sender, or a delivery replayed, can repeat them).
static REUSED_IDS_LOG: LogBudget = LogBudget::new(5, Duration::from_secs(1));

/// How a delivery was stored (every one of these is answered 2xx).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// A new event was stored.
    New,
    /// The event was stored already (a redelivery).
    Duplicate,
    /// A verified body that names no job, kept as a dead letter.
    DeadLettered,
    /// Its event id is stored already for another job, or for its job with another status:
    /// another event under that id, kept as a dead letter, never applied.
    IdReused,
}

/// The delivery could not be committed (the database refused or is unreachable): answer 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the inbox cannot take writes right now")]
pub struct Unavailable;

struct Request {
    delivery: Delivery,
    reply: oneshot::Sender<Result<Stored, Unavailable>>,
    /// The waiting request's span, for the commit's link (traces exported only).
    link: Option<SpanContext>,
}

/// The sending side, held by the HTTP handlers. When every handle is dropped, the writers
/// finish what is queued and stop.
#[derive(Clone)]
pub struct IngestHandle {
    tx: mpsc::Sender<Request>,
}

impl IngestHandle {
    /// Queues the delivery and waits for its commit; with traces exported, the commit's span
    /// links to the current one.
    pub async fn store(&self, delivery: Delivery) -> Result<Stored, Unavailable> {
        let (reply, answer) = oneshot::channel();
        let link = traces::context_of(&tracing::Span::current());
        self.tx
            .send(Request {
                delivery,
                reply,
                link,
            })
            .await
            .map_err(|_| Unavailable)?;
        answer.await.unwrap_or(Err(Unavailable))
    }
}

/// Webhooks answered 503 at INGEST_TIMEOUT are logged at most this often (under a held lock,
/// every one is).
static COMMIT_TIMEOUTS_LOG: LogBudget = LogBudget::new(1, Duration::from_secs(10));

/// Logs, at most once per 10 s, that a webhook waited `timeout` (INGEST_TIMEOUT) for its commit
/// and was answered 503: the writers' commits are not finishing in time. A batch that fails
/// logs its own error; a commit that only waits (for a lock, say) logs nothing else.
pub fn commit_timed_out(timeout: Duration) {
    if let Some(left_out) = COMMIT_TIMEOUTS_LOG.allow() {
        tracing::warn!(
            timeout_ms = timeout.as_millis() as u64,
            left_out,
            "webhook answered 503: its commit did not finish within INGEST_TIMEOUT; \
             look for a lock held on sume.events or a stuck transaction \
             (pg_stat_activity, pg_locks), or a database too slow"
        );
    }
}

/// The writers' side.
pub struct Ingest {
    store: Store,
    metrics: Arc<Metrics>,
    attach: AttachHandle,
    config: IngestConfig,
    rx: Arc<Mutex<mpsc::Receiver<Request>>>,
    pace: Pace,
}

impl Ingest {
    /// The writers' side and the handle the HTTP handlers send on; new events' job ids go to
    /// `attach` as hints once committed.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        attach: AttachHandle,
        config: IngestConfig,
    ) -> (Ingest, IngestHandle) {
        let (tx, rx) = mpsc::channel(config.batch_max.max(1) * 16);
        let ingest = Ingest {
            store: store.for_writers(),
            metrics,
            attach,
            config,
            rx: Arc::new(Mutex::new(rx)),
            pace: Pace::new(),
        };
        (ingest, IngestHandle { tx })
    }

    /// The number of writer tasks to spawn, each running [`Writer::run`].
    pub fn writers(&self) -> usize {
        self.config.writers
    }

    /// Writer number `index`, an actor of its own; several share one channel.
    pub fn writer(&self, index: usize) -> Writer {
        Writer {
            index,
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            attach: self.attach.clone(),
            batch_max: self.config.batch_max,
            rx: self.rx.clone(),
            pace: self.pace.clone(),
        }
    }
}

/// One writer task.
pub struct Writer {
    index: usize,
    store: Store,
    metrics: Arc<Metrics>,
    attach: AttachHandle,
    batch_max: usize,
    rx: Arc<Mutex<mpsc::Receiver<Request>>>,
    pace: Pace,
}

impl Actor for Writer {
    fn name(&self) -> String {
        format!("ingest-{}", self.index)
    }

    /// Runs until every [`IngestHandle`] is dropped and the queue is empty (after the public
    /// port has stopped, so start it with the token that stops the servers).
    async fn run(self, _stop: CancellationToken) {
        let mut batch: Vec<Request> = Vec::with_capacity(self.batch_max);
        loop {
            {
                let mut rx = self.rx.lock().await;
                if !self.pace.collect(&mut rx, &mut batch, self.batch_max).await {
                    break;
                }
            }
            let taken = std::mem::take(&mut batch);
            let _committing = self.pace.committing(taken.len());
            let commit = traces::span!(
                "inbox commit",
                otel.name = "inbox commit",
                sume.deliveries = traces::int(taken.len()),
            );
            for link in taken.iter().filter_map(|r| r.link.as_ref()) {
                traces::link(&commit, link);
            }
            self.write(taken).instrument(commit).await;
            batch.reserve(self.batch_max);
        }
    }
}

/// How a delivery whose event was written is answered.
fn stored_as(fate: &EventFate) -> Stored {
    match fate {
        EventFate::New { .. } => Stored::New,
        EventFate::Duplicate => Stored::Duplicate,
        EventFate::Reused { .. } => Stored::IdReused,
    }
}

/// Says, within [`REUSED_IDS_LOG`], which deliveries reuse a stored event id.
fn warn_reused(events: &[NewEvent], fates: &[EventFate]) {
    for (e, fate) in events.iter().zip(fates) {
        let EventFate::Reused {
            stored,
            dead_letter_id,
        } = fate
        else {
            continue;
        };
        if let Some(left_out) = REUSED_IDS_LOG.allow() {
            tracing::warn!(
                event_id = %e.event_id,
                job_id = %e.job_id,
                status = e.status.as_deref().unwrap_or("-"),
                stored_job_id = %stored.job_id,
                stored_status = stored.status.as_deref().unwrap_or("-"),
                %dead_letter_id,
                left_out,
                "a delivery's event id is already stored for another job or status; kept as a dead letter, not applied"
            );
        }
    }
}

impl Writer {
    /// Stores one batch and answers its requests.
    async fn write(&self, batch: Vec<Request>) {
        let mut events: Vec<NewEvent> = Vec::new();
        let mut dead: Vec<NewDeadLetter> = Vec::new();
        // Each event's request is answered by its own fate (an id may repeat: the store holds
        // each later delivery to the first); a dead letter's by its id's, written once.
        let mut waiting: Vec<(Slot, Reply)> = Vec::with_capacity(batch.len());
        let mut seen: HashSet<String> = HashSet::new();
        for Request {
            delivery, reply, ..
        } in batch
        {
            match delivery {
                Delivery::Event(e) => {
                    waiting.push((Slot::Event(events.len()), reply));
                    events.push(e);
                }
                Delivery::DeadLetter(d) => {
                    waiting.push((Slot::Dead(d.dead_letter_id.clone()), reply));
                    if seen.insert(d.dead_letter_id.clone()) {
                        dead.push(d);
                    }
                }
            }
        }
        self.metrics.ingest_batch_size.observe(waiting.len() as f64);
        let started = std::time::Instant::now();
        let written = self.store.write_inbox_batch(&events, &dead).await;
        self.metrics
            .ingest_commit_seconds
            .observe(started.elapsed().as_secs_f64());
        let fates: Fates = match written {
            Ok(fates) => {
                tracing::debug!(
                    events = events.len(),
                    dead = dead.len(),
                    new = fates
                        .iter()
                        .filter(|f| matches!(f, EventFate::New { .. }))
                        .count(),
                    "inbox batch committed"
                );
                self.settled(&events, &fates);
                self.store.note_writers_read_only(false);
                Fates {
                    events: fates.iter().map(|f| Ok(stored_as(f))).collect(),
                    dead: dead
                        .into_iter()
                        .map(|d| (d.dead_letter_id, Ok(Stored::DeadLettered)))
                        .collect(),
                }
            }
            Err(e) if e.is_bad_data() => {
                // One delivery the database refuses must not fail the others with it, nor
                // come back forever: store them one by one, and keep what cannot be stored
                // as an event as a dead letter.
                tracing::warn!(error = %e, "a delivery in the batch cannot be stored as it is; storing them one by one");
                self.write_one_by_one(events, dead).await
            }
            Err(e) => {
                if e.is_read_only() {
                    self.store.note_writers_read_only(true);
                }
                tracing::error!(error = %e, requests = waiting.len(), "inbox batch failed; answering 503");
                Fates::default()
            }
        };
        for (slot, reply) in waiting {
            let fate = match &slot {
                Slot::Event(i) => fates.events.get(*i).copied(),
                Slot::Dead(id) => fates.dead.get(id).copied(),
            };
            let _ = reply.send(fate.unwrap_or(Err(Unavailable)));
        }
    }

    /// What follows a written batch, on either path: attach hears of the new events, and the
    /// deliveries reusing a stored id are said.
    fn settled(&self, events: &[NewEvent], fates: &[EventFate]) {
        self.hint(events, fates);
        warn_reused(events, fates);
    }

    /// Sends attach the job of each new event, with whether its row existed.
    fn hint(&self, events: &[NewEvent], fates: &[EventFate]) {
        let jobs = events
            .iter()
            .zip(fates)
            .filter_map(|(e, fate)| match fate {
                EventFate::New { job_known } => Some((e.job_id.clone(), *job_known)),
                _ => None,
            })
            .collect();
        self.attach.stored(jobs);
    }

    /// The slow path of a batch the database refused for its data.
    async fn write_one_by_one(&self, events: Vec<NewEvent>, dead: Vec<NewDeadLetter>) -> Fates {
        let mut fates = Fates::default();
        for e in events {
            let one = std::slice::from_ref(&e);
            let fate = match self.store.write_inbox_batch(one, &[]).await {
                Ok(written) => {
                    self.settled(one, &written);
                    written.first().map(stored_as).ok_or(Unavailable)
                }
                Err(err) if err.is_bad_data() => {
                    tracing::warn!(event_id = %e.event_id, error = %err, "event cannot be stored as one; keeping it as a dead letter");
                    let letter = NewDeadLetter {
                        // An id the index may not hold is replaced by the body's hash.
                        dead_letter_id: if usable_id(&e.event_id) {
                            e.event_id
                        } else {
                            body_key(&e.body)
                        },
                        reason: format!("could not be stored as an event: {err}"),
                        body: e.body,
                        header_event_id: None,
                        signed_at: e.signed_at,
                        signature: e.signature,
                    };
                    self.store
                        .write_inbox_batch(&[], &[letter])
                        .await
                        .map(|_| Stored::DeadLettered)
                        .map_err(|_| Unavailable)
                }
                Err(_) => Err(Unavailable),
            };
            fates.events.push(fate);
        }
        for d in dead {
            let fate = self
                .store
                .write_inbox_batch(&[], std::slice::from_ref(&d))
                .await
                .map(|_| Stored::DeadLettered)
                .map_err(|_| Unavailable);
            fates.dead.insert(d.dead_letter_id, fate);
        }
        fates
    }
}

type Reply = oneshot::Sender<Result<Stored, Unavailable>>;

/// What answers a waiting request: its event's fate, by its place in the batch, or its dead
/// letter's, by the letter's id.
enum Slot {
    Event(usize),
    Dead(String),
}

/// The answers of a written batch: one per event, in the batch's order, and one per dead
/// letter id. A request with none is answered [`Unavailable`].
#[derive(Default)]
struct Fates {
    events: Vec<Result<Stored, Unavailable>>,
    dead: HashMap<String, Result<Stored, Unavailable>>,
}
