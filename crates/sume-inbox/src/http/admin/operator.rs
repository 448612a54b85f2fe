//! The operator's reads on the admin API, what `sume-inbox` prints from the database: a job
//! with its timeline, the inbox, set-aside events, orphans, disagreements, dead letters, the
//! stats and the audit log. Every list is keyset-paged ([`super::paging`]): `limit` and
//! `after=<next_after>` of the previous page, a position in the list's order
//! (`<RFC 3339 time>|<id>` for the lists ordered by a time, a whole number for the others).

use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use super::forms::{Age, TimeKey};
use super::openapi::ErrorBody;
use super::paging::{
    bad_query, next, number_page, page_of, time_page, NumberPageQuery, TimePageQuery, TIME_KEY_FORM,
};
use super::{unavailable, AdminState, NoQuery, PathId};
use crate::config::setting::MAX_DURATION;
use crate::db::{
    AuditEntry, DbError, DeadLetterRow, Disagreement, JobDetail, Orphan, PageKey, SetAsideEvent,
    Stats, WaitingEvent,
};
use crate::http::ApiError;

/// The inbox's query: a page, and how old its events must be.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct InboxQuery {
    /// Rows per page, 1 to 1000 (default 100).
    #[param(nullable = false, minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// `next_after` of the previous page: a position in the inbox's order,
    /// `<RFC 3339 time>|<id>`; empty, the start. Only its form is checked (400 `invalid_query`
    /// when it is not that): a well-formed one answers the events after it, whether or not a
    /// page ended there.
    #[param(nullable = false, value_type = Option<TimeKey>)]
    pub after: Option<String>,
    /// Events at least this old, e.g. `10m`; at most `3650d`.
    #[param(nullable = false, value_type = Option<Age>, example = "10m")]
    pub older_than: Option<String>,
}

macro_rules! page {
    ($name:ident, $field:ident, $row:ty, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Serialize, utoipa::ToSchema)]
        pub struct $name {
            /// The rows of this page.
            pub $field: Vec<$row>,
            /// Pass as `after` for the next page; `null` on the last page.
            pub next_after: Option<String>,
        }
    };
}

page!(
    InboxPage,
    events,
    WaitingEvent,
    "A page of waiting events, oldest first."
);
page!(
    SetAsidePage,
    events,
    SetAsideEvent,
    "A page of set-aside events."
);
page!(
    OrphanPage,
    orphans,
    Orphan,
    "A page of orphans, the oldest check first."
);
page!(
    DisagreementPage,
    disagreements,
    Disagreement,
    "A page of disagreements."
);
page!(
    DeadLetterPage,
    dead_letters,
    DeadLetterRow,
    "A page of dead letters, newest first."
);
page!(
    AuditPage,
    entries,
    AuditEntry,
    "A page of the audit log, newest first."
);

/// `older_than` as given: a duration up to [`MAX_DURATION`] (3650 days: past it a date
/// overflows).
pub(super) fn read_age(raw: &str) -> Result<Duration, ApiError> {
    match humantime::parse_duration(raw) {
        Ok(d) if d <= MAX_DURATION => Ok(d),
        _ => {
            let longest = crate::config::setting::longest_text(MAX_DURATION);
            Err(bad_query(format!(
                "older_than must be a duration like 10m, at most {longest}"
            )))
        }
    }
}

fn respond<T: Serialize>(what: &str, result: Result<T, DbError>) -> Response {
    match result {
        Ok(v) => Json(v).into_response(),
        Err(e) => unavailable(what, &e),
    }
}

/// `GET /v1/jobs/{job_id}/detail`: the job, every event of it, its disagreements and inbox check.
#[utoipa::path(get, path = "/v1/jobs/{job_id}/detail", tag = "operator",
    operation_id = "get_job_detail",
    params(("job_id" = String, Path, description = "Sume's job id \
        (percent-encoded; an id of `.` or `..` with each `.` written `%2E`, which clients \
        would otherwise resolve away as a dot-segment)")),
    responses((status = 200, description = "The job and its timeline", body = JobDetail),
               (status = 404, description = "No job and no event (`not_found`)", body = ErrorBody)))]
pub(super) async fn job_detail(
    State(state): State<AdminState>,
    _: NoQuery,
    PathId(job_id): PathId,
) -> Response {
    let none = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no job and no event for {job_id:?}"),
        )
        .into_response()
    };
    if !crate::db::text_can_hold(&job_id) {
        return none();
    }
    match state.store.job_detail(&job_id).await {
        Ok(d) if d.job.is_none() && d.events.is_empty() => none(),
        r => respond("reading the job failed", r),
    }
}

/// `GET /v1/inbox`: events waiting for their job, oldest first, with what each waits for.
#[utoipa::path(get, path = "/v1/inbox", tag = "operator", operation_id = "list_inbox", params(InboxQuery),
    responses((status = 200, description = "Waiting events, a page", body = InboxPage),
               (status = 400, description = "A bad query (`invalid_query`)", body = ErrorBody)))]
pub(super) async fn inbox(
    State(state): State<AdminState>,
    query: Result<Query<InboxQuery>, QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return bad_query(e.body_text()).into_response(),
    };
    let (limit, after) = match page_of(q.limit, q.after.as_deref(), TIME_KEY_FORM, PageKey::decode)
    {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let older_than = match q.older_than.as_deref().map(read_age).transpose() {
        Ok(age) => age.unwrap_or(Duration::ZERO),
        Err(e) => return e.into_response(),
    };
    let rows = state
        .store
        .events_waiting_page(older_than.as_secs_f64(), after.as_ref(), limit)
        .await;
    respond(
        "reading the inbox failed",
        rows.map(|events| InboxPage {
            next_after: next(&events, limit, |e| {
                PageKey::of(e.received_at, &e.event_id).encode()
            }),
            events,
        }),
    )
}

/// `GET /v1/set-aside`: events set aside as another workspace's, with each key's answer.
#[utoipa::path(get, path = "/v1/set-aside", tag = "operator", operation_id = "list_set_aside", params(TimePageQuery),
    responses((status = 200, description = "Set-aside events, a page", body = SetAsidePage),
               (status = 400, description = "A bad query (`invalid_query`)", body = ErrorBody)))]
pub(super) async fn set_aside(
    State(state): State<AdminState>,
    query: Result<Query<TimePageQuery>, QueryRejection>,
) -> Response {
    let (limit, after) = match time_page(query) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let rows = state
        .store
        .events_set_aside_page(after.as_ref(), limit)
        .await;
    respond(
        "reading set-aside events failed",
        rows.map(|events| SetAsidePage {
            next_after: next(&events, limit, |e| {
                PageKey::of(e.set_aside_at, &e.event_id).encode()
            }),
            events,
        }),
    )
}

/// `GET /v1/orphans`: jobs Sume knows, with events here, and no row.
#[utoipa::path(get, path = "/v1/orphans", tag = "operator", operation_id = "list_orphans", params(TimePageQuery),
    responses((status = 200, description = "Orphans, a page", body = OrphanPage),
               (status = 400, description = "A bad query (`invalid_query`)", body = ErrorBody)))]
pub(super) async fn orphans(
    State(state): State<AdminState>,
    query: Result<Query<TimePageQuery>, QueryRejection>,
) -> Response {
    let (limit, after) = match time_page(query) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let rows = state
        .store
        .inbox_checks_orphans_page(after.as_ref(), limit)
        .await;
    respond(
        "reading orphans failed",
        rows.map(|orphans| OrphanPage {
            next_after: next(&orphans, limit, |o| {
                PageKey::of(o.created_at, &o.job_id).encode()
            }),
            orphans,
        }),
    )
}

/// `GET /v1/disagreements`: terminal statuses that contradicted a job's first one.
#[utoipa::path(get, path = "/v1/disagreements", tag = "operator", operation_id = "list_disagreements", params(NumberPageQuery),
    responses((status = 200, description = "Disagreements, a page", body = DisagreementPage),
               (status = 400, description = "A bad query (`invalid_query`)", body = ErrorBody)))]
pub(super) async fn disagreements(
    State(state): State<AdminState>,
    query: Result<Query<NumberPageQuery>, QueryRejection>,
) -> Response {
    let (limit, after) = match number_page(query) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let rows = state.store.disagreements_page(after, limit).await;
    respond(
        "reading disagreements failed",
        rows.map(|disagreements| DisagreementPage {
            next_after: next(&disagreements, limit, |d| d.id.to_string()),
            disagreements,
        }),
    )
}

/// `GET /v1/dead-letters`: verified deliveries that name no job, newest first.
#[utoipa::path(get, path = "/v1/dead-letters", tag = "operator", operation_id = "list_dead_letters", params(TimePageQuery),
    responses((status = 200, description = "Dead letters, a page", body = DeadLetterPage),
               (status = 400, description = "A bad query (`invalid_query`)", body = ErrorBody)))]
pub(super) async fn dead_letters(
    State(state): State<AdminState>,
    query: Result<Query<TimePageQuery>, QueryRejection>,
) -> Response {
    let (limit, after) = match time_page(query) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let rows = state.store.dead_letters_page(after.as_ref(), limit).await;
    respond(
        "reading dead letters failed",
        rows.map(|dead_letters| DeadLetterPage {
            next_after: next(&dead_letters, limit, |d| {
                PageKey::of(d.received_at, &d.dead_letter_id).encode()
            }),
            dead_letters,
        }),
    )
}

/// `GET /v1/stats`: the numbers an operator checks first.
#[utoipa::path(get, path = "/v1/stats", tag = "operator", operation_id = "get_stats",
    responses((status = 200, description = "The stats", body = Stats)))]
pub(super) async fn stats(State(state): State<AdminState>, _: NoQuery) -> Response {
    respond("reading stats failed", state.store.stats_summary().await)
}

/// `GET /v1/audit`: what operators did, newest first.
#[utoipa::path(get, path = "/v1/audit", tag = "operator", operation_id = "list_audit_entries", params(NumberPageQuery),
    responses((status = 200, description = "Audit entries, a page", body = AuditPage),
               (status = 400, description = "A bad query (`invalid_query`)", body = ErrorBody)))]
pub(super) async fn audit(
    State(state): State<AdminState>,
    query: Result<Query<NumberPageQuery>, QueryRejection>,
) -> Response {
    let (limit, before) = match number_page(query) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let rows = state.store.audit_log_page(before, limit).await;
    respond(
        "reading the audit log failed",
        rows.map(|entries| AuditPage {
            next_after: next(&entries, limit, |e| e.id.to_string()),
            entries,
        }),
    )
}
