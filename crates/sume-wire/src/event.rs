//! Reading a webhook body.
//!
//! Two shapes are in use and both are accepted:
//! - the guide's `{"event":"job.completed","job_id":"job_..."}` (a `status` and `result` may
//!   ride along);
//! - the docs' envelope `{"id":"evt_...","type":"job.completed","data":{"object":{...job...}}}`,
//!   whose `data.object` is the job object of `GET /jobs/{id}`.

use serde_json::Value;
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The longest job or event id accepted; longer ones are treated as garbage, not truncated.
pub const MAX_ID_LEN: usize = 255;

/// Why a body (whose signature was valid) cannot be filed under a job.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ParseError {
    #[error("body is not JSON: {0}")]
    NotJson(String),
    #[error("body is JSON but not an object")]
    NotAnObject,
    #[error("body names no job id (neither data.object.id nor job_id)")]
    NoJobId,
    #[error("job id is not a usable id (empty, too long, or with control characters)")]
    BadJobId,
}

/// What this service needs from an event body.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedEvent {
    pub job_id: String,
    /// The body's own event id (`id` of the envelope shape), if any.
    pub body_event_id: Option<String>,
    /// `type` or `event`, e.g. `job.completed`.
    pub event_type: Option<String>,
    /// The job status the event reports: `data.object.status`, else `status`, else the part of
    /// the event type after `job.`.
    pub status: Option<String>,
    /// The job's output (`result`), or `{"error": ...}` for a failed job, when the body has one.
    pub result: Option<Value>,
}

fn usable_id(s: &str) -> bool {
    !s.trim().is_empty() && s.len() <= MAX_ID_LEN && !s.chars().any(char::is_control)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, key| v.get(key))?.as_str()
}

/// Reads an event body of either shape.
pub fn parse_event(body: &[u8]) -> Result<ParsedEvent, ParseError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ParseError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(ParseError::NotAnObject);
    }
    let object = value.get("data").and_then(|d| d.get("object"));
    let job_id = object
        .and_then(|o| o.get("id"))
        .or_else(|| value.get("job_id"))
        .ok_or(ParseError::NoJobId)?
        .as_str()
        .ok_or(ParseError::BadJobId)?;
    if !usable_id(job_id) {
        return Err(ParseError::BadJobId);
    }
    let event_type = str_at(&value, &["type"])
        .or_else(|| str_at(&value, &["event"]))
        .map(str::to_owned);
    let status = object
        .and_then(|o| str_at(o, &["status"]))
        .or_else(|| str_at(&value, &["status"]))
        .map(str::to_owned)
        .or_else(|| {
            event_type
                .as_deref()
                .and_then(|t| t.strip_prefix("job."))
                .map(str::to_owned)
        });
    let holder = object.unwrap_or(&value);
    let result = crate::job::outcome_value(holder.get("result"), holder.get("error"));
    let body_event_id = str_at(&value, &["id"])
        .filter(|id| object.is_some() && usable_id(id))
        .map(str::to_owned);
    Ok(ParsedEvent {
        job_id: job_id.to_owned(),
        body_event_id,
        event_type,
        status,
        result,
    })
}

/// The id an event is deduplicated by: the `X-Sume-Event-Id` header, else the body's `id`,
/// else `sha256:<hex of the body>` (so a byte-identical redelivery still deduplicates).
pub fn event_id_for(header: Option<&str>, parsed: Option<&ParsedEvent>, body: &[u8]) -> String {
    if let Some(h) = header.map(str::trim).filter(|h| usable_id(h)) {
        return h.to_owned();
    }
    if let Some(id) = parsed.and_then(|p| p.body_event_id.as_deref()) {
        return id.to_owned();
    }
    format!("sha256:{}", hex::encode(Sha256::digest(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_guide_shape() {
        let e = parse_event(br#"{"event":"job.completed","job_id":"job_early"}"#).unwrap();
        assert_eq!(e.job_id, "job_early");
        assert_eq!(e.event_type.as_deref(), Some("job.completed"));
        assert_eq!(e.status.as_deref(), Some("completed"));
        assert_eq!(e.body_event_id, None);
        assert_eq!(e.result, None);
    }

    #[test]
    fn reads_the_envelope_shape() {
        let body = br#"{"id":"evt_1","type":"job.failed","data":{"object":{"id":"job_9",
            "object":"job","status":"failed","error":{"code":"nsfw"}}}}"#;
        let e = parse_event(body).unwrap();
        assert_eq!(e.job_id, "job_9");
        assert_eq!(e.body_event_id.as_deref(), Some("evt_1"));
        assert_eq!(e.status.as_deref(), Some("failed"));
        assert_eq!(
            e.result,
            Some(serde_json::json!({"error": {"code": "nsfw"}}))
        );
    }

    #[test]
    fn object_status_beats_event_type() {
        let body = br#"{"type":"job.updated","data":{"object":{"id":"j","status":"running"}}}"#;
        assert_eq!(
            parse_event(body).unwrap().status.as_deref(),
            Some("running")
        );
    }

    #[test]
    fn refuses_garbage_clearly() {
        assert!(matches!(
            parse_event(b"not json"),
            Err(ParseError::NotJson(_))
        ));
        assert_eq!(parse_event(b"[1,2]"), Err(ParseError::NotAnObject));
        assert_eq!(
            parse_event(br#"{"event":"job.completed"}"#),
            Err(ParseError::NoJobId)
        );
        assert_eq!(parse_event(br#"{"job_id":17}"#), Err(ParseError::BadJobId));
        assert_eq!(parse_event(br#"{"job_id":" "}"#), Err(ParseError::BadJobId));
        let long = format!(r#"{{"job_id":"{}"}}"#, "x".repeat(300));
        assert_eq!(parse_event(long.as_bytes()), Err(ParseError::BadJobId));
    }

    #[test]
    fn event_id_prefers_header_then_body_then_hash() {
        let body = br#"{"id":"evt_b","type":"job.completed","data":{"object":{"id":"j"}}}"#;
        let parsed = parse_event(body).unwrap();
        assert_eq!(event_id_for(Some("evt_h"), Some(&parsed), body), "evt_h");
        assert_eq!(event_id_for(Some("  "), Some(&parsed), body), "evt_b");
        assert_eq!(event_id_for(None, Some(&parsed), body), "evt_b");
        let hashed = event_id_for(None, None, body);
        assert!(hashed.starts_with("sha256:") && hashed.len() == 7 + 64);
        assert_eq!(hashed, event_id_for(None, None, body), "stable");
        assert_ne!(hashed, event_id_for(None, None, b"other"));
    }
}
