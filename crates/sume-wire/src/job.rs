//! The job object of `GET /jobs/{id}` (and of a webhook's `data.object`), and Sume's error
//! envelope.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A job as Sume's read endpoints answer it. Only `id` and `status` are required when reading,
/// so an added or differently typed field upstream does not break the status client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobObject {
    pub id: String,
    #[serde(default = "job_object_kind")]
    pub object: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
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
}

/// A job's `result`, else `{"error": error}`, else nothing; JSON `null` counts as absent.
pub fn outcome_value(result: Option<&Value>, error: Option<&Value>) -> Option<Value> {
    match (result, error) {
        (Some(r), _) if !r.is_null() => Some(r.clone()),
        (_, Some(e)) if !e.is_null() => Some(serde_json::json!({ "error": e })),
        _ => None,
    }
}

/// `{"error":{"code","message","details"},"request_id"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
    #[serde(default)]
    pub request_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    #[serde(default)]
    pub details: Value,
}

impl ErrorEnvelope {
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
