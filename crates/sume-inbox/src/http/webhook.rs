//! `POST /webhooks/sume` on LISTEN_ADDR, beside the health checks of [`super::health`].
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

use super::health::{self, Readiness};
use crate::delivery::{verify_delivery, Delivery, Received};
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
    /// For `/healthz` and `/readyz`: the tasks' liveness and the cached database check.
    pub health: Arc<Readiness>,
    /// Where the deliveries are counted.
    pub metrics: Arc<Metrics>,
}

/// The public port's routes: the webhook and the health checks.
pub fn router(state: WebhookState, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/webhooks/sume", post(receive))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
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
    let now = unix_now();
    let delivery = match verify_delivery(received, body, &state.secrets, now, tolerance) {
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
