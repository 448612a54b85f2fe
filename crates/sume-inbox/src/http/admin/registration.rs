//! `POST /v1/jobs` `{"job_id","order_id"?,"api_key"?}`: registers the job and attaches its
//! waiting events at once; 201 with the job when new, 200 when the same registration was
//! repeated, 409 when the id is already registered with another order or key, 422 for a field
//! out of bounds (1 to 255 characters, not blank, no control character) or a key name no
//! instance of the fleet holds.
//!
//! A key name is judged against the fleet, not this instance alone: instances may hold
//! different keys (README, "Sweep, job side"), and whichever instance takes a registration,
//! the sweep leaves the job to one that holds its key. So a name is accepted when this instance
//! or any live instance (by its heartbeat) holds it; a name none holds is a typo, refused
//! naming the names the fleet holds. A registration the existing row already records is a
//! repeat, answered 200 whatever its key: the key was accepted when the row was written (or
//! the row was written by the application's own SQL).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use super::forms;
use super::openapi::ErrorBody;
use super::{unavailable, AdminState, JsonBody, NoQuery};
use crate::db::{JobRow, NewJob, Registered};
use crate::http::error;

/// The body of `POST /v1/jobs`. Each field is 1 to 255 characters (as the database's check on
/// `sume.jobs.job_id` counts them), not blank, with no control character.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    /// Sume's job id.
    #[schema(schema_with = job_id)]
    job_id: String,
    /// The application's own reference.
    #[serde(default)]
    #[schema(schema_with = order_id)]
    order_id: Option<String>,
    /// The name of a key of SUME_API_KEYS, held by this instance or by another live instance
    /// of the fleet.
    #[serde(default)]
    #[schema(schema_with = api_key)]
    api_key: Option<String>,
}

fn job_id() -> utoipa::openapi::Object {
    forms::name(
        "Sume's job id: 1 to 255 characters, not blank, no control character. (A webhook names \
         ids of at most 255 bytes, as Sume's are: an id longer in bytes, of characters beyond \
         ASCII, closes only when given up.)",
        false,
    )
}

fn order_id() -> utoipa::openapi::Object {
    forms::name(
        "The application's own reference: 1 to 255 characters, not blank, no control \
         character.",
        true,
    )
}

fn api_key() -> utoipa::openapi::Object {
    forms::name(
        "The name of a key of SUME_API_KEYS, held by this instance or by another live instance \
         of the fleet (else 422 `unknown_api_key`): 1 to 255 characters, not blank, no control \
         character.",
        true,
    )
}

/// A registration refused because the id is registered with another order or key.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Conflict {
    /// `job_exists`.
    pub error: super::openapi::ErrorDetail,
    /// The job as it is registered.
    pub job: JobRow,
    /// The request's id.
    pub request_id: String,
}

/// `None` when the value is usable ([`forms::usable_name`]), else the 422 to answer.
fn bad_id(field: &str, value: &str) -> Option<Response> {
    (!forms::usable_name(value)).then(|| {
        error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
            format!(
                "{field} must be 1 to {} characters, not blank, without control characters \
                 (got {} characters)",
                forms::NAME_MAX,
                value.chars().count()
            ),
        )
    })
}

/// What the key check found.
enum KeyCheck {
    /// No key named, or one this instance or a live instance holds: register.
    Accepted,
    /// The existing row records this very registration: a repeat, whatever the key.
    Repeat,
}

/// Whether `job`'s key may be registered (the module's doc says when); the 422 or 503 to
/// answer when not.
async fn key_check(state: &AdminState, job: &NewJob) -> Result<KeyCheck, Response> {
    let Some(key) = &job.api_key else {
        return Ok(KeyCheck::Accepted);
    };
    if state.key_names.is_empty() || state.key_names.contains(key) {
        return Ok(KeyCheck::Accepted);
    }
    let fleet = state
        .store
        .instances_live_key_names()
        .await
        .map_err(|e| unavailable("reading the fleet's key names failed", &e))?;
    if fleet.contains(key) {
        return Ok(KeyCheck::Accepted);
    }
    let existing = state
        .store
        .jobs_get(&job.job_id)
        .await
        .map_err(|e| unavailable("reading the job failed", &e))?;
    if existing.is_some_and(|row| job.repeats(&row)) {
        return Ok(KeyCheck::Repeat);
    }
    let mut names: Vec<&str> = state
        .key_names
        .iter()
        .chain(&fleet)
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    names.dedup();
    Err(error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown_api_key",
        format!(
            "api_key {key:?} is not the name of a key this instance or any live instance holds \
             (configured: {})",
            names.join(", ")
        ),
    ))
}

/// `POST /v1/jobs`.
#[utoipa::path(post, path = "/v1/jobs", tag = "application", operation_id = "register_job",
    params(("traceparent" = Option<String>, Header, description = "W3C Trace Context of the \
        application's request: kept with the job (a later version's first 55 characters, \
        as W3C Trace Context reads it), so that the span of its close (traces \
        exported) links to this trace; an invalid value is ignored")),
    request_body = Registration,
    responses((status = 201, description = "Registered", body = JobRow),
               (status = 200, description = "The same registration again", body = JobRow),
               (status = 409, description = "Registered with another order or key (`job_exists`)",
                body = Conflict),
               (status = 422, description = "A field out of bounds (`invalid_field`), an api_key \
                that neither this instance nor any live instance holds (`unknown_api_key`, \
                naming those they hold; a repeat of an existing registration is a 200 \
                whatever its key), or a body not of this shape", body = ErrorBody)))]
pub(super) async fn register(
    State(state): State<AdminState>,
    _: NoQuery,
    headers: axum::http::HeaderMap,
    JsonBody(reg): JsonBody<Registration>,
) -> Response {
    if let Some(r) = bad_id("job_id", &reg.job_id) {
        return r;
    }
    if let Some(r) = reg.order_id.as_deref().and_then(|o| bad_id("order_id", o)) {
        return r;
    }
    if let Some(r) = reg.api_key.as_deref().and_then(|k| bad_id("api_key", k)) {
        return r;
    }
    let job = NewJob {
        job_id: reg.job_id,
        order_id: reg.order_id,
        api_key: reg.api_key,
        traceparent: headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(crate::process::traces::kept_traceparent)
            .map(str::to_owned),
    };
    let registered = match key_check(&state, &job).await {
        Ok(KeyCheck::Accepted) => state.store.register_job(&job).await,
        Ok(KeyCheck::Repeat) => Ok(Registered::Existing),
        Err(r) => return r,
    };
    let status = match registered {
        Ok(Registered::Created) => StatusCode::CREATED,
        Ok(Registered::Existing) => StatusCode::OK,
        Ok(Registered::Conflict(existing)) => {
            let body = serde_json::json!({
                "error": {
                    "code": "job_exists",
                    "message": "this job id is registered with another order_id or api_key",
                },
                "job": existing,
                "request_id": super::current_request_id(),
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
