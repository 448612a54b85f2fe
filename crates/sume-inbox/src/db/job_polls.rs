//! `sume.job_polls` (statements of `sql/queries/job_polls.sql`): each job's latest status calls
//! (the key asked, Sume's answer, how long it took), kept for the operator's timeline in a ring
//! of [`POLL_HISTORY`] slots per job. The poll writes a whole batch's calls in one statement.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{sql, DbError, Store};
use crate::db::clock::Clock;

/// Calls kept per job: the ring's size, fixed by `sql/0010_job_polls.sql` (`slot between 0 and
/// 19`, `seq % 20`).
pub const POLL_HISTORY: usize = 20;

/// The longest answer kept, in characters (the table's check): Sume's status is Sume's text.
pub const ANSWER_MAX_CHARS: usize = 200;

/// One status call about a job, as the poll made it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolledCall {
    /// Sume's job id.
    pub job_id: String,
    /// The configured key's name (never the key).
    pub key_name: String,
    /// As the poll read it: `"200 running"`, `"404"`, `"429"`, `"timeout"`, `"error: ..."`.
    pub answer: String,
    /// The request's own time, without the wait for the budget.
    pub latency_ms: i32,
    /// When the answer came, on the process clock; written as the clock at the write minus
    /// the time since, so the rows keep the database's time like every other entry.
    pub at: tokio::time::Instant,
}

/// A kept status call, for `jobs show`, `GET /v1/jobs/{id}` and the console's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PollRow {
    /// The job's status calls counted from 1: gaps below the first kept one went out of the
    /// ring.
    pub seq: i64,
    /// When the answer came.
    pub polled_at: DateTime<Utc>,
    /// The configured key's name.
    pub key_name: String,
    /// What Sume answered, as read (its status cut to 200 characters).
    pub answer: String,
    /// How long the request took, in milliseconds.
    pub latency_ms: i32,
}

/// `answer` as kept: control characters (a NUL cannot be stored in `text`) replaced, cut to
/// [`ANSWER_MAX_CHARS`].
pub fn kept_answer(answer: &str) -> String {
    answer
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .take(ANSWER_MAX_CHARS)
        .collect()
}

/// The calls a statement may carry: per job its latest [`POLL_HISTORY`], in the order made (two
/// calls of one job in one statement must take different slots).
fn latest_per_job(calls: &[PolledCall]) -> Vec<&PolledCall> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut keep = Vec::with_capacity(calls.len());
    for c in calls.iter().rev() {
        let n = seen.entry(c.job_id.as_str()).or_default();
        if *n < POLL_HISTORY {
            *n += 1;
            keep.push(c);
        }
    }
    keep.reverse();
    keep
}

impl Store {
    /// Records a batch of status calls in one statement (`job_polls_insert`); answers the rows
    /// written. Calls of jobs whose row is gone are skipped.
    pub async fn job_polls_insert(
        &self,
        calls: &[PolledCall],
        clock: &Clock,
    ) -> Result<u64, DbError> {
        let calls = latest_per_job(calls);
        if calls.is_empty() {
            return Ok(0);
        }
        let written = tokio::time::Instant::now();
        let ids: Vec<&str> = calls.iter().map(|c| c.job_id.as_str()).collect();
        let keys: Vec<&str> = calls.iter().map(|c| c.key_name.as_str()).collect();
        let answers: Vec<String> = calls.iter().map(|c| kept_answer(&c.answer)).collect();
        let latency: Vec<i32> = calls.iter().map(|c| c.latency_ms.max(0)).collect();
        let ago: Vec<f64> = calls
            .iter()
            .map(|c| written.saturating_duration_since(c.at).as_secs_f64())
            .collect();
        let now = clock.now();
        let client = self.client().await?;
        sql::JOB_POLLS_INSERT
            .execute(&client, &[&ids, &keys, &answers, &latency, &ago, &now])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(job: &str, n: usize) -> PolledCall {
        PolledCall {
            job_id: job.into(),
            key_name: "main".into(),
            answer: format!("200 running {n}"),
            latency_ms: 1,
            at: tokio::time::Instant::now(),
        }
    }

    #[test]
    fn a_statement_carries_each_jobs_latest_calls_in_order() {
        let mut calls: Vec<PolledCall> = (0..25).map(|n| call("a", n)).collect();
        calls.insert(3, call("b", 0));
        let kept = latest_per_job(&calls);
        let a: Vec<&str> = kept
            .iter()
            .filter(|c| c.job_id == "a")
            .map(|c| c.answer.as_str())
            .collect();
        assert_eq!(a.len(), POLL_HISTORY);
        assert_eq!(a[0], "200 running 5");
        assert_eq!(a[POLL_HISTORY - 1], "200 running 24");
        assert_eq!(kept.iter().filter(|c| c.job_id == "b").count(), 1);
    }

    #[test]
    fn answers_are_kept_short_and_storable() {
        let long = format!("200 {}\u{0}<b>", "x".repeat(500));
        let kept = kept_answer(&long);
        assert_eq!(kept.chars().count(), ANSWER_MAX_CHARS);
        assert!(!kept_answer("200 a\u{0}b").contains('\u{0}'));
        assert_eq!(kept_answer("404"), "404");
    }
}
