//! The admin API on ADMIN_ADDR: its state and its routes. What guards them is [`access`]; the
//! handlers live in a file per concern (`registration.rs`: registering jobs; `job_routes.rs`:
//! reading and listing them; `feed.rs`: the feed of closes; `wait.rs`: waiting for a close;
//! `operator.rs`: the operator's reads; `instance_routes.rs`: the fleet's instances and last
//! hour; `replay_routes.rs`: the operator's writes and their audit; `paging.rs`: the lists'
//! `limit` and `after`); [`openapi`] describes them all, `forms.rs` the forms of their text
//! values. A query parameter a route does not take is refused (`invalid_query`) on every route
//! but `/metrics`, whose scrapers may add their own.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use sume_wire::Secret;

pub mod access;
mod content_type;
mod feed;
mod forms;
mod instance_routes;
mod job_routes;
pub mod openapi;
mod operator;
mod paging;
mod registration;
mod replay_routes;
mod wait;

pub use access::{current_request_id, Access, Scope};

use super::error;
use crate::actors::attach::AttachHandle;
use crate::db::Store;
use crate::metrics::Metrics;

/// The largest body a write may send: 413 `invalid_body` beyond, at once when its
/// `Content-Length` says so ([`access::guard`]), else when that much has been read.
pub const MAX_WRITE_BYTES: usize = 2 * 1024 * 1024;

/// What the admin API needs.
#[derive(Clone)]
pub struct AdminState {
    /// The database.
    pub store: Store,
    /// To attach a job's waiting events as soon as it is registered.
    pub attach: AttachHandle,
    /// Names of this instance's API keys; empty means any name is accepted. A registration may
    /// also name a key a live instance of the fleet holds.
    pub key_names: Arc<Vec<String>>,
    /// What `/metrics` encodes.
    pub metrics: Arc<Metrics>,
    /// The tasks' liveness, for the `tasks_dead` gauge.
    pub health: crate::actors::supervision::Health,
    /// Requests waiting for a job to close (`?wait=`).
    pub waiters: crate::actors::close_waiters::Waiters,
    /// MAX_WAIT: the longest a request waits; a longer `wait` waits this long.
    pub max_wait: std::time::Duration,
    /// Cancelled at shutdown: waiting requests are answered at once.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// SUME_WEBHOOK_SECRET: replay verifies stored deliveries again with them.
    pub secrets: Arc<Vec<Secret>>,
    /// This instance's name in the fleet's picture (its lease owner name).
    pub instance: Arc<str>,
}

/// The admin API's routes: the application's (register, read, wait, the feed of closes, the
/// OpenAPI document) and the operator's (everything else), all behind [`access::guard`].
pub fn router(state: AdminState, access: Access) -> Router {
    let app = Router::new()
        .route(
            "/v1/jobs",
            post(registration::register).get(job_routes::list),
        )
        .route("/v1/jobs/{job_id}", get(job_routes::show))
        .route("/v1/closes", get(feed::closes))
        .route("/v1/openapi.json", get(openapi::serve));
    let operator = Router::new()
        .route("/v1/jobs/{job_id}/detail", get(operator::job_detail))
        .route("/v1/inbox", get(operator::inbox))
        .route("/v1/set-aside", get(operator::set_aside))
        .route("/v1/orphans", get(operator::orphans))
        .route("/v1/disagreements", get(operator::disagreements))
        .route("/v1/dead-letters", get(operator::dead_letters))
        .route(
            "/v1/dead-letters/drop",
            post(replay_routes::drop_dead_letters),
        )
        .route(
            "/v1/dead-letters/replay",
            post(replay_routes::replay_dead_letters),
        )
        .route(
            "/v1/events/{event_id}/replay",
            post(replay_routes::replay_event),
        )
        .route("/v1/stats", get(operator::stats))
        .route("/v1/instances", get(instance_routes::instances))
        .route("/v1/audit", get(operator::audit))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn(access::operator_only));
    app.merge(operator)
        .fallback(not_found)
        .layer(middleware::map_response(method_not_allowed))
        .with_state(state)
        .layer(DefaultBodyLimit::max(MAX_WRITE_BYTES))
        .layer(middleware::from_fn_with_state(
            Arc::new(access),
            access::guard,
        ))
}

/// The one id of a route's path (`{job_id}`, `{event_id}`). An id that is not UTF-8 (`%FF`)
/// names nothing: answered 404 `not_found` in JSON, as an id holding a NUL is, never the
/// router's plain-text 400.
pub(super) struct PathId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => Ok(PathId(id)),
            Err(e) => Err(error(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("the id in the path names nothing: {}", e.body_text()),
            )),
        }
    }
}

/// A write's JSON body, read as `T`. Every body the API takes is an object: one that is JSON
/// but no object (an array, which serde would read into `T`'s fields by position; a string, a
/// number, `null`) is refused 422 `invalid_body`, as a body not of `T`'s shape is. A body that
/// is not JSON is 400 and one over [`MAX_WRITE_BYTES`] 413, both `invalid_body`, as axum's
/// `Json` answers them; a UTF-8 byte order mark before it is passed over. (That a write says `Content-Type: application/json` is
/// [`access::guard`]'s check, made before any route.)
pub(super) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let invalid = |status, message: String| error(status, "invalid_body", message);
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|e| invalid(e.status(), e.body_text()))?;
        // A UTF-8 byte order mark before the text (what some editors and shells write at the
        // start of a file) is passed over, as RFC 8259 allows, instead of refused 400.
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
        if let Some(kind) = json_but_no_object(bytes) {
            return Err(invalid(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("the body must be a JSON object ({{...}}), not {kind}"),
            ));
        }
        match Json::<T>::from_bytes(bytes) {
            Ok(Json(body)) => Ok(JsonBody(body)),
            Err(e) => Err(invalid(e.status(), e.body_text())),
        }
    }
}

/// What `body` is when it is JSON but no object (`an array`, ...); `None` for an object, and
/// for a body that is not JSON at all (the parser says what is wrong with it).
fn json_but_no_object(body: &[u8]) -> Option<&'static str> {
    let first = body
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))?;
    if *first == b'{' || serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
        return None;
    }
    Some(match first {
        b'[' => "an array",
        b'"' => "a string",
        b't' | b'f' => "a boolean",
        b'n' => "null",
        _ => "a number",
    })
}

/// A route that takes no query: a parameter is refused 400 `invalid_query`, named, as the
/// routes that take some refuse one they do not know (a misspelt `?wait=` must not pass as
/// nothing asked).
pub(super) struct NoQuery;

impl<S: Send + Sync> FromRequestParts<S> for NoQuery {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        match url::form_urlencoded::parse(query.as_bytes()).next() {
            None => Ok(NoQuery),
            Some((name, _)) => Err(error(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("unknown query parameter `{name}`: this route takes none"),
            )),
        }
    }
}

/// The router's 405 (empty) as the API's error envelope, its `Allow` kept.
async fn method_not_allowed(response: Response) -> Response {
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let mut answer = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method (see Allow)",
    );
    if let Some(allow) = allow {
        answer.headers_mut().insert(header::ALLOW, allow);
    }
    answer
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "no_route", "no such route")
}

/// `GET /metrics`: Prometheus' text format.
#[utoipa::path(get, path = "/metrics", tag = "operator", operation_id = "get_metrics",
    responses((status = 200, description = "The metrics", content_type = "application/openmetrics-text")))]
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

/// A 503 for a database failure, logged with what was being done: `unavailable`, or
/// `permission_denied` with the server's words and the grants to give when the database's role
/// may not do it (it is up; the answer holds until the grants are given, then the same request
/// goes through).
pub(crate) fn unavailable(doing: &str, e: &crate::db::DbError) -> Response {
    tracing::error!(error = %e, "{doing}");
    if e.is_denied() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "permission_denied",
            format!("{doing}: {e}"),
        );
    }
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "database unavailable",
    )
}
