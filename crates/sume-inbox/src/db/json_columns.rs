//! Reading a `jsonb` column that holds what Sume sent (a job's result) without trusting it:
//! ingest and the poll keep out of the column what cannot be read back
//! ([`sume_wire::readable`]), but a row written before they did (nested past 128 levels, a
//! number past `f64`) must not stop the task that reads it.

use std::time::Duration;

use serde_json::Value;
use tokio_postgres::Row;

use crate::process::log_budget::LogBudget;

/// At most one warning a minute about stored values that cannot be read back.
static UNREADABLE_LOG: LogBudget = LogBudget::new(1, Duration::from_secs(60));

/// The column's JSON, or `None` (with a warning) when it cannot be read back; the event's raw
/// body still holds what Sume sent.
pub(crate) fn sent_json(row: &Row, column: &str) -> Option<Value> {
    row.try_get::<_, Option<Value>>(column)
        .unwrap_or_else(|e| {
            if let Some(left_out) = UNREADABLE_LOG.allow() {
                tracing::warn!(column, error = %e, left_out, "a stored JSON value cannot be read back; taken as absent (the event's raw body keeps it)");
            }
            None
        })
}
