//! The create endpoints (`POST /videos/generations`, `/images/generations`, `/ads/videos`,
//! `/face-swap`, `/reference-analysis`, `/avatars`, `/avatar-videos`): one handler for all.
//!
//! It answers 202 with `{"object":<kind>,"job":{"id","status":"queued"},"job_id"}`. The body
//! may name a `webhook_url` (else `--webhook-url` applies) and a `"sim"` object of per-job
//! fault overrides; anything else in it is the generation request and is accepted as is.
//! `Idempotency-Key` makes a repeated create answer the job it made the first time. For an
//! early job the answer waits until the first webhook attempt has had its answer.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{post, MethodRouter};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::error::{ApiError, Tag};
use crate::app::Shared;
use crate::config::is_http_url;
use crate::faults::JobOverrides;
use crate::job::{rfc3339, Job, Kind};
use crate::keys::Caller;
use crate::lifecycle::{self, NewJob};
use crate::store::Created;

/// The longest `Idempotency-Key` accepted.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// The route of one create endpoint.
pub fn route(kind: Kind) -> MethodRouter<Shared> {
    post(
        move |state: State<Shared>,
              caller: Extension<Arc<Caller>>,
              headers: HeaderMap,
              body: Bytes| create(kind, state, caller, headers, body),
    )
}

/// What the create body says, beyond the generation request itself.
struct Asked {
    webhook_url: Option<String>,
    overrides: Option<JobOverrides>,
}

fn read_body(body: &[u8], default_url: Option<&String>) -> Result<Asked, ApiError> {
    let value: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("The body is not valid JSON: {e}")))?
    };
    let fields = value
        .as_object()
        .ok_or_else(|| ApiError::bad_request("The body must be a JSON object."))?;
    let webhook_url = match fields.get("webhook_url") {
        None | Some(Value::Null) => default_url.cloned(),
        Some(Value::String(url)) if is_http_url(url) => Some(url.clone()),
        Some(_) => {
            return Err(ApiError::bad_request(
                "webhook_url must be an absolute http(s) URL.",
            ))
        }
    };
    let overrides: Option<JobOverrides> = match fields.get("sim") {
        None | Some(Value::Null) => None,
        Some(sim) => Some(
            serde_json::from_value(sim.clone())
                .map_err(|e| ApiError::bad_request(format!("Bad \"sim\" overrides: {e}")))?,
        ),
    };
    let times = overrides.iter().flat_map(|o| [o.duration_ms, o.queued_ms]);
    if times.flatten().any(|ms| ms > MAX_OVERRIDE_MS) {
        return Err(ApiError::bad_request(format!(
            "Bad \"sim\" overrides: duration_ms and queued_ms are at most {MAX_OVERRIDE_MS} \
             (30 days)."
        )));
    }
    Ok(Asked {
        webhook_url,
        overrides,
    })
}

/// The longest job a create may ask for: 30 days, in milliseconds (a job's times are dates).
const MAX_OVERRIDE_MS: u64 = 30 * 86_400_000;

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(raw) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = raw
        .to_str()
        .map_err(|_| ApiError::bad_request("Idempotency-Key must be visible ASCII."))?
        .trim();
    if key.len() > MAX_IDEMPOTENCY_KEY {
        return Err(ApiError::bad_request(format!(
            "Idempotency-Key is longer than {MAX_IDEMPOTENCY_KEY} characters."
        )));
    }
    Ok((!key.is_empty()).then(|| key.to_owned()))
}

async fn create(
    kind: Kind,
    State(app): State<Shared>,
    Extension(caller): Extension<Arc<Caller>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let asked = read_body(&body, app.default_webhook_url.as_ref())?;
    let idem = idempotency_key(&headers)?;
    let new = NewJob {
        kind,
        owner: caller.clone(),
        webhook_url: asked.webhook_url,
        idempotency_key: idem.clone(),
        overrides: asked.overrides,
    };
    let created = app.store.create(&caller.name, idem.as_deref(), |id| {
        lifecycle::make_job(&app, id, new)
    });
    Ok(match created {
        Created::Replayed(job) => {
            let mut response = accepted(&job);
            response
                .headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            response
        }
        Created::New(job) => {
            if let Some(first_attempt) = lifecycle::start(&app, job.clone()) {
                // The early fault: the webhook races, and beats, this answer.
                let _ = first_attempt.await;
            }
            accepted(&job)
        }
    })
}

/// The 202 of a create call. It always reports `queued`: that is what the job was when the
/// call was taken, even if (early fault) it has ended since.
fn accepted(job: &Job) -> Response {
    let body = json!({
        "object": job.kind.object(),
        "job": {
            "id": job.id,
            "status": "queued",
            "created_at": rfc3339(job.created_wall),
        },
        "job_id": job.id,
    });
    let mut response = (StatusCode::ACCEPTED, Json(body)).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/jobs/{}", job.id)) {
        response.headers_mut().insert("location", location);
    }
    Tag {
        job_id: Some(job.id.clone()),
        faults: Vec::new(),
    }
    .attach(response)
}
