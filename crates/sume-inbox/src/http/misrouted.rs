//! What the public port answers at paths it does not serve. Anyone may knock there (scanners
//! do, all day), and they get a plain 404. But a POST carrying Sume's signing headers is Sume,
//! or a relay of it, sending webhooks to the wrong path: a `webhook_url` mistyped at Sume or a
//! proxy rewriting it. Every such delivery is lost after its ten attempts while the jobs are
//! closed by polling alone, so it is counted (`sume_inbox_webhooks_total{outcome="misrouted"}`)
//! and logged with the path, and its 404 says where webhooks go.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use sume_wire::headers;

use super::webhook::{WebhookState, WEBHOOK_PATH};
use crate::metrics::WebhookOutcome;
use crate::process::log_budget::LogBudget;

/// Misrouted deliveries are counted always and logged at most this often.
static MISROUTED_LOG: LogBudget = LogBudget::new(1, std::time::Duration::from_secs(10));

/// The answer at any path the public port does not serve.
pub async fn answer(State(state): State<Arc<WebhookState>>, request: Request) -> Response {
    let signed = [headers::SIGNATURE, headers::TIMESTAMP]
        .iter()
        .any(|name| request.headers().contains_key(*name));
    if request.method() != Method::POST || !signed {
        return StatusCode::NOT_FOUND.into_response();
    }
    state.metrics.webhook(WebhookOutcome::misrouted);
    if let Some(left_out) = MISROUTED_LOG.allow() {
        let path: String = request.uri().path().chars().take(200).collect();
        tracing::warn!(?path, left_out, "a POST with Sume's signing headers reached a path that serves nothing: check the webhook_url Sume sends to (it must end in {WEBHOOK_PATH}) and any proxy in front; these deliveries are not stored");
    }
    let message = format!("no such path: Sume's webhooks go to POST {WEBHOOK_PATH}");
    super::webhook::unread_body((StatusCode::NOT_FOUND, message).into_response())
}
