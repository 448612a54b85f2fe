//! The operator's writes on the admin API, each recorded in the audit log (who, what, when,
//! the request): replaying an event, replaying dead letters, dropping dead letters. Replay is
//! what `sume-inbox replay` does ([`crate::ops`]): the stored delivery is verified again with
//! the current secrets and goes back through the normal path, so replaying twice changes
//! nothing the second time.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::forms;
use super::openapi::ErrorBody;
use super::{current_request_id, unavailable, AdminState, JsonBody, NoQuery, PathId};
use crate::http::ApiError;
use crate::operations::replay::{self, Replayed, Unrecorded};
use sume_wire::event::MAX_EVENT_ID_LEN;

/// `X-Actor`, when a caller names who acts, after `api:operator`: its UTF-8 text (anything
/// else as U+FFFD) without control or format characters ([`crate::operations::actor_name`]),
/// cut to 64 characters (marked `…`).
fn actor(headers: &HeaderMap) -> String {
    let named = headers.get("x-actor").map(|v| {
        let shown = crate::operations::actor_name(&String::from_utf8_lossy(v.as_bytes()));
        match shown.char_indices().nth(64) {
            Some((cut, _)) => format!("{}…", &shown[..cut]),
            None => shown,
        }
    });
    match named.filter(|n| !n.is_empty()) {
        Some(name) => format!("api:operator ({name})"),
        None => "api:operator".to_owned(),
    }
}

/// Records the action; a failure to record is an error of the answer, not silence.
async fn audited(
    state: &AdminState,
    headers: &HeaderMap,
    action: &str,
    detail: Value,
) -> Result<(), Response> {
    state
        .store
        .audit_log_insert(
            &actor(headers),
            action,
            &detail,
            current_request_id().as_deref(),
        )
        .await
        .map_err(|e| unavailable("recording the audit entry failed", &e))
}

/// The body of `POST /v1/events/{event_id}/replay`: nothing (`{}`).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayEvent {}

/// `POST /v1/events/{event_id}/replay`: a set-aside event back into the inbox, a waiting one
/// attached; an applied one is left as it is.
#[utoipa::path(post, path = "/v1/events/{event_id}/replay", tag = "operator",
    operation_id = "replay_event",
    params(("event_id" = String, Path, description = "The event's dedupe key \
        (percent-encoded; an id of `.` or `..` with each `.` written `%2E`, which clients \
        would otherwise resolve away as a dot-segment)")),
    request_body = ReplayEvent,
    responses((status = 200, description = "What the replay did", body = Replayed),
               (status = 404, description = "No such event (`not_found`)", body = ErrorBody)))]
pub(super) async fn replay_event(
    State(state): State<AdminState>,
    _: NoQuery,
    PathId(event_id): PathId,
    headers: HeaderMap,
    _: JsonBody<ReplayEvent>,
) -> Response {
    if !crate::db::text_can_hold(&event_id) || event_id.len() > MAX_EVENT_ID_LEN {
        return no_such_event().into_response();
    }
    // Audited found or not (`"ok": false` for an unknown event), as `sume-inbox replay` does.
    let (store, secrets) = (&state.store, &state.secrets);
    let (actor, request_id) = (actor(&headers), current_request_id());
    let audited =
        replay::replay_event_audited(store, secrets, &event_id, &actor, request_id.as_deref());
    let replayed = match audited.await {
        Ok(r) => r,
        Err(Unrecorded::Replay(e)) => return unavailable("replay failed", &e),
        Err(Unrecorded::Audit(e)) => return unavailable("recording the audit entry failed", &e),
    };
    if replayed.job_id.is_none() {
        return no_such_event().into_response();
    }
    Json(replayed).into_response()
}

/// The 404 of a replay naming no stored event, in the API's terms (the command's own words
/// name its flag).
fn no_such_event() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such event: no event is stored under this event_id (a dead letter is replayed with \
         POST /v1/dead-letters/replay)",
    )
}

/// The body of `POST /v1/dead-letters/replay`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayDeadLetters {
    /// The most dead letters to replay, 1 to 10000 (default 1000).
    #[serde(default, deserialize_with = "whole_number")]
    #[schema(minimum = 1, maximum = 10000)]
    pub limit: Option<i64>,
}

/// A JSON number without a fraction, as JSON Schema's `integer` reads one: `1000`, `1000.0` and
/// `1e3` alike; `1.5` is refused.
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let whole = n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 1e18)
            .map(|f| f as i64)
    });
    whole.map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "a whole number of 1 to {} is expected, not {n}",
            replay::REPLAY_LIMIT_MAX
        ))
    })
}

/// What a replay of dead letters did with each.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReplayedList {
    /// One entry per dead letter looked at.
    pub replayed: Vec<Replayed>,
}

/// `POST /v1/dead-letters/replay`: every dead letter not replayed yet is read again; one that
/// now names a job is stored and attached.
#[utoipa::path(post, path = "/v1/dead-letters/replay", tag = "operator",
    operation_id = "replay_dead_letters", request_body = ReplayDeadLetters,
    responses((status = 200, description = "What the replay did with each", body = ReplayedList),
               (status = 422, description = "limit out of 1 to 10000 (`invalid_field`), or a body \
                not of this shape (`invalid_body`)", body = ErrorBody)))]
pub(super) async fn replay_dead_letters(
    State(state): State<AdminState>,
    _: NoQuery,
    headers: HeaderMap,
    JsonBody(body): JsonBody<ReplayDeadLetters>,
) -> Response {
    let limit = body.limit.unwrap_or(1000);
    if !(1..=replay::REPLAY_LIMIT_MAX).contains(&limit) {
        return ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
            format!("limit must be 1 to {}", replay::REPLAY_LIMIT_MAX),
        )
        .into_response();
    }
    let replayed = match replay::replay_dead_letters(&state.store, &state.secrets, limit).await {
        Ok(r) => r,
        Err(e) => return unavailable("replay failed", &e),
    };
    let detail = serde_json::json!({ "limit": limit, "result": replayed });
    if let Err(r) = audited(&state, &headers, "replay_dead_letters", detail).await {
        return r;
    }
    Json(ReplayedList { replayed }).into_response()
}

/// The body of `POST /v1/dead-letters/drop`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DropDeadLetters {
    /// The dead letters' ids.
    #[schema(schema_with = forms::dead_letter_ids)]
    pub ids: Vec<String>,
}

/// Why a drop of `ids` is refused, when it is: 1 to [`forms::DROP_MAX`] ids, each within
/// [`forms::DEAD_LETTER_ID_MAX`] characters (no dead letter's id is longer: one past it is
/// refused before the audit entry would keep it whole), not blank (as the CLI refuses one: a
/// blank id names no dead letter, and is surely a mistake) and without a NUL character (nor
/// could the audit entry name it).
pub(super) fn refusal(ids: &[String]) -> Option<String> {
    let max = forms::DEAD_LETTER_ID_MAX;
    if ids.is_empty() || ids.len() > forms::DROP_MAX {
        return Some(format!(
            "ids must hold 1 to {} dead letter ids",
            forms::DROP_MAX
        ));
    }
    if let Some(long) = ids.iter().find(|i| i.chars().count() > max) {
        return Some(format!(
            "ids must be at most {max} characters, as every dead letter's is (one is {} \
             characters)",
            long.chars().count()
        ));
    }
    if !ids.iter().all(|i| crate::db::text_can_hold(i)) {
        return Some("ids must not hold a NUL character".to_owned());
    }
    if ids.iter().any(|i| i.trim().is_empty()) {
        return Some("ids must not be empty or blank".to_owned());
    }
    None
}

/// What a drop did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Dropped {
    /// Removed now.
    pub dropped: Vec<String>,
    /// Named no dead letter (dropped before, or never stored).
    pub not_found: Vec<String>,
}

/// `POST /v1/dead-letters/drop`: an operator's decision that these dead letters are not wanted.
#[utoipa::path(post, path = "/v1/dead-letters/drop", tag = "operator",
    operation_id = "drop_dead_letters", request_body = DropDeadLetters,
    responses((status = 200, description = "What was dropped", body = Dropped),
               (status = 422, description = "ids empty, over 1000, one blank, over 511 \
                characters or holding a NUL character (`invalid_field`), or a body not of this \
                shape (`invalid_body`)", body = ErrorBody)))]
pub(super) async fn drop_dead_letters(
    State(state): State<AdminState>,
    _: NoQuery,
    headers: HeaderMap,
    JsonBody(body): JsonBody<DropDeadLetters>,
) -> Response {
    if let Some(why) = refusal(&body.ids) {
        return ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_field", why)
            .into_response();
    }
    // An id named twice is dropped once, and said once in the answer and the audit entry.
    let mut ids = body.ids;
    let mut seen = std::collections::HashSet::new();
    ids.retain(|i| seen.insert(i.clone()));
    let dropped = match state.store.dead_letters_drop(&ids).await {
        Ok(d) => d,
        Err(e) => return unavailable("dropping dead letters failed", &e),
    };
    let not_found: Vec<String> = ids.into_iter().filter(|i| !dropped.contains(i)).collect();
    let answer = Dropped { dropped, not_found };
    let detail = serde_json::json!({ "dropped": answer.dropped, "not_found": answer.not_found });
    if let Err(r) = audited(&state, &headers, "drop_dead_letters", detail).await {
        return r;
    }
    Json(answer).into_response()
}
