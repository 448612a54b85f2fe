//! Reading jobs on the admin API (registering them: [`super::registration`]; the feed of
//! closes: [`super::feed`]):
//!
//! - `GET /v1/jobs/{job_id}`: the job, or 404.
//! - `GET /v1/jobs?state=&order_id=&closed_by=&created_from=&created_to=&closed_from=
//!   &closed_to=&after=&limit=`: jobs in id order, `{"jobs":[...],"next_after"}`. With
//!   `closed_after`, the feed of closes as `GET /v1/closes` answers it (see [`super::feed`]).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Datelike, FixedOffset};
use serde::{Deserialize, Serialize};

use super::forms::{Text, Wait};
use super::openapi::ErrorBody;
use super::paging::{bad_query, page_limit};
use super::{unavailable, AdminState, PathId};
use crate::db::{CloserName, JobFilter, JobRow, JobStateName, CLOSERS, JOB_STATES};
use crate::http::{error, ApiError};

/// A page of the list of jobs.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobPage {
    /// The jobs, in id order.
    pub jobs: Vec<JobRow>,
    /// Pass as `after` for the next page; `null` on the last page.
    pub next_after: Option<String>,
}

/// The query of `GET /v1/jobs/{job_id}`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ShowQuery {
    /// Wait up to this long (e.g. `30s`) for the job to close; a wait longer than MAX_WAIT
    /// (60s unless set) waits MAX_WAIT.
    #[param(nullable = false, value_type = Option<Wait>, example = "30s")]
    wait: Option<String>,
}

/// `GET /v1/jobs/{job_id}`, with `?wait=30s` until it is closed.
#[utoipa::path(get, path = "/v1/jobs/{job_id}", tag = "application", operation_id = "get_job",
    params(("job_id" = String, Path, description = "Sume's job id \
        (percent-encoded; an id of `.` or `..` with each `.` written `%2E`, which clients \
        would otherwise resolve away as a dot-segment)"), ShowQuery),
    responses((status = 200, description = "The job", body = JobRow,
                headers(("X-Wait-Outcome" = String,
                   description = "with wait: closed, timeout or shutdown"))),
               (status = 400, description = "A bad query (`invalid_query`)", body = ErrorBody),
               (status = 404, description = "No such job (`not_found`)", body = ErrorBody),
               (status = 503, description = "MAX_WAITERS are waiting (`too_many_waiters`, with \
                Retry-After), the database cannot answer (`unavailable`), or its role lacks a \
                grant the route needs (`permission_denied`: the message names the grants to \
                give)", body = ErrorBody,
                headers(("Retry-After" = u32, description = "With `too_many_waiters`: the \
                   seconds to wait before asking again (`1`)")))))]
pub(super) async fn show(
    State(state): State<AdminState>,
    PathId(job_id): PathId,
    query: Result<Query<ShowQuery>, QueryRejection>,
) -> Response {
    let wait = match query {
        Ok(Query(ShowQuery { wait: Some(raw) })) => {
            match super::wait::parse_wait(&raw, state.max_wait) {
                Ok(d) => Some(d),
                Err(e) => return e.into_response(),
            }
        }
        Ok(_) => None,
        Err(e) => return bad_query(e.body_text()).into_response(),
    };
    if !crate::db::text_can_hold(&job_id) {
        // No such job, and nothing to wait for.
        return error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no job {job_id:?}"),
        );
    }
    if let Some(wait) = wait.filter(|w| !w.is_zero()) {
        return super::wait::wait_for_close(&state, &job_id, wait).await;
    }
    match state.store.jobs_get(&job_id).await {
        // `wait=0s` waits for nothing, and still says how its wait ended.
        Ok(Some(row)) if wait.is_some() => super::wait::answered_at_once(row),
        Ok(Some(row)) => Json(row).into_response(),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no job {job_id:?}"),
        ),
        Err(e) => unavailable("reading the job failed", &e),
    }
}

/// The query of `GET /v1/jobs`: the list, or the feed when `closed_after` is given (which the
/// document leaves to `GET /v1/closes`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// The feed of closes after this cursor, as `GET /v1/closes?after=` reads it (its
    /// refusals 400 `invalid_query`); takes only `limit`. Kept for the applications that read
    /// the feed here; not in the document.
    #[param(ignore)]
    closed_after: Option<String>,
    /// Rows per page, 1 to 1000 (default 100).
    #[param(nullable = false, minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// `next_after` of the previous page, a job id; empty, the start. Any id is a position:
    /// the jobs after it in id order, whether or not a page ended there.
    #[param(nullable = false, value_type = Option<Text>)]
    after: Option<String>,
    /// `open`, `completed`, `failed`, `canceled` or `expired`.
    #[param(nullable = false, value_type = Option<JobStateName>)]
    state: Option<String>,
    /// The application's reference.
    #[param(nullable = false, value_type = Option<Text>)]
    order_id: Option<String>,
    /// `webhook`, `poll` or `give_up`.
    #[param(nullable = false, value_type = Option<CloserName>)]
    closed_by: Option<String>,
    /// Registered at or after (RFC 3339).
    #[param(nullable = false)]
    created_from: Option<DateTime<FixedOffset>>,
    /// Registered before.
    #[param(nullable = false)]
    created_to: Option<DateTime<FixedOffset>>,
    /// Closed at or after.
    #[param(nullable = false)]
    closed_from: Option<DateTime<FixedOffset>>,
    /// Closed before.
    #[param(nullable = false)]
    closed_to: Option<DateTime<FixedOffset>>,
}

fn one_of(field: &str, value: &Option<String>, allowed: &[&str]) -> Result<(), ApiError> {
    match value {
        Some(v) if !allowed.contains(&v.as_str()) => Err(bad_query(format!(
            "{field} must be one of {}, not {v:?}",
            allowed.join(", ")
        ))),
        _ => Ok(()),
    }
}

impl ListQuery {
    fn is_filtered(&self) -> bool {
        self.after.is_some()
            || self.state.is_some()
            || self.order_id.is_some()
            || self.closed_by.is_some()
            || self.created_from.is_some()
            || self.created_to.is_some()
            || self.closed_from.is_some()
            || self.closed_to.is_some()
    }

    fn filter(self) -> Result<(JobFilter, String), ApiError> {
        one_of("state", &self.state, &JOB_STATES)?;
        one_of("closed_by", &self.closed_by, &CLOSERS)?;
        for (field, value) in [("order_id", &self.order_id), ("after", &self.after)] {
            if !value.as_deref().is_none_or(crate::db::text_can_hold) {
                return Err(bad_query(format!(
                    "{field} must not hold a NUL character (%00)"
                )));
            }
        }
        let times = [
            ("created_from", &self.created_from),
            ("created_to", &self.created_to),
            ("closed_from", &self.closed_from),
            ("closed_to", &self.closed_to),
        ];
        for (field, t) in times {
            // RFC 3339's years, as written (the UTC form of 9999-12-31T23:59:59-23:59 is in the
            // year 10000, which PostgreSQL holds, as the console and the CLI take it); the parser
            // also reads signed years of six digits, beyond what PostgreSQL's timestamps hold.
            if let Some(t) = t.filter(|t| !(0..=9999).contains(&t.naive_local().year())) {
                return Err(bad_query(format!(
                    "{field} must be an RFC 3339 date-time, in the years 0000 to 9999, not {}",
                    t.to_rfc3339()
                )));
            }
        }
        let filter = JobFilter {
            state: self.state,
            order_id: self.order_id,
            closed_by: self.closed_by,
            created_from: self.created_from.map(|t| t.to_utc()),
            created_to: self.created_to.map(|t| t.to_utc()),
            closed_from: self.closed_from.map(|t| t.to_utc()),
            closed_to: self.closed_to.map(|t| t.to_utc()),
        };
        Ok((filter, self.after.unwrap_or_default()))
    }
}

/// `GET /v1/jobs`: the filtered list (or, with `closed_after`, the feed of closes).
#[utoipa::path(get, path = "/v1/jobs", tag = "application", operation_id = "list_jobs",
    params(ListQuery),
    responses((status = 200, description = "A page of the list", body = JobPage),
               (status = 400, description = "A bad query (`invalid_query`)", body = ErrorBody)))]
pub(super) async fn list(
    State(state): State<AdminState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(q) => q,
        Err(e) => return bad_query(e.body_text()).into_response(),
    };
    let limit = match page_limit(query.limit) {
        Ok(n) => n,
        Err(r) => return r.into_response(),
    };
    if let Some(cursor) = &query.closed_after {
        if query.is_filtered() {
            return bad_query(
                "closed_after reads the feed of closes, which takes only limit; \
                 the filters and after belong to the list of jobs",
            )
            .into_response();
        }
        return super::feed::page(&state, cursor, limit, super::feed::Asked::ClosedAfter).await;
    }
    let (filter, after) = match query.filter() {
        Ok(f) => f,
        Err(r) => return r.into_response(),
    };
    match state.store.jobs_list(&filter, &after, limit).await {
        Ok(jobs) => {
            let next_after = (jobs.len() as i64 == limit)
                .then(|| jobs.last().map(|j| j.job_id.clone()))
                .flatten();
            Json(JobPage { jobs, next_after }).into_response()
        }
        Err(e) => unavailable("listing jobs failed", &e),
    }
}
