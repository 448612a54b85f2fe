//! `sume.disagreements` (statements of `sql/queries/disagreements.sql`): terminal statuses
//! that contradicted a job's first one, kept for an operator.

use super::Session;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{sql, DbError};
use crate::decisions::job_fold::JobFold;

/// A recorded disagreement, for `jobs show`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct DisagreementRow {
    /// The job's state, which was kept.
    pub kept_state: String,
    /// The state the contradicting observation implied.
    pub seen_state: String,
    /// Sume's status as observed.
    pub seen_status: String,
    /// `webhook` or `poll`.
    #[schema(value_type = super::SourceName)]
    pub source: String,
    /// The event that contradicted, for a webhook.
    pub event_id: Option<String>,
    /// When it was recorded.
    pub recorded_at: DateTime<Utc>,
}

/// Records the disagreements these folds found (one statement for all of them).
pub(super) async fn insert<C: Session>(tx: &C, folds: &[JobFold]) -> Result<(), DbError> {
    let found: Vec<(&str, &crate::decisions::job_fold::Disagreement)> = folds
        .iter()
        .flat_map(|f| f.disagreements.iter().map(move |d| (f.job_id.as_str(), d)))
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = found.iter().map(|(j, _)| *j).collect();
    let kept: Vec<&str> = found.iter().map(|(_, d)| d.kept.as_str()).collect();
    let seen: Vec<&str> = found.iter().map(|(_, d)| d.seen.as_str()).collect();
    let status: Vec<&str> = found.iter().map(|(_, d)| d.seen_status.as_str()).collect();
    let source: Vec<&str> = found.iter().map(|(_, d)| d.source.as_str()).collect();
    let event: Vec<Option<&str>> = found.iter().map(|(_, d)| d.event_id.as_deref()).collect();
    sql::DISAGREEMENTS_INSERT
        .execute(tx, &[&ids, &kept, &seen, &status, &source, &event])
        .await?;
    Ok(())
}
