//! `POST /webhooks/sume` on LISTEN_ADDR, beside the health checks of [`super::probes`].
//!
//! A delivery is checked from its headers alone first (signature header well formed, timestamp
//! within the tolerance, Content-Length within MAX_BODY_BYTES), so a request that cannot verify
//! is refused before its body is read or waited for; then the body is read
//! ([`super::webhook_body`]: within BODY_TIMEOUT, and in at most so many pieces), the signature
//! verified over every configured secret, and the delivery handed to the ingest actor; the
//! answer waits for the commit:
//! - 204: stored, a duplicate, an unknown job (it waits in the inbox), a verified body that
//!   names no job, or an event under an id stored for another job or status (each kept as a
//!   dead letter);
//! - 401: missing, malformed or wrong signature, or a stale timestamp; nothing stored;
//! - 413: body over MAX_BODY_BYTES (declared or sent); 408: body not sent within BODY_TIMEOUT;
//!   400: its chunked framing broken, or sent in too many pieces, or its connection closed
//!   before it was whole (counted `aborted`, not `malformed`: a sender still reading reads it);
//!   404/405: wrong path or method (a signed POST to a path served for GET only is
//!   [`super::misrouted`]'s);
//! - 503 with Retry-After: the database could not take the write; or the body was shed for a
//!   newer request ([`super::body_readers`]: it was the oldest still reading at MAX_CONNECTIONS
//!   or MAX_IN_FLIGHT, or its bytes were needed under MAX_BODY_MEMORY); or its next bytes did not fit in
//!   MAX_BODY_MEMORY and no other reader could make room ([`super::body_budget`]). Never a 2xx
//!   without a commit.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use sume_wire::{headers, Secret, VerifyError};

pub use super::body_budget::BodyBudget;
pub use super::body_readers::{BodyReaders, Connection};
use super::probes::{self, Readiness};
use super::webhook_body::read_body;
use super::webhook_headers::{before_the_body, header_str, received, unix_now};
use crate::actors::ingest::{IngestHandle, Stored};
use crate::db::NewEvent;
use crate::decisions::delivery::{verify_delivery, Delivery};
use crate::metrics::{Metrics, StatusSource, WebhookOutcome};
use crate::process::log_budget::LogBudget;
use crate::process::traces;
use tracing::{Instrument, Span};

/// Refused deliveries are counted always and logged at most this often (anyone can send them).
pub(super) static REFUSALS_LOG: LogBudget = LogBudget::new(5, Duration::from_secs(1));
/// Verified deliveries with something odd about them (a replayed delivery can repeat them).
static ODD_DELIVERIES_LOG: LogBudget = LogBudget::new(5, Duration::from_secs(1));

/// What the webhook endpoint needs.
#[derive(Clone)]
pub struct WebhookState {
    /// SUME_WEBHOOK_SECRET: any of them verifies.
    pub secrets: Arc<Vec<Secret>>,
    /// WEBHOOK_TOLERANCE: how far a signed timestamp may be from now.
    pub tolerance: Duration,
    /// MAX_BODY_BYTES: the largest body read (413 beyond).
    pub max_body_bytes: usize,
    /// BODY_TIMEOUT: how long the whole body may take to arrive (408 beyond).
    pub body_timeout: Duration,
    /// MAX_BODY_MEMORY: the bytes of bodies held at once (503 beyond).
    pub body_memory: BodyBudget,
    /// The requests reading their body, which the server sheds at MAX_CONNECTIONS and at
    /// MAX_IN_FLIGHT.
    pub body_readers: BodyReaders,
    /// Where verified deliveries go.
    pub ingest: IngestHandle,
    /// How long a request waits for its commit.
    pub timeout: Duration,
    /// `Retry-After` of a 503.
    pub retry_after_secs: u64,
    /// For `/healthz` and `/readyz`: the tasks' liveness and the cached database check.
    pub health: Arc<Readiness>,
    /// Where the deliveries are counted.
    pub metrics: Arc<Metrics>,
}

impl axum::extract::FromRef<Arc<WebhookState>> for probes::Probes {
    fn from_ref(state: &Arc<WebhookState>) -> probes::Probes {
        probes::Probes(state.health.clone())
    }
}

/// The public port's routes: the webhook and the health checks; any other path is
/// [`super::misrouted`]'s, and so is any method but GET at the health checks (a signed POST
/// there is misrouted, anything else 405). The state is shared behind one `Arc`: every request
/// takes a handle to it, one reference count instead of one per field.
pub fn router(state: WebhookState) -> Router {
    Router::new()
        .route(WEBHOOK_PATH, post(receive))
        .route("/webhooks/sume/", post(receive))
        .route(
            "/healthz",
            get(probes::healthz).fallback(super::misrouted::other_method),
        )
        .route(
            "/readyz",
            get(probes::readyz).fallback(super::misrouted::other_method),
        )
        .fallback(super::misrouted::answer)
        .with_state(Arc::new(state))
}

/// Where Sume's webhooks are received (with a trailing `/` too: a `webhook_url` so written).
pub const WEBHOOK_PATH: &str = "/webhooks/sume";

/// One delivery, in its `delivery` span when traces are exported ([`traces`]).
async fn receive(State(state): State<Arc<WebhookState>>, request: Request) -> Response {
    let span = traces::span!(
        "delivery",
        otel.name = "POST /webhooks/sume",
        otel.kind = "server",
        http.request.method = "POST",
        url.path = "/webhooks/sume",
        sume.event_id = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    );
    if span.is_none() {
        return checked(state, request, &span).await;
    }
    let answer = checked(state, request, &span)
        .instrument(span.clone())
        .await;
    span.record(
        "http.response.status_code",
        i64::from(answer.status().as_u16()),
    );
    answer
}

/// Cheap checks first: the headers alone can refuse a delivery (401, 413) before a byte of its
/// body is read; then the body, within BODY_TIMEOUT and MAX_BODY_BYTES; then the signature.
async fn checked(state: Arc<WebhookState>, request: Request, delivery_span: &Span) -> Response {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let checks = traces::span!("check headers").entered();
    if let Err(e) = before_the_body(headers, state.tolerance) {
        return unread_body(refused(&state, e));
    }
    let declared = header_str(headers, header::CONTENT_LENGTH.as_str())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.max_body_bytes as u64) {
        return unread_body(too_large(&state));
    }
    drop(checks);
    // Held until the answer: the body lives on in the delivery until its commit.
    let on = parts.extensions.get::<Connection>().copied();
    let read = read_body(&state, body, on).instrument(traces::span!("read body"));
    let (body, _held) = match read.await {
        Ok(read) => read,
        Err(answer) => return answer,
    };
    let now = unix_now();
    let verifying = traces::span!("verify").entered();
    let tolerance = state.tolerance.as_secs();
    let verified = verify_delivery(received(headers), body, &state.secrets, now, tolerance);
    drop(verifying);
    let delivery = match verified {
        Ok(verified) => {
            state.metrics.verified_by(verified.secret_index);
            state
                .metrics
                .webhook_clock_skew
                .set((now - verified.delivery.signed_at()) as f64);
            if verified.header_mismatch {
                state.metrics.event_id_mismatch.inc();
                if let Some(left_out) = ODD_DELIVERIES_LOG.allow() {
                    tracing::warn!(
                        header = header_str(headers, headers::EVENT_ID).unwrap_or("-"),
                        left_out,
                        "X-Sume-Event-Id differs from the body's event id; stored under the body's"
                    );
                }
            }
            if let Delivery::Event(NewEvent {
                job_id,
                status: Some(status),
                ..
            }) = &verified.delivery
            {
                crate::sume_api::note_status(&state.metrics, StatusSource::webhook, job_id, status);
            }
            verified.delivery
        }
        Err(e) => return refused(&state, e),
    };
    if let (Delivery::Event(e), Some(cx)) = (&delivery, traces::context_of(delivery_span)) {
        delivery_span.record("sume.event_id", e.event_id.as_str());
        traces::delivered(&e.event_id, cx);
    }
    let waiting = traces::span!("wait for batch");
    store(&state, delivery).instrument(waiting).await
}

/// An answer given before the body was read: the connection cannot carry another request (the
/// rest of this one is still on the wire), so it closes after the answer, and says so, lest the
/// client send its next request on it.
pub(super) fn unread_body(mut answer: Response) -> Response {
    answer
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    answer
}

fn refused(state: &WebhookState, e: VerifyError) -> Response {
    if let Some(left_out) = REFUSALS_LOG.allow() {
        tracing::warn!(reason = %e, left_out, "webhook refused");
    }
    state.metrics.webhook(WebhookOutcome::unauthorized);
    (StatusCode::UNAUTHORIZED, e.to_string()).into_response()
}

pub(super) fn too_large(state: &WebhookState) -> Response {
    state.metrics.webhook(WebhookOutcome::too_large);
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is over MAX_BODY_BYTES ({})", state.max_body_bytes),
    )
        .into_response()
}

/// Hands a verified delivery to the ingest actor and answers once it is committed.
async fn store(state: &WebhookState, delivery: Delivery) -> Response {
    if let Delivery::DeadLetter(letter) = &delivery {
        if let Some(left_out) = ODD_DELIVERIES_LOG.allow() {
            tracing::warn!(reason = %letter.reason, left_out, "verified webhook names no job; keeping it as a dead letter");
        }
    }
    match tokio::time::timeout(state.timeout, state.ingest.store(delivery)).await {
        Ok(Ok(stored)) => {
            tracing::debug!(
                stored = match stored {
                    Stored::New => "new",
                    Stored::Duplicate => "duplicate",
                    Stored::DeadLettered => "dead_letter",
                    Stored::IdReused => "id_reused",
                },
                "webhook stored"
            );
            state.metrics.webhook(match stored {
                Stored::New => WebhookOutcome::stored,
                Stored::Duplicate => WebhookOutcome::duplicate,
                Stored::DeadLettered => WebhookOutcome::dead_lettered,
                Stored::IdReused => WebhookOutcome::id_reused,
            });
            StatusCode::NO_CONTENT.into_response()
        }
        waited => {
            if waited.is_err() {
                crate::actors::ingest::commit_timed_out(state.timeout);
            }
            state.metrics.webhook(WebhookOutcome::unavailable);
            unavailable(state.retry_after_secs)
        }
    }
}

pub(super) fn unavailable(retry_after_secs: u64) -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        "the inbox cannot take writes right now; retry later",
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}
