//! The admin API on ADMIN_ADDR: its state, its routes and what guards them. The handlers live
//! in a file per concern (`jobs.rs`: registering, reading and listing jobs, the feed of closes).
//!
//! With ADMIN_TOKEN set, every request needs `Authorization: Bearer <token>`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use sha2::{Digest, Sha256};
use sume_wire::Secret;

mod jobs;
mod wait;

use super::error;
use crate::attach::AttachHandle;
use crate::db::Store;
use crate::metrics::Metrics;

/// What the admin API needs.
#[derive(Clone)]
pub struct AdminState {
    /// The database.
    pub store: Store,
    /// To attach a job's waiting events as soon as it is registered.
    pub attach: AttachHandle,
    /// Names of the configured API keys; empty means any name is accepted.
    pub key_names: Arc<Vec<String>>,
    /// What `/metrics` encodes.
    pub metrics: Arc<Metrics>,
    /// The tasks' liveness, for the `tasks_dead` gauge.
    pub health: crate::health::Health,
    /// Requests waiting for a job to close (`?wait=`).
    pub waiters: crate::waiters::Waiters,
    /// MAX_WAIT: the longest wait a request may ask for.
    pub max_wait: std::time::Duration,
    /// Cancelled at shutdown: waiting requests are answered at once.
    pub shutdown: tokio_util::sync::CancellationToken,
}

/// The admin API's routes, behind the bearer token when one is configured.
pub fn router(state: AdminState, token: Option<Secret>) -> Router {
    let routes = Router::new()
        .route("/v1/jobs", post(jobs::register).get(jobs::list))
        .route("/v1/jobs/{job_id}", get(jobs::show))
        .route("/metrics", get(metrics))
        .with_state(state);
    match token {
        Some(token) => routes.layer(middleware::from_fn_with_state(
            Arc::new(token),
            require_token,
        )),
        None => routes,
    }
}

/// Compares digests rather than the strings, so the time taken says nothing about the token.
fn same_secret(a: &str, b: &str) -> bool {
    Sha256::digest(a.as_bytes()) == Sha256::digest(b.as_bytes())
}

async fn require_token(State(token): State<Arc<Secret>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(given) if same_secret(given.trim(), token.expose()) => next.run(request).await,
        _ => error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token",
        ),
    }
}

async fn metrics(State(state): State<AdminState>) -> Response {
    state.metrics.waiters.set(state.waiters.len() as i64);
    let body = state
        .metrics
        .render(&state.store, state.health.dead().len())
        .await;
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// A 503 for a database failure, logged with what was being done.
pub(crate) fn unavailable(doing: &str, e: &crate::db::DbError) -> Response {
    tracing::error!(error = %e, "{doing}");
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "database unavailable",
    )
}
