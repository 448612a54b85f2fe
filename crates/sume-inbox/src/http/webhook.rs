//! `POST /webhooks/sume`, `GET /healthz`, `GET /readyz` on LISTEN_ADDR.
//!
//! A delivery is verified here (signature over every configured secret, timestamp within the
//! tolerance), read, and handed to the ingest actor; the answer waits for the commit:
//! - 204: stored, a duplicate, an unknown job (it waits in the inbox), or a verified body that
//!   names no job (kept as a dead letter);
//! - 401: missing or wrong signature, or a stale timestamp; nothing stored;
//! - 413: body over MAX_BODY_BYTES; 404/405: wrong path or method;
//! - 503 with Retry-After: the database could not take the write. Never a 2xx without a commit.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use sume_wire::{headers, Secret};

use crate::db::{migrate, Store};
use crate::delivery::{verify_delivery, Delivery, Received};
use crate::health::Health;
use crate::ingest::{IngestHandle, Stored};
use crate::metrics::{Metrics, WebhookOutcome};
use crate::ratelog::LogBudget;

/// Refused deliveries are counted always and logged at most this often (anyone can send them).
static REFUSALS_LOG: LogBudget = LogBudget::new(5, Duration::from_secs(1));
/// Verified deliveries with something odd about them (a replayed delivery can repeat them).
static ODD_DELIVERIES_LOG: LogBudget = LogBudget::new(5, Duration::from_secs(1));

/// What the webhook endpoint needs.
#[derive(Clone)]
pub struct WebhookState {
    /// SUME_WEBHOOK_SECRET: any of them verifies.
    pub secrets: Arc<Vec<Secret>>,
    /// WEBHOOK_TOLERANCE: how far a signed timestamp may be from now.
    pub tolerance: Duration,
    /// Where verified deliveries go.
    pub ingest: IngestHandle,
    /// How long a request waits for its commit.
    pub timeout: Duration,
    /// `Retry-After` of a 503.
    pub retry_after_secs: u64,
    /// For `/readyz`'s check of the schema.
    pub store: Store,
    /// For `/healthz` and `/readyz`.
    pub health: Health,
    /// Where the deliveries are counted.
    pub metrics: Arc<Metrics>,
}

/// The public port's routes: the webhook and the health checks.
pub fn router(state: WebhookState, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/webhooks/sume", post(receive))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

async fn receive(
    State(state): State<WebhookState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                state.metrics.webhook(WebhookOutcome::too_large);
            }
            return rejection.into_response();
        }
    };
    let received = Received {
        timestamp: header_str(&headers, headers::TIMESTAMP),
        signature: header_str(&headers, headers::SIGNATURE),
        event_id: header_str(&headers, headers::EVENT_ID),
    };
    let tolerance = state.tolerance.as_secs();
    let delivery = match verify_delivery(received, body, &state.secrets, unix_now(), tolerance) {
        Ok(verified) => {
            state.metrics.verified_by(verified.secret_index);
            if verified.header_mismatch {
                state.metrics.event_id_mismatch.inc();
                if let Some(left_out) = ODD_DELIVERIES_LOG.allow() {
                    tracing::warn!(
                        header = header_str(&headers, headers::EVENT_ID).unwrap_or("-"),
                        left_out,
                        "X-Sume-Event-Id differs from the body's event id; stored under the body's"
                    );
                }
            }
            verified.delivery
        }
        Err(e) => {
            if let Some(left_out) = REFUSALS_LOG.allow() {
                tracing::warn!(reason = %e, left_out, "webhook refused");
            }
            state.metrics.webhook(WebhookOutcome::unauthorized);
            return (StatusCode::UNAUTHORIZED, e.to_string()).into_response();
        }
    };
    if let Delivery::DeadLetter(letter) = &delivery {
        if let Some(left_out) = ODD_DELIVERIES_LOG.allow() {
            tracing::warn!(reason = %letter.reason, left_out, "verified webhook names no job; keeping it as a dead letter");
        }
    }
    match tokio::time::timeout(state.timeout, state.ingest.store(delivery)).await {
        Ok(Ok(stored)) => {
            tracing::debug!(?stored, "webhook stored");
            state.metrics.webhook(match stored {
                Stored::New => WebhookOutcome::stored,
                Stored::Duplicate => WebhookOutcome::duplicate,
                Stored::DeadLettered => WebhookOutcome::dead_lettered,
            });
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(Err(_)) | Err(_) => {
            state.metrics.webhook(WebhookOutcome::unavailable);
            unavailable(state.retry_after_secs)
        }
    }
}

fn unavailable(retry_after_secs: u64) -> Response {
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

/// Alive unless a task has died: a process that lost an actor should be restarted, not kept.
async fn healthz(State(state): State<WebhookState>) -> Response {
    let dead = state.health.dead();
    if dead.is_empty() {
        "ok".into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("tasks stopped: {}", dead.join(", ")),
        )
            .into_response()
    }
}

/// Ready when the database answers, the schema is at least this binary's version, and no task
/// has died.
async fn readyz(State(state): State<WebhookState>) -> Response {
    let dead = state.health.dead();
    if !dead.is_empty() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("tasks stopped: {}", dead.join(", ")),
        )
            .into_response();
    }
    let check = tokio::time::timeout(
        Duration::from_secs(3),
        state.store.schema_migrations_version(),
    )
    .await;
    match check {
        Ok(Ok(v)) if v >= migrate::latest() => "ready".into_response(),
        Ok(Ok(v)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "schema version {v}, this binary needs {}",
                migrate::latest()
            ),
        )
            .into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: database check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable").into_response()
        }
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "database: no answer in 3s").into_response(),
    }
}
