//! A job's life: what it draws when it is made, and the task that reports its end.
//!
//! [`make_job`] draws the job's duration, outcome, faults and body shape (the create body's
//! `"sim"` overrides first). [`start`] spawns its task, which sleeps until the job ends, then
//! sends the terminal event, then any duplicates (only after a success) and the late
//! `job.running` event the faults call for. An early job ends at once and the create call
//! waits on the receiver [`start`] returns until the first attempt has its answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use rand::Rng;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::app::{App, Shared};
use crate::config::BodyShape;
use crate::faults::JobOverrides;
use crate::job::{rfc3339, Job, Kind, WebhookProgress, WebhookState};
use crate::journal::DeliveryKind;
use crate::keys::Caller;
use crate::payload::{self, Event};
use crate::webhook::{Delivery, Outgoing};

/// What a create call asked for.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub kind: Kind,
    pub owner: Arc<Caller>,
    pub webhook_url: Option<String>,
    pub idempotency_key: Option<String>,
    pub overrides: Option<JobOverrides>,
}

/// Draws a new job's fate.
pub fn make_job(app: &App, id: String, new: NewJob) -> Job {
    let faults = app.faults();
    let overrides = new.overrides.clone().unwrap_or_default();
    let mut rng = rand::thread_rng();
    let (applied, outcome) = faults.draw_job(&overrides, &mut rng);
    let timing = &app.timing;
    let duration = if applied.early {
        Duration::ZERO
    } else if let Some(ms) = overrides.duration_ms {
        Duration::from_millis(ms)
    } else if timing.long_fraction > 0.0 && rng.gen_bool(timing.long_fraction.min(1.0)) {
        timing.duration_long.sample(&mut rng)
    } else {
        timing.duration_short.sample(&mut rng)
    };
    let envelope = match app.body_shape {
        BodyShape::Guide => false,
        BodyShape::Envelope => true,
        BodyShape::Mixed => rng.gen_bool(0.5),
    };
    Job {
        id,
        kind: new.kind,
        owner: new.owner,
        webhook_url: new.webhook_url,
        idempotency_key: new.idempotency_key,
        created_wall: Utc::now(),
        created: Instant::now(),
        queued_for: match new.overrides.as_ref().and_then(|o| o.queued_ms) {
            Some(ms) => Duration::from_millis(ms).min(duration),
            None => duration.mul_f64(timing.queued_fraction.clamp(0.0, 1.0)),
        },
        duration,
        outcome,
        faults: applied,
        overrides: new.overrides,
        envelope,
        progress: Mutex::new(WebhookProgress {
            state: WebhookState::Waiting,
            attempts: 0,
            delivered_at: None,
            settled: false,
        }),
    }
}

/// Spawns the job's task. For an early job, answers a receiver that fires once the first
/// delivery attempt has its answer (or at once when nothing will be sent).
pub fn start(app: &Shared, job: Arc<Job>) -> Option<oneshot::Receiver<()>> {
    let (tx, rx) = if job.faults.early {
        let (tx, rx) = oneshot::channel();
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    app.tasks.spawn(run_job(app.clone(), job, tx));
    rx
}

fn settle(job: &Job, state: Option<WebhookState>) {
    job.update_progress(|p| {
        if let Some(state) = state {
            p.state = state;
        }
        p.settled = true;
    });
}

/// Waits `pause` unless the simulator stops first; answers whether it may go on.
async fn pause(app: &App, pause: Duration) -> bool {
    tokio::select! {
        biased;
        _ = app.shutdown.cancelled() => false,
        _ = tokio::time::sleep(pause) => true,
    }
}

/// Delivers one event of `job`; attempts on the terminal event count in its progress.
async fn send(
    app: &App,
    job: &Job,
    url: &str,
    event: &Event,
    kind: DeliveryKind,
    first_done: Option<oneshot::Sender<()>>,
) -> Delivery {
    let primary = kind == DeliveryKind::Primary;
    let out = Outgoing {
        event,
        url,
        kind,
        wrong_secret: job.faults.wrong_secret,
        early: primary && job.faults.early,
    };
    let track = |n| {
        if primary {
            job.update_progress(|p| p.attempts = n);
        }
    };
    app.deliverer
        .deliver(out, first_done, track, &app.shutdown)
        .await
}

async fn run_job(app: Shared, job: Arc<Job>, first_done: Option<oneshot::Sender<()>>) {
    tokio::select! {
        biased;
        _ = app.shutdown.cancelled() => return settle(&job, Some(WebhookState::Aborted)),
        _ = tokio::time::sleep_until(job.ends_at()) => {}
    }
    let Some(url) = job.webhook_url.clone() else {
        return settle(&job, Some(WebhookState::NoWebhookUrl));
    };
    if job.faults.drop {
        return settle(&job, Some(WebhookState::Dropped));
    }
    job.update_progress(|p| p.state = WebhookState::Delivering);
    let terminal = payload::terminal_event(&job);
    let primary = send(
        &app,
        &job,
        &url,
        &terminal,
        DeliveryKind::Primary,
        first_done,
    )
    .await;
    let delivered = match primary {
        Delivery::Delivered { .. } => WebhookState::Delivered,
        Delivery::GaveUp { .. } => WebhookState::GaveUp,
        Delivery::Aborted { .. } => return settle(&job, Some(WebhookState::Aborted)),
    };
    job.update_progress(|p| {
        p.state = delivered;
        if delivered == WebhookState::Delivered {
            p.delivered_at = Some(rfc3339(Utc::now()));
        }
    });
    if delivered == WebhookState::Delivered {
        for _ in 0..job.faults.duplicate {
            if !pause(&app, app.deliverer.duplicate_delay()).await {
                return settle(&job, None);
            }
            send(&app, &job, &url, &terminal, DeliveryKind::Duplicate, None).await;
        }
    }
    if job.faults.late_nonterminal && pause(&app, app.deliverer.late_delay()).await {
        let late = payload::running_event(&job);
        send(&app, &job, &url, &late, DeliveryKind::Late, None).await;
    }
    settle(&job, None);
}
