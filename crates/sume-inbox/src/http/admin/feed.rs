//! The feed of closes: `GET /v1/closes?after=<cursor>&limit=N`, a page of the closes after the
//! cursor (none or `0`: from the start), `{"closes":[...],"next_cursor"}`; every close comes in
//! order, none is skipped when closes commit out of order. A cursor no answer of this database
//! can have given is refused rather than answered an empty page for good: one of transaction
//! id 0 to 2 by its form (400), one ahead of the database by its state (409 `cursor_ahead`).
//!
//! `GET /v1/jobs?closed_after=<cursor>` is the same feed as applications first read it, kept
//! for them as it answers (its refusals 400 `invalid_query`), and out of the document: a second
//! mode of the list's route, which one operation of the document cannot state.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::forms::Cursor;
use super::openapi::ErrorBody;
use super::paging::{bad_query, page_limit};
use super::{unavailable, AdminState};
use crate::db::{FeedCursor, FeedPage};
use crate::http::error;

/// The query of `GET /v1/closes`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ClosesQuery {
    /// The closes after this cursor: a `cursor` or `next_cursor` an answer gave; none, `0` or
    /// empty, from the start. One of another database, or saved before a restore, is 409
    /// `cursor_ahead`: resume from `0`.
    #[param(nullable = false, value_type = Option<Cursor>)]
    after: Option<String>,
    /// Closes per page, 1 to 1000 (default 100).
    #[param(nullable = false, minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

/// The route a feed's page was asked on, for the words and status of its refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// `GET /v1/closes?after=`.
    Closes,
    /// `GET /v1/jobs?closed_after=`, answered as it was before `/v1/closes`.
    ClosedAfter,
}

impl Asked {
    fn parameter(self) -> &'static str {
        match self {
            Asked::Closes => "after",
            Asked::ClosedAfter => "closed_after",
        }
    }
}

/// `GET /v1/closes`: the feed of closes, a page after the cursor.
#[utoipa::path(get, path = "/v1/closes", tag = "application", operation_id = "list_closes",
    params(ClosesQuery),
    responses((status = 200, description = "A page of the feed", body = FeedPage),
               (status = 400, description = "A bad query (`invalid_query`): `after` not of a \
                cursor's form, or of transaction id 0 to 2, which no close carries; `limit` \
                out of bounds", body = ErrorBody),
               (status = 409, description = "`after` is ahead of every transaction of this \
                database (`cursor_ahead`): a cursor of another database, or saved before a \
                restore. Resume from `0` (entries may come again: handle them idempotently)",
                body = ErrorBody)))]
pub(super) async fn closes(
    State(state): State<AdminState>,
    query: Result<Query<ClosesQuery>, QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(q) => q,
        Err(e) => return bad_query(e.body_text()).into_response(),
    };
    let limit = match page_limit(query.limit) {
        Ok(n) => n,
        Err(r) => return r.into_response(),
    };
    let cursor = query.after.filter(|c| !c.is_empty());
    page(
        &state,
        cursor.as_deref().unwrap_or("0"),
        limit,
        Asked::Closes,
    )
    .await
}

/// A page of the feed after `cursor` (as written in the query).
pub(super) async fn page(state: &AdminState, cursor: &str, limit: i64, asked: Asked) -> Response {
    let cursor: FeedCursor = match cursor.parse() {
        Ok(c) => c,
        Err(e) if asked == Asked::Closes => {
            return bad_query(format!("after: {e}")).into_response()
        }
        Err(e) => return bad_query(e.to_string()).into_response(),
    };
    let page = match state.store.job_closes_after(cursor, limit).await {
        Ok(page) => page,
        Err(e) => return unavailable("reading the feed of closes failed", &e),
    };
    if page.closes.is_empty() && cursor != FeedCursor::START {
        match state.store.feed_cursor_ahead(cursor).await {
            Ok(true) => return ahead(cursor, asked),
            Ok(false) => {}
            Err(e) => return unavailable("reading the feed of closes failed", &e),
        }
    }
    Json(page).into_response()
}

/// The refusal of a cursor ahead of every transaction of this database.
fn ahead(cursor: FeedCursor, asked: Asked) -> Response {
    let message = format!(
        "{}={cursor} is ahead of every transaction of this database: a cursor of another \
         database, or saved before a restore; resume from 0 (entries may come again: handle \
         them idempotently)",
        asked.parameter()
    );
    match asked {
        Asked::Closes => error(StatusCode::CONFLICT, "cursor_ahead", message),
        Asked::ClosedAfter => bad_query(message).into_response(),
    }
}
