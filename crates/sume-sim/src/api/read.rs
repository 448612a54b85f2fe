//! The read endpoints: `GET /jobs/{id}` (and `/status`, the same answer), `/jobs/{id}/result`
//! and the list `GET /jobs?limit=&cursor=&status=&type=`.
//!
//! A key sees only the jobs its own member created in its own workspace; any other id answers
//! 404, exactly as an id nobody created. The status faults (slow, 5xx, 429, redirect) apply to
//! every read of one job, drawn afresh per request from the fault settings in force.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header::LOCATION, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use rand::Rng;
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;

use super::error::{ApiError, Tag};
use crate::app::{App, Shared};
use crate::job::{Job, Kind, Phase};
use crate::keys::Caller;
use crate::ratelimit::ceil_secs;
use crate::store::ListQuery;

/// The page size of `GET /jobs` when none is asked for, and the largest allowed.
pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 100;

/// Applies the status faults to one read of `path` (below the API's base): may wait, may fail,
/// may send elsewhere.
/// Answers the faults injected, or the answer a fault gives instead of the job.
async fn read_faults(app: &App, job_id: &str, path: &str) -> Result<Vec<&'static str>, Response> {
    let drawn = app.faults().draw_read(&mut rand::thread_rng());
    let mut faults = Vec::new();
    if let Some(delay) = drawn.slow {
        faults.push("status_slow");
        tokio::time::sleep(delay).await;
    }
    let tag = |faults: &Vec<&'static str>| Tag {
        job_id: Some(job_id.to_owned()),
        faults: faults.clone(),
    };
    if drawn.server_error {
        faults.push("status_5xx");
        let status = [
            StatusCode::INTERNAL_SERVER_ERROR,
            StatusCode::BAD_GATEWAY,
            StatusCode::SERVICE_UNAVAILABLE,
        ][rand::thread_rng().gen_range(0..3)];
        return Err(fault_answer(
            ApiError::new(
                status,
                "internal_error",
                "Something went wrong on our side. Try again later.",
            )
            .with_tag(tag(&faults)),
        ));
    }
    if drawn.rate_limited {
        faults.push("status_429");
        let secs = ceil_secs(app.faults().status_429_retry_after).max(1);
        return Err(fault_answer(
            ApiError::rate_limited(secs).with_tag(tag(&faults)),
        ));
    }
    if drawn.redirected {
        faults.push("status_redirect");
        let moved = [(LOCATION, format!("/moved{path}"))];
        let response = (StatusCode::TEMPORARY_REDIRECT, moved).into_response();
        return Err(tag(&faults).attach(response));
    }
    Ok(faults)
}

/// The job `id` if `caller` may see it.
fn visible(app: &App, caller: &Caller, id: &str) -> Result<Arc<Job>, ApiError> {
    app.store
        .get(id)
        .filter(|job| caller.can_see(&job.owner))
        .ok_or_else(|| ApiError::not_found("job"))
}

fn tagged(response: Response, job_id: &str, faults: Vec<&'static str>) -> Response {
    Tag {
        job_id: Some(job_id.to_owned()),
        faults,
    }
    .attach(response)
}

/// A fault's error answer; an injected 429 also says the budget is spent, whatever the real
/// count (the gate fills in only the rate headers an answer lacks).
fn fault_answer(e: ApiError) -> Response {
    let spent = (e.status == StatusCode::TOO_MANY_REQUESTS)
        .then_some(e.retry_after_secs)
        .flatten();
    let mut response = e.into_response();
    if let Some(secs) = spent {
        let h = response.headers_mut();
        h.insert("ratelimit-remaining", HeaderValue::from(0u32));
        h.insert("ratelimit-reset", HeaderValue::from(secs));
    }
    response
}

/// `GET /jobs/{id}` and `GET /jobs/{id}/status`: the job object.
pub async fn get_job(
    State(app): State<Shared>,
    Extension(caller): Extension<Arc<Caller>>,
    Path(id): Path<String>,
    uri: Uri,
) -> Response {
    let faults = match read_faults(&app, &id, uri.path()).await {
        Ok(f) => f,
        Err(answer) => return answer,
    };
    match visible(&app, &caller, &id) {
        Ok(job) => tagged(
            Json(job.object(Instant::now())).into_response(),
            &id,
            faults,
        ),
        Err(e) => tagged(e.into_response(), &id, faults),
    }
}

/// `GET /jobs/{id}/result`: the output of an ended job; 409 while it runs.
pub async fn get_result(
    State(app): State<Shared>,
    Extension(caller): Extension<Arc<Caller>>,
    Path(id): Path<String>,
    uri: Uri,
) -> Response {
    let faults = match read_faults(&app, &id, uri.path()).await {
        Ok(f) => f,
        Err(answer) => return answer,
    };
    let job = match visible(&app, &caller, &id) {
        Ok(job) => job,
        Err(e) => return tagged(e.into_response(), &id, faults),
    };
    let now = Instant::now();
    let response = if job.phase(now) == Phase::Ended {
        let object = job.object(now);
        Json(json!({
            "id": job.id,
            "object": "job_result",
            "status": object.status,
            "result": object.result,
            "error": object.error,
        }))
        .into_response()
    } else {
        ApiError::new(
            StatusCode::CONFLICT,
            "job_not_finished",
            format!("The job is {}; it has no result yet.", job.status(now)),
        )
        .into_response()
    };
    tagged(response, &id, faults)
}

/// The query of `GET /jobs`.
#[derive(Debug, Deserialize)]
pub struct ListParams {
    limit: Option<String>,
    cursor: Option<String>,
    status: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// `GET /jobs`: the caller's member's jobs, newest first.
pub async fn list_jobs(
    State(app): State<Shared>,
    Extension(caller): Extension<Arc<Caller>>,
    Query(params): Query<ListParams>,
) -> Result<Response, ApiError> {
    let limit = match params.limit.as_deref() {
        None | Some("") => DEFAULT_LIMIT,
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "limit must be a whole number from 1 to {MAX_LIMIT}."
                )))
            }
        },
    };
    let kind = match params.kind.as_deref().filter(|k| !k.is_empty()) {
        None => None,
        Some(k) => Some(
            Kind::from_object(k)
                .ok_or_else(|| ApiError::bad_request(format!("Unknown job type {k:?}.")))?,
        ),
    };
    let query = ListQuery {
        limit,
        cursor: params.cursor.filter(|c| !c.is_empty()),
        status: params.status.filter(|s| !s.is_empty()),
        kind,
        order: app.list_order,
    };
    let stuck = query.cursor.clone().filter(|_| {
        let mut rng = rand::thread_rng();
        app.faults().draw_list_stuck(&mut rng)
    });
    let now = Instant::now();
    let (page, has_more) = app.store.list(&caller, now, &query);
    let (next_cursor, has_more) = match stuck {
        Some(asked) => (Some(asked), true),
        None if has_more => (page.last().map(|j| j.id.clone()), true),
        None => (None, false),
    };
    let data: Vec<_> = page.iter().map(|j| j.object(now)).collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "has_more": has_more,
        "next_cursor": next_cursor,
    }))
    .into_response())
}
