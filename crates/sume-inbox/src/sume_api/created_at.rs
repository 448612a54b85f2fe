//! When Sume created a job, from the `created_at` its job list sends. The docs name the field
//! but fix no format (`fixtures/sume/docs/job_object.json` and `list_answer.json` mark it an
//! assumption; the simulator sends RFC 3339), so the forms an API of its kind sends are read:
//! an RFC 3339 string, or Unix seconds, a number (whole or with a fraction) or a string of one.
//! Milliseconds are not guessed at: nothing in the docs suggests them, and a number that would
//! be one reads, as seconds, as a time far past now, which no job was created at. Such a time,
//! and anything else (a missing field, another string), is not read as a creation time:
//! [`created_at`] says what was sent instead.

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

/// How far past now a creation time may lie and still be one (clocks differ; a day is far more
/// than any skew, and far less than the ten-thousand-year jump of milliseconds read as seconds).
pub const FUTURE_SLACK: Duration = Duration::days(1);

/// The most characters of a `created_at` not read that [`created_at`] quotes.
const SHOWN_CHARS: usize = 64;

/// When the job was created, read from `value` (a job's `created_at`, `None` when absent) as
/// of `now`; else what was sent, shown for a message (`none` when absent or `null`).
pub fn created_at(value: Option<&Value>, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Err("none".into());
    };
    let at = match value {
        Value::String(s) => DateTime::parse_from_rfc3339(s.trim())
            .map(|t| t.with_timezone(&Utc))
            .ok()
            .or_else(|| s.trim().parse::<f64>().ok().and_then(unix_seconds)),
        Value::Number(n) => n
            .as_i64()
            .and_then(|s| DateTime::from_timestamp(s, 0))
            .or_else(|| n.as_f64().and_then(unix_seconds)),
        _ => None,
    };
    match at {
        Some(t) if t <= now + FUTURE_SLACK => Ok(t),
        _ => Err(shown(value)),
    }
}

/// The time `secs` Unix seconds stand for, when it is one chrono holds.
fn unix_seconds(secs: f64) -> Option<DateTime<Utc>> {
    if !secs.is_finite() {
        return None;
    }
    let whole = secs.floor();
    let nanos = (((secs - whole) * 1e9).round() as u32).min(999_999_999);
    if whole.abs() > i64::MAX as f64 / 2.0 {
        return None;
    }
    DateTime::from_timestamp(whole as i64, nanos)
}

/// `value` as JSON, cut to [`SHOWN_CHARS`] characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn read(v: Value) -> Result<String, String> {
        created_at(Some(&v), now()).map(|t| t.to_rfc3339())
    }

    #[test]
    fn rfc_3339_and_unix_seconds_whole_fractional_or_as_a_string_are_read() {
        let noon = "2026-06-01T11:00:00+00:00";
        assert_eq!(read(json!("2026-06-01T11:00:00Z")).as_deref(), Ok(noon));
        assert_eq!(
            read(json!("2026-06-01T13:00:00+02:00")).as_deref(),
            Ok(noon)
        );
        assert_eq!(read(json!(1_780_311_600)).as_deref(), Ok(noon));
        assert_eq!(read(json!("1780311600")).as_deref(), Ok(noon));
        assert_eq!(
            read(json!(1_780_311_600.25)).as_deref(),
            Ok("2026-06-01T11:00:00.250+00:00")
        );
        assert_eq!(
            read(json!(1_590_000_000)).as_deref(),
            Ok("2020-05-20T18:40:00+00:00")
        );
        assert_eq!(
            read(json!(1.78e9)).as_deref(),
            Ok("2026-05-28T20:26:40+00:00")
        );
    }

    #[test]
    fn what_is_no_creation_time_is_said_as_it_was_sent() {
        assert_eq!(created_at(None, now()), Err("none".into()));
        assert_eq!(read(Value::Null), Err("none".into()));
        // Milliseconds, read as seconds, lie fifty thousand years ahead.
        assert_eq!(
            read(json!(1_780_311_600_000_i64)),
            Err("1780311600000".into())
        );
        assert_eq!(read(json!("yesterday")), Err("\"yesterday\"".into()));
        assert_eq!(read(json!("NaN")), Err("\"NaN\"".into()));
        assert_eq!(read(json!(1e300)), Err("1e+300".into()));
        assert_eq!(read(json!(u64::MAX)), Err(u64::MAX.to_string()));
        assert_eq!(read(json!({"at": 1})), Err("{\"at\":1}".into()));
        let long = read(json!("x".repeat(500))).unwrap_err();
        assert_eq!(long.chars().count(), SHOWN_CHARS + 3, "{long}");
    }

    #[test]
    fn a_time_up_to_a_day_ahead_is_read_and_one_further_is_not() {
        let ahead = now() + Duration::hours(23);
        assert_eq!(
            created_at(Some(&json!(ahead.timestamp())), now()),
            Ok(ahead)
        );
        let further = (now() + Duration::hours(25)).to_rfc3339();
        assert!(read(json!(further)).is_err());
    }
}
