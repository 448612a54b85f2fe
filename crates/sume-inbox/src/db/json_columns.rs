//! Reading a `jsonb` column that holds what Sume sent (a job's result) without trusting it:
//! ingest and the poll keep out of the column what cannot be read back
//! ([`sume_wire::readable`]), but a row written before they did (nested past 128 levels, a
//! number past `f64`) must not stop the task that reads it.

use std::time::Duration;

use serde_json::Value;
use sume_wire::JsonText;
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

/// A job's result read as `result::text` and passed on as that text, so its numbers keep every
/// digit (a [`Value`] holds one past `i64`/`u64` as an `f64`). What [`sent_json`] could not read
/// back (a stored row from before the rule of [`sume_wire::readable`]) is taken as absent here
/// too, with the same warning, so no answer carries what its readers cannot take.
pub(crate) fn sent_json_text(row: &Row, column: &str) -> Option<JsonText> {
    let text = row.try_get::<_, Option<String>>(column);
    let kept = match text {
        Ok(Some(text)) if sume_wire::readable_json_text(&text) => {
            JsonText::new(text).ok_or("not JSON")
        }
        Ok(Some(_)) => Err("nested too deep, or a number past f64"),
        Ok(None) => return None,
        Err(_) => Err("not text"),
    };
    kept.map_err(|e| {
        if let Some(left_out) = UNREADABLE_LOG.allow() {
            tracing::warn!(column, error = e, left_out, "a stored JSON value cannot be read back; taken as absent (the event's raw body keeps it)");
        }
    })
    .ok()
}
