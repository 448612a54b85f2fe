//! Sume's public API, as the simulator serves it under `/v1` (and `/api/v1`, the real path).
//!
//! One middleware, [`gate`], stands in front of every route: it counts a job read as in
//! flight, authenticates the key (`Authorization: Bearer` or `X-Api-Key`), spends the key's
//! read or create budget, puts `RateLimit-*` headers on the answer, and logs the request. A
//! key that [`crate::control`] set out of credits or without the scope is answered 402 or 403
//! there, after its budget is spent (an assumption: the docs do not say which check comes first).
//! The handlers in [`create`] and [`read`] see only callers that passed.

mod create;
pub mod error;
mod read;

use std::sync::Arc;
use std::time::Instant as StdInstant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header::AUTHORIZATION, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use chrono::Utc;
use tokio::time::Instant;

use crate::app::{App, Shared};
use crate::job::{rfc3339, Kind};
use crate::journal::RequestRecord;
use crate::keys::Caller;
use crate::ratelimit::Class;
use crate::stats::Asked;
use crate::store::random_id;
use error::{ApiError, Tag, REQUEST_ID};

/// The API routes, to be nested under a base path.
pub fn routes(app: &Shared) -> Router<Shared> {
    let mut router = Router::new();
    for kind in Kind::ALL {
        router = router.route(kind.path(), create::route(kind));
    }
    router
        .route("/jobs", get(read::list_jobs))
        .route("/jobs/{id}", get(read::get_job))
        .route("/jobs/{id}/status", get(read::get_job))
        .route("/jobs/{id}/result", get(read::get_result))
        .route_layer(from_fn_with_state(app.clone(), gate))
}

/// The answer to a path no route matches.
pub async fn no_route() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "No such endpoint. The API lives under /v1 (or /api/v1); the simulator's own under /sim.",
    )
}

/// Who is calling, from `Authorization: Bearer <key>` or `X-Api-Key: <key>`.
fn authenticate(app: &App, headers: &HeaderMap) -> Result<Arc<Caller>, ApiError> {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let bearer = header(AUTHORIZATION.as_str()).and_then(|v| {
        let (scheme, token) = v.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then_some(token)
    });
    let presented = bearer
        .or_else(|| header("x-api-key"))
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let Some(presented) = presented else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing_api_key",
            "No API key. Send Authorization: Bearer <key>.",
        ));
    };
    app.keys.lookup(presented).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            "The API key is not valid.",
        )
    })
}

/// The job id of a `/jobs/{id}...` path.
fn job_id_in(path: &str) -> Option<String> {
    let mut segments = path.split('/');
    segments.by_ref().find(|s| *s == "jobs")?;
    segments.next().filter(|s| !s.is_empty()).map(str::to_owned)
}

/// An authenticated caller's request: refused by the key's controls, limited, or run; with
/// the rate limit's headers.
async fn admit(
    app: &Shared,
    caller: &Arc<Caller>,
    class: Class,
    mut request: Request,
    next: Next,
) -> Response {
    let verdict = app.limiter.check(&caller.name, class, Instant::now());
    let access = app.controls.access(&caller.name);
    let refusal = match class {
        Class::Read => access.reads.refusal(),
        Class::Create => access.creates.refusal(),
    };
    let mut response = if let (true, Some(refusal)) = (verdict.allowed, refusal) {
        refusal.into_response()
    } else if verdict.allowed {
        request.extensions_mut().insert(caller.clone());
        next.run(request).await
    } else {
        ApiError::rate_limited(verdict.retry_after_secs()).into_response()
    };
    verdict.apply(response.headers_mut());
    response
}

/// Authentication, rate limits, their headers, in-flight counting and the request log.
async fn gate(State(app): State<Shared>, request: Request, next: Next) -> Response {
    let started = StdInstant::now();
    let at = rfc3339(Utc::now());
    let method = request.method().clone();
    let class = if method == Method::POST {
        Class::Create
    } else {
        Class::Read
    };
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default();
    let path = request.uri().path().to_owned();
    let path_job = job_id_in(&path);
    let _in_flight = match (&path_job, class) {
        (Some(id), Class::Read) => Some(app.polls.begin(id)),
        _ => None,
    };
    let caller = authenticate(&app, request.headers());
    let mut response = match &caller {
        Err(e) => e.clone().into_response(),
        Ok(caller) => admit(&app, caller, class, request, next).await,
    };
    if !response.headers().contains_key(REQUEST_ID) {
        if let Ok(v) = HeaderValue::from_str(&random_id("req_", 20)) {
            response.headers_mut().insert(REQUEST_ID, v);
        }
    }
    let tag = response
        .extensions()
        .get::<Tag>()
        .cloned()
        .unwrap_or_default();
    let key = caller.as_ref().ok().map(|c| c.name.clone());
    let status = response.status().as_u16();
    let asked = match (class, &path_job) {
        (Class::Create, _) => Asked::Create,
        (Class::Read, Some(_)) => Asked::Job,
        (Class::Read, None) if route.ends_with("/jobs") => Asked::List,
        (Class::Read, None) => Asked::OtherRead,
    };
    app.key_counts
        .record(key.as_deref(), asked, status, &tag.faults);
    let request_id = response
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    app.requests.push(|seq| RequestRecord {
        seq,
        at,
        key,
        method: method.to_string(),
        route,
        path,
        job_id: tag.job_id.or(path_job),
        status,
        fault: (!tag.faults.is_empty()).then(|| tag.faults.join(",")),
        request_id,
        latency_ms: started.elapsed().as_millis() as u64,
    });
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_job_id_of_a_path() {
        assert_eq!(job_id_in("/v1/jobs/job_1").as_deref(), Some("job_1"));
        assert_eq!(
            job_id_in("/api/v1/jobs/job_1/status").as_deref(),
            Some("job_1")
        );
        assert_eq!(job_id_in("/v1/jobs"), None);
        assert_eq!(job_id_in("/v1/videos/generations"), None);
    }
}
