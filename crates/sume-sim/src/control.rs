//! Run-time controls beside the fault probabilities: what a key may do (Sume's 402 and 403)
//! and the clock webhooks are signed by.
//!
//! - `GET /sim/keys`, `PATCH /sim/keys/{name}` with `{"reads": "out_of_credits"}` (or
//!   `"no_scope"`, `"ok"`; `"creates"` likewise): a key out of credits answers 402
//!   `insufficient_credits`, a key without the scope 403 `insufficient_scope`. The docs list
//!   both statuses and the meaning of 402; the codes, and that a read can answer 402, are this
//!   project's assumptions.
//! - `GET /sim/clock`, `PATCH /sim/clock` with `{"offset_secs": -2400}`: moves the clock every
//!   delivery attempt is signed by (`X-Sume-Timestamp`), so a test can have an event signed
//!   40 minutes ago without waiting 40 minutes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, patch};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::api::error::ApiError;
use crate::app::Shared;

/// What a key may do with one class of requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Served as usual.
    #[default]
    Ok,
    /// 402 `insufficient_credits`: "402 (insufficient credits)".
    OutOfCredits,
    /// 403 `insufficient_scope`: the key lacks the scope.
    NoScope,
}

impl Access {
    /// The error this access answers with, `None` when the request is served.
    pub fn refusal(self) -> Option<ApiError> {
        match self {
            Access::Ok => None,
            Access::OutOfCredits => Some(ApiError::new(
                StatusCode::PAYMENT_REQUIRED,
                "insufficient_credits",
                "The workspace has no credits left. Add credits to continue.",
            )),
            Access::NoScope => Some(ApiError::new(
                StatusCode::FORBIDDEN,
                "insufficient_scope",
                "This API key lacks the scope this endpoint needs.",
            )),
        }
    }
}

/// A key's access, reads and creates apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyAccess {
    /// Every GET under the API.
    #[serde(default)]
    pub reads: Access,
    /// Every POST under the API.
    #[serde(default)]
    pub creates: Access,
}

/// The controls' state, in the shared [`crate::app::App`].
#[derive(Debug, Default)]
pub struct Controls {
    access: RwLock<BTreeMap<String, KeyAccess>>,
    /// Seconds added to the real time in every `X-Sume-Timestamp`.
    pub clock_offset: Arc<AtomicI64>,
}

impl Controls {
    /// The access of the key named `name` (every key starts [`KeyAccess::default`]).
    pub fn access(&self, name: &str) -> KeyAccess {
        let access = self.access.read().expect("access lock");
        access.get(name).copied().unwrap_or_default()
    }
}

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/sim/keys", get(keys))
        .route("/sim/keys/{name}", patch(patch_key))
        .route("/sim/clock", get(clock).patch(patch_clock))
}

async fn keys(State(app): State<Shared>) -> Json<BTreeMap<String, KeyAccess>> {
    Json(
        app.keys
            .callers()
            .iter()
            .map(|c| (c.name.clone(), app.controls.access(&c.name)))
            .collect(),
    )
}

async fn patch_key(
    State(app): State<Shared>,
    Path(name): Path<String>,
    Json(access): Json<KeyAccess>,
) -> Result<Json<KeyAccess>, ApiError> {
    if !app.keys.callers().iter().any(|c| c.name == name) {
        return Err(ApiError::not_found("key"));
    }
    let mut all = app.controls.access.write().expect("access lock");
    all.insert(name, access);
    Ok(Json(access))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockPatch {
    offset_secs: i64,
}

async fn clock(State(app): State<Shared>) -> Json<serde_json::Value> {
    let offset = app.controls.clock_offset.load(Ordering::SeqCst);
    Json(json!({
        "offset_secs": offset,
        "signing_now": chrono::Utc::now().timestamp() + offset,
    }))
}

/// The largest clock offset, either way: ten years (signing times stay dates).
const MAX_CLOCK_OFFSET_SECS: i64 = 3650 * 86_400;

async fn patch_clock(
    State(app): State<Shared>,
    Json(patch): Json<ClockPatch>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if patch.offset_secs.unsigned_abs() > MAX_CLOCK_OFFSET_SECS as u64 {
        return Err(ApiError::bad_request(format!(
            "offset_secs must be within ±{MAX_CLOCK_OFFSET_SECS} (ten years)"
        )));
    }
    app.controls
        .clock_offset
        .store(patch.offset_secs, Ordering::SeqCst);
    Ok(clock(State(app)).await)
}
