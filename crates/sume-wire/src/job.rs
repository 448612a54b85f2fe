//! The job object of `GET /jobs/{id}` (and of a webhook's `data.object`), and Sume's error
//! envelope: the JSON shapes the status client reads and the simulator writes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A job as Sume's read endpoints answer it. Only `id` and `status` are required when reading,
/// so an added or differently typed field upstream does not break the status client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobObject {
    /// Sume's job id (`job_...`), as the create call answered it.
    pub id: String,
    /// The object's type name; `"job"` when the answer leaves it out.
    #[serde(default = "job_object_kind")]
    pub object: String,
    /// Sume's status string as sent; [`Status::parse`](crate::Status::parse) says what it means
    /// (the docs list seven spellings, clients in the wild see more).
    pub status: String,
    /// When Sume created the job, as sent. Kept as raw JSON because the docs fix no format (the
    /// simulator sends RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Value>,
    /// When the job reached a terminal status, as sent; `None` while it is in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Value>,
    /// The job's output once it completed; its shape depends on the job type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why the job failed, as sent; `None` unless it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

fn job_object_kind() -> String {
    "job".to_owned()
}

impl JobObject {
    /// The job's output, or `{"error": ...}` for a failed one: what this service records as the
    /// job's `result` (the webhook path reads the same thing from an event body).
    pub fn outcome_value(&self) -> Option<Value> {
        outcome_value(self.result.as_ref(), self.error.as_ref())
    }

    /// What a database can store of it, as the webhook path does with an event: a `result` or
    /// `error` holding a NUL character (`\u0000`, which neither `text` nor `jsonb` holds) or
    /// nested deeper than [`crate::MAX_RESULT_DEPTH`] is dropped; an `id` or `status` holding one
    /// makes the object unusable (`None`); a status past [`MAX_STATUS_CHARS`] is cut.
    pub fn storable(mut self) -> Option<JobObject> {
        if self.id.contains('\0') || self.status.contains('\0') {
            return None;
        }
        // Sume's statuses are short words; one longer is none this version knows, and is kept
        // cut (it is stored with the job and in each poll's answer).
        if self.status.chars().count() > MAX_STATUS_CHARS {
            let cut: String = self.status.chars().take(MAX_STATUS_CHARS).collect();
            self.status = format!("{cut}…");
        }
        let nul = |v: &Option<Value>| {
            v.as_ref()
                .is_some_and(|v| value_has_nul(v) || !crate::readable::readable_value(v))
        };
        if nul(&self.result) {
            self.result = None;
        }
        if nul(&self.error) {
            self.error = None;
        }
        Some(self)
    }
}

/// The longest status kept as read: longer ones are cut ([`JobObject::storable`]).
pub const MAX_STATUS_CHARS: usize = 64;

/// A job's `result`, else `{"error": error}`, else nothing; JSON `null` counts as absent.
pub fn outcome_value(result: Option<&Value>, error: Option<&Value>) -> Option<Value> {
    match (result, error) {
        (Some(r), _) if !r.is_null() => Some(r.clone()),
        (_, Some(e)) if !e.is_null() => Some(serde_json::json!({ "error": e })),
        _ => None,
    }
}

/// `{"error":{"code","message","details"},"request_id"}`: the body of every error answer (401,
/// 402, 403, 404, 429), per Sume's docs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    /// What went wrong.
    pub error: ErrorBody,
    /// Sume's id of the request (`req_...`), the one to quote when asking Sume about it; `None`
    /// when the body has none.
    #[serde(default)]
    pub request_id: Option<String>,
}

/// The `error` object of an [`ErrorEnvelope`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// A stable, machine-readable code such as `rate_limit_exceeded`: branch on this, not on
    /// `message`.
    pub code: String,
    /// A human-readable explanation, free to change.
    pub message: String,
    /// Extra context; `{}` when Sume has none, `null` when a body leaves it out.
    #[serde(default)]
    pub details: Value,
}

impl ErrorEnvelope {
    /// An envelope as Sume writes one, with empty `details` (the simulator answers with these).
    pub fn new(code: &str, message: impl Into<String>, request_id: impl Into<String>) -> Self {
        ErrorEnvelope {
            error: ErrorBody {
                code: code.to_owned(),
                message: message.into(),
                details: Value::Object(Default::default()),
            },
            request_id: Some(request_id.into()),
        }
    }
}

/// Whether a JSON value holds a NUL in a string or key: PostgreSQL's `text` and `jsonb` cannot.
pub(crate) fn value_has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(value_has_nul),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || value_has_nul(v)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(status: &str, result: Value) -> JobObject {
        serde_json::from_value(json!({"id": "job_1", "status": status, "result": result})).unwrap()
    }

    #[test]
    fn what_no_database_can_store_is_dropped_or_refused() {
        let ok = job("completed", json!({"url": "https://cdn.example/a.mp4"}));
        assert_eq!(ok.clone().storable(), Some(ok));
        let kept = job("completed", json!({"note": "a\u{0}b"}))
            .storable()
            .unwrap();
        assert_eq!((kept.status.as_str(), kept.result), ("completed", None));
        assert_eq!(job("complet\u{0}ed", Value::Null).storable(), None);
        let long = job(&"x".repeat(900_000), Value::Null).storable().unwrap();
        assert_eq!(long.status.chars().count(), MAX_STATUS_CHARS + 1);
        assert!(long.status.ends_with('…'));
    }
}
