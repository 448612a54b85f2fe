//! `GET /v1/jobs/{job_id}?wait=30s`: the job as soon as it is closed, or as it is when the wait
//! ends; a wait longer than MAX_WAIT waits MAX_WAIT, as the client then asks again. The request holds a place among the instance's waiters (503 with `Retry-After` when
//! MAX_WAITERS are taken) and no database connection while it waits; a close made by any
//! instance wakes it (see [`crate::actors::close_waiters`]). `X-Wait-Outcome` says how the wait ended:
//! `closed` (a read found the job closed: it was already, or a wake-up led to it), `timeout`
//! (the wait ran out; the job is answered as it is then, which may be closed), `shutdown`
//! (the daemon is stopping).

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{unavailable, AdminState};
use crate::db::JobRow;
use crate::http::ApiError;

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Closed,
    Timeout,
    Shutdown,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Closed => "closed",
            Outcome::Timeout => "timeout",
            Outcome::Shutdown => "shutdown",
        }
    }
}

/// `wait` as given, cut to MAX_WAIT (`max`). A longer wait is not refused: what MAX_WAIT is
/// depends on the instance, which a client cannot know, and a wait that runs out is answered
/// `timeout`, which it handles by asking again.
pub(super) fn parse_wait(raw: &str, max: Duration) -> Result<Duration, ApiError> {
    let d = humantime::parse_duration(raw.trim()).map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("wait must be a duration like 30s, not {raw:?}"),
        )
    })?;
    Ok(d.min(max))
}

fn not_found(job_id: &str) -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no job {job_id:?}"),
    )
    .into_response()
}

/// A job asked with a wait of zero: `closed` when it is, else `timeout`.
pub(super) fn answered_at_once(job: JobRow) -> Response {
    let outcome = if job.state == "open" {
        Outcome::Timeout
    } else {
        Outcome::Closed
    };
    answer(job, outcome)
}

fn answer(job: JobRow, outcome: Outcome) -> Response {
    let mut r = Json(job).into_response();
    r.headers_mut()
        .insert("x-wait-outcome", HeaderValue::from_static(outcome.as_str()));
    r
}

/// Waits up to `wait` for `job_id` to close.
pub(super) async fn wait_for_close(state: &AdminState, job_id: &str, wait: Duration) -> Response {
    // Read first: an unknown job is a 404 and a closed one its answer, at once, whether or not
    // MAX_WAITERS places are taken; a place is held only by a request that must wait.
    match state.store.jobs_get(job_id).await {
        Ok(Some(job)) if job.state != "open" => return answer(job, Outcome::Closed),
        Ok(Some(_)) => {}
        Ok(None) => return not_found(job_id),
        Err(e) => return unavailable("reading the job failed", &e),
    }
    let Some(waiting) = state.waiters.join(job_id) else {
        return too_many_waiters(state);
    };
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        // Created before the read, so a close committed between the read and the wait wakes it.
        let woken = waiting.woken();
        let job = match state.store.jobs_get(job_id).await {
            Ok(Some(job)) => job,
            Ok(None) => return not_found(job_id),
            Err(e) => return unavailable("reading the job failed", &e),
        };
        if job.state != "open" {
            return answer(job, Outcome::Closed);
        }
        let ended = tokio::select! {
            _ = woken => None,
            _ = tokio::time::sleep_until(deadline) => Some(Outcome::Timeout),
            _ = state.shutdown.cancelled() => Some(Outcome::Shutdown),
        };
        if let Some(outcome) = ended {
            return match state.store.jobs_get(job_id).await {
                Ok(Some(job)) => answer(job, outcome),
                Ok(None) => not_found(job_id),
                Err(e) => unavailable("reading the job failed", &e),
            };
        }
    }
}

/// The 503 of a wait beyond MAX_WAITERS, counted.
fn too_many_waiters(state: &AdminState) -> Response {
    state.metrics.waiters_refused.inc();
    let mut r = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_waiters",
        "MAX_WAITERS requests are waiting already; retry, or read the job without wait",
    )
    .into_response();
    r.headers_mut()
        .insert("retry-after", HeaderValue::from_static("1"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_durations_cut_to_the_maximum() {
        let max = Duration::from_secs(60);
        assert_eq!(parse_wait("30s", max), Ok(Duration::from_secs(30)));
        assert_eq!(parse_wait("0s", max), Ok(Duration::ZERO));
        assert_eq!(parse_wait("2m", max), Ok(max));
        assert_eq!(parse_wait("soon", max).unwrap_err().code, "invalid_query");
    }
}
