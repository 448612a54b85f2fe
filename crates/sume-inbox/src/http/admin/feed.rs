//! `GET /v1/jobs?closed_after=<cursor>&limit=N`, the feed of closes: a page after the cursor,
//! and a cursor no answer of this database can have given refused rather than answered an
//! empty page for good.

use axum::response::{IntoResponse, Response};
use axum::Json;

use super::job_routes::JobsAnswer;
use super::paging::bad_query;
use super::{unavailable, AdminState};
use crate::db::FeedCursor;

/// A page of the feed after `cursor` (as written in the query).
pub(super) async fn page(state: &AdminState, cursor: &str, limit: i64) -> Response {
    let cursor: FeedCursor = match cursor.parse() {
        Ok(c) => c,
        Err(e) => return bad_query(e.to_string()).into_response(),
    };
    let page = match state.store.job_closes_after(cursor, limit).await {
        Ok(page) => page,
        Err(e) => return unavailable("reading the feed of closes failed", &e),
    };
    if page.closes.is_empty() && cursor != FeedCursor::START {
        match state.store.feed_cursor_ahead(cursor).await {
            Ok(true) => {
                return bad_query(format!(
                    "closed_after={cursor} is ahead of every transaction of this database: a \
                     cursor of another database, or saved before a restore; resume from 0 \
                     (entries may come again: handle them idempotently)"
                ))
                .into_response()
            }
            Ok(false) => {}
            Err(e) => return unavailable("reading the feed of closes failed", &e),
        }
    }
    Json(JobsAnswer::Feed(page)).into_response()
}
