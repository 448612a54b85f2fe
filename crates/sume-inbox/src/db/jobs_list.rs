//! `sume.jobs`, listed (`jobs_list` of `sql/queries/jobs.sql`): a page of jobs in id order
//! with the filters of `GET /v1/jobs`, and which of some jobs are closed (the waiters' poll).

use chrono::{DateTime, Utc};

use super::{jobs::job_row, sql, DbError, JobRow, Store};

/// The filters of a job list; `None` means any.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFilter {
    /// `open`, `completed`, `failed`, `canceled` or `expired`.
    pub state: Option<String>,
    /// The application's own reference.
    pub order_id: Option<String>,
    /// `webhook`, `poll` or `give_up`.
    pub closed_by: Option<String>,
    /// Registered at or after.
    pub created_from: Option<DateTime<Utc>>,
    /// Registered before.
    pub created_to: Option<DateTime<Utc>>,
    /// Closed at or after.
    pub closed_from: Option<DateTime<Utc>>,
    /// Closed before.
    pub closed_to: Option<DateTime<Utc>>,
}

impl Store {
    /// Up to `limit` jobs with an id after `after` (`""` for the first page) that pass
    /// `filter`, in id order.
    pub async fn jobs_list(
        &self,
        filter: &JobFilter,
        after: &str,
        limit: i64,
    ) -> Result<Vec<JobRow>, DbError> {
        let client = self.client().await?;
        // One order's jobs come from its index; the rest walk the primary key.
        let statement = match filter.order_id {
            Some(_) => &sql::JOBS_LIST_BY_ORDER,
            None => &sql::JOBS_LIST,
        };
        let rows = statement
            .query(
                &client,
                &[
                    &after,
                    &filter.state,
                    &filter.order_id,
                    &filter.closed_by,
                    &filter.created_from,
                    &filter.created_to,
                    &filter.closed_from,
                    &filter.closed_to,
                    &limit,
                ],
            )
            .await?;
        Ok(rows.iter().map(job_row).collect())
    }
}

impl Store {
    /// Which of these jobs are closed (the polled wake-up of the waiters).
    pub async fn jobs_closed_among(&self, job_ids: &[String]) -> Result<Vec<String>, DbError> {
        let client = self.client().await?;
        let rows = sql::JOBS_CLOSED_AMONG.query(&client, &[&job_ids]).await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
