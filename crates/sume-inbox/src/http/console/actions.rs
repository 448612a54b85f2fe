//! The console's writes, each behind the session's CSRF token and recorded in the audit table:
//! replaying dead letters (what `POST /v1/dead-letters/replay` does), dropping one, and
//! replaying one set-aside event (what `POST /v1/events/{id}/replay` and `sume-inbox replay`
//! do: verified again with the current secrets, back into the inbox, attached).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;
use sume_wire::event::MAX_EVENT_ID_LEN;

use super::list_pages::urlencode;
use super::sessions::{actor, audit, require_csrf, unrecorded};
use super::{layout, ConsoleState};
use crate::http::admin::current_request_id;
use crate::operations::replay::{self, Unrecorded};

/// The replay form's field.
#[derive(Debug, Deserialize)]
pub struct ReplayForm {
    /// Missing reads as empty: refused 403 as a wrong one, not 422.
    #[serde(default)]
    csrf: String,
}

fn failed(what: &str, e: &crate::db::DbError) -> Response {
    tracing::error!(error = %e, "console: {what} failed");
    layout::message(
        StatusCode::SERVICE_UNAVAILABLE,
        "Database unavailable",
        &format!("{what} failed: see the daemon's log."),
    )
}

/// A 404 page for an id no row can have: one holding a NUL character
/// ([`crate::db::text_can_hold`] refuses it) or longer than any stored id
/// ([`MAX_EVENT_ID_LEN`] bytes, as the admin API refuses). Answered before any statement and
/// not audited, so the audit log never keeps such an id (a megabyte of it) whole.
fn names_nothing(title: &str, id: &str) -> Option<Response> {
    let why = if !crate::db::text_can_hold(id) {
        "No id holds a NUL character (%00).".to_owned()
    } else if id.len() > MAX_EVENT_ID_LEN {
        format!(
            "No id is longer than {MAX_EVENT_ID_LEN} bytes (this one is {}).",
            id.len()
        )
    } else {
        return None;
    };
    Some(layout::message(StatusCode::NOT_FOUND, title, &why))
}

/// `POST /console/dead-letters/replay`: every dead letter not replayed yet, read again.
pub async fn replay(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    Form(f): Form<ReplayForm>,
) -> Response {
    let operator = match require_csrf(&state, &headers, &f.csrf) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    let admin = &state.admin;
    let replayed = match replay::replay_dead_letters(&admin.store, &admin.secrets, 1000).await {
        Ok(r) => r,
        Err(e) => return failed("Replay", &e),
    };
    let detail = serde_json::json!({ "limit": 1000, "result": replayed });
    if let Err(r) = audit(&state, &operator, "replay_dead_letters", detail).await {
        return r;
    }
    Redirect::to("/console/dead-letters").into_response()
}

/// The drop form's fields.
#[derive(Debug, Deserialize)]
pub struct DropForm {
    /// Missing reads as empty: refused 403 as a wrong one, not 422.
    #[serde(default)]
    csrf: String,
    id: String,
}

/// `POST /console/dead-letters/drop`: an operator's decision that this dead letter is not wanted.
pub async fn drop(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    Form(f): Form<DropForm>,
) -> Response {
    let operator = match require_csrf(&state, &headers, &f.csrf) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    if let Some(page) = names_nothing("No such dead letter", &f.id) {
        return page;
    }
    let ids = vec![f.id];
    let dropped = match state.admin.store.dead_letters_drop(&ids).await {
        Ok(d) => d,
        Err(e) => return failed("Dropping the dead letter", &e),
    };
    let not_found: Vec<&String> = ids.iter().filter(|i| !dropped.contains(i)).collect();
    let detail = serde_json::json!({ "dropped": dropped, "not_found": not_found });
    if let Err(r) = audit(&state, &operator, "drop_dead_letters", detail).await {
        return r;
    }
    Redirect::to("/console/dead-letters").into_response()
}

/// The form of a set-aside event's replay.
#[derive(Debug, Deserialize)]
pub struct ReplayEventForm {
    /// Missing reads as empty: refused 403 as a wrong one, not 422.
    #[serde(default)]
    csrf: String,
    event_id: String,
}

/// `POST /console/set-aside/replay`: one set-aside event back into the inbox, attached when its
/// job's row exists; then the job's timeline, which shows what came of it.
pub async fn replay_event(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    Form(f): Form<ReplayEventForm>,
) -> Response {
    let operator = match require_csrf(&state, &headers, &f.csrf) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    if let Some(page) = names_nothing("No such event", &f.event_id) {
        return page;
    }
    // Audited found or not, as the admin API and `sume-inbox replay` do.
    let (store, secrets) = (&state.admin.store, &state.admin.secrets);
    let (actor, request_id) = (actor(&operator), current_request_id());
    let audited =
        replay::replay_event_audited(store, secrets, &f.event_id, &actor, request_id.as_deref());
    let replayed = match audited.await {
        Ok(r) => r,
        Err(Unrecorded::Replay(e)) => return failed("Replay", &e),
        Err(Unrecorded::Audit(e)) => return unrecorded(&e),
    };
    // In the console's terms: the operation's own words name the command's flag.
    let Some(job_id) = replayed.job_id else {
        return layout::message(
            StatusCode::NOT_FOUND,
            "No such event",
            "No event is stored under this id; a dead letter is replayed from the Dead letters page.",
        );
    };
    Redirect::to(&format!("/console/jobs?q={}", urlencode(&job_id))).into_response()
}
