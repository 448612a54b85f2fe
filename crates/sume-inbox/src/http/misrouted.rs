//! What the public port answers at paths it does not serve, and to methods other than GET at
//! the health checks. Anyone may knock there (scanners do, all day), and they get a plain 404
//! (405 at the health checks). But a POST whose signing headers pass the checks the webhook
//! route makes before reading a body (both there, well formed, the timestamp within
//! WEBHOOK_TOLERANCE) is Sume, or a relay of it, sending webhooks to the wrong path: a
//! `webhook_url` mistyped at Sume or a proxy rewriting it. Every such delivery is lost after
//! its ten attempts while the jobs are closed by polling alone, so it is counted
//! (`sume_inbox_webhooks_total{outcome="misrouted"}`) and logged with the path, and its 404
//! says where webhooks go. Its body is never read, so its signature is not verified: a
//! stranger can still forge such headers, but no longer by naming one of them alone, nor with
//! a stale or malformed one.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::webhook::{WebhookState, WEBHOOK_PATH};
use super::webhook_headers::before_the_body;
use crate::metrics::WebhookOutcome;
use crate::process::log_budget::LogBudget;

/// Misrouted deliveries are counted always and logged at most this often.
static MISROUTED_LOG: LogBudget = LogBudget::new(1, std::time::Duration::from_secs(10));

/// The answer at any path the public port does not serve.
pub async fn answer(State(state): State<Arc<WebhookState>>, request: Request) -> Response {
    if !signed_post(&state, &request) {
        return StatusCode::NOT_FOUND.into_response();
    }
    misrouted(&state, &request)
}

/// The answer to a method other than GET (or HEAD) at a path served for GET only, the health
/// checks: a signed POST there is misrouted like any other; anything else is the 405 it was.
pub async fn other_method(State(state): State<Arc<WebhookState>>, request: Request) -> Response {
    if !signed_post(&state, &request) {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    misrouted(&state, &request)
}

/// A POST whose signing headers the webhook route would take on to read its body.
fn signed_post(state: &WebhookState, request: &Request) -> bool {
    request.method() == Method::POST && before_the_body(request.headers(), state.tolerance).is_ok()
}

/// Counted, logged (at a bounded rate), and answered 404 saying where webhooks go; the body
/// left unread, so the connection closes.
fn misrouted(state: &WebhookState, request: &Request) -> Response {
    state.metrics.webhook(WebhookOutcome::misrouted);
    if let Some(left_out) = MISROUTED_LOG.allow() {
        let path: String = request.uri().path().chars().take(200).collect();
        tracing::warn!(?path, left_out, "a POST with Sume's signing headers reached a path that serves nothing: check the webhook_url Sume sends to (it must end in {WEBHOOK_PATH}) and any proxy in front; these deliveries are not stored");
    }
    let message = format!("no such path: Sume's webhooks go to POST {WEBHOOK_PATH}");
    super::webhook::unread_body((StatusCode::NOT_FOUND, message).into_response())
}
