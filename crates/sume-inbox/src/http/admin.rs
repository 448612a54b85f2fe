//! The admin API on ADMIN_ADDR: registering and reading jobs.
//!
//! - `POST /v1/jobs` `{"job_id","order_id"?,"api_key"?}`: registers the job and attaches its
//!   waiting events at once; 201 with the job when new, 200 when the same registration was
//!   repeated, 409 when the id is already registered with another order or key.
//! - `GET /v1/jobs/{job_id}`: the job, or 404.
//!
//! With ADMIN_TOKEN set, every request needs `Authorization: Bearer <token>`.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sume_wire::Secret;

use super::error;
use crate::attach::AttachHandle;
use crate::db::{NewJob, Registered, Store};
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
}

/// The admin API's routes, behind the bearer token when one is configured.
pub fn router(state: AdminState, token: Option<Secret>) -> Router {
    let routes = Router::new()
        .route("/v1/jobs", post(register))
        .route("/v1/jobs/{job_id}", get(show))
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Registration {
    job_id: String,
    #[serde(default)]
    order_id: Option<String>,
    #[serde(default)]
    api_key: Option<String>,
}

/// `None` when the id is usable, else the 422 to answer.
fn bad_id(field: &str, value: &str) -> Option<Response> {
    let usable =
        !value.trim().is_empty() && value.len() <= 255 && !value.chars().any(char::is_control);
    (!usable).then(|| {
        error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
            format!("{field} must be 1 to 255 characters without control characters"),
        )
    })
}

async fn register(
    State(state): State<AdminState>,
    body: Result<Json<Registration>, JsonRejection>,
) -> Response {
    let Json(reg) = match body {
        Ok(b) => b,
        Err(e) => return error(e.status(), "invalid_body", e.body_text()),
    };
    if let Some(r) = bad_id("job_id", &reg.job_id) {
        return r;
    }
    if let Some(r) = reg.order_id.as_deref().and_then(|o| bad_id("order_id", o)) {
        return r;
    }
    if let Some(key) = &reg.api_key {
        if !state.key_names.is_empty() && !state.key_names.contains(key) {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unknown_api_key",
                format!(
                    "api_key {key:?} is not a configured key name (configured: {})",
                    state.key_names.join(", ")
                ),
            );
        }
    }
    let job = NewJob {
        job_id: reg.job_id,
        order_id: reg.order_id,
        api_key: reg.api_key,
    };
    let status = match state.store.register_job(&job).await {
        Ok(Registered::Created) => StatusCode::CREATED,
        Ok(Registered::Existing) => StatusCode::OK,
        Ok(Registered::Conflict(existing)) => {
            let body = serde_json::json!({
                "error": {
                    "code": "job_exists",
                    "message": "this job id is registered with another order_id or api_key",
                },
                "job": existing,
            });
            return (StatusCode::CONFLICT, Json(body)).into_response();
        }
        Err(e) => {
            return unavailable("job registration failed", &e);
        }
    };
    if let Err(e) = state.attach.attach_now(vec![job.job_id.clone()]).await {
        // The row is committed; its notification and the catch-up scan will attach it.
        tracing::warn!(job_id = %job.job_id, error = %e, "attach after registration failed");
    }
    match state.store.jobs_get(&job.job_id).await {
        Ok(Some(row)) => (status, Json(row)).into_response(),
        Ok(None) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "job vanished",
        ),
        Err(e) => unavailable("reading the job failed", &e),
    }
}

async fn metrics(State(state): State<AdminState>) -> Response {
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
fn unavailable(doing: &str, e: &crate::db::DbError) -> Response {
    tracing::error!(error = %e, "{doing}");
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "database unavailable",
    )
}

async fn show(State(state): State<AdminState>, Path(job_id): Path<String>) -> Response {
    match state.store.jobs_get(&job_id).await {
        Ok(Some(row)) => Json(row).into_response(),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no job {job_id:?}"),
        ),
        Err(e) => unavailable("reading the job failed", &e),
    }
}
