//! The job object of `GET /jobs/{id}` (and of a webhook's `data.object`), and Sume's error
//! envelope: the JSON shapes the status client reads and the simulator writes.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// A job as Sume's read endpoints answer it. Only `id` and `status` are required when reading,
/// so an added or differently typed field upstream does not break the status client; and
/// what rides along is read leniently: an odd `result` costs the result, never the status
/// (the outcome is kept or left out by the rule a webhook body's is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "ReadJob")]
pub struct JobObject {
    /// Sume's job id (`job_...`), as the create call answered it.
    pub id: String,
    /// The object's type name; `"job"` when the answer leaves it out (or sends no string).
    pub object: String,
    /// Sume's status string as sent; [`Status::parse`](crate::Status::parse) says what it means
    /// (the docs list seven spellings, clients in the wild see more).
    pub status: String,
    /// When Sume created the job, as sent. Kept as raw JSON because the docs fix no format (the
    /// simulator sends RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Value>,
    /// When the job reached a terminal status, as sent; `None` while it is in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Value>,
    /// The job's output once it completed; its shape depends on the job type. `None` too when
    /// the webhook path would leave it out (a NUL character, a number past `f64`, nesting past
    /// [`crate::MAX_RESULT_DEPTH`]: see [`crate::readable`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why the job failed, as sent; `None` unless it failed, and when the job has a `result`
    /// (what is recorded of a job is the one or the other: [`JobObject::outcome_value`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// The outcome as kept ([`JobObject::outcome_text`]), as the JSON text it came as: every
    /// digit of its numbers, which `result` and `error` (read as values) may have rounded.
    #[serde(skip)]
    pub kept_text: Option<crate::JsonText>,
}

/// A job object as it comes, before [`JobObject`] is made of it: `id` and `status` are read as
/// strings, the rest as raw JSON, so a `result` no reader of this service could take (a number
/// past `f64`'s range, nesting past the reader's 128 levels) does not fail the whole object,
/// or the whole list page holding it. The outcome (`result`, else `{"error": ...}`) is kept or
/// left out by the rule a webhook body's is ([`crate::event`]'s `kept_result`): lone surrogates
/// mended, nothing kept that holds a NUL or could not be read back. Times and `object` that do
/// not read are left out. A key sent twice (`"status"` twice) is read as its last value, as a
/// webhook body's is ([`crate::parse_event`]) and as JavaScript's `JSON.parse` reads it, not
/// refused: a refused answer once left a job Sume called completed to be given up. An answer
/// wrapped as Sume's create calls answer, `{"object":"video_generation","job":{...}}`, is read
/// as its `job` when the top level has no string `id` and `status` of its own (a flat answer
/// comes first), by the same rules; one level only.
struct ReadJob {
    id: String,
    status: String,
    object: Option<Box<RawValue>>,
    created_at: Option<Box<RawValue>>,
    completed_at: Option<Box<RawValue>>,
    result: Option<Box<RawValue>>,
    error: Option<Box<RawValue>>,
}

impl From<ReadJob> for JobObject {
    fn from(raw: ReadJob) -> JobObject {
        let kept = crate::event::outcome_text(raw.result.as_deref(), raw.error.as_deref())
            .and_then(crate::event::kept_result)
            .and_then(crate::JsonText::new);
        let kept_text = kept.clone();
        let kept = kept.and_then(|text| text.value());
        let (result, error) = match kept {
            Some(result) if raw.result.is_some() => (Some(result), None),
            Some(mut wrapped) => (None, Some(wrapped["error"].take())),
            None => (None, None),
        };
        JobObject {
            id: raw.id,
            object: read(raw.object).unwrap_or_else(job_object_kind),
            status: raw.status,
            created_at: read(raw.created_at),
            completed_at: read(raw.completed_at),
            result,
            error,
            kept_text,
        }
    }
}

impl<'de> Deserialize<'de> for ReadJob {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<ReadJob, D::Error> {
        deserializer.deserialize_map(ReadJobVisitor { wrapped: true })
    }
}

/// Reads a job object; `wrapped` when a `job` object inside it may stand for it.
struct ReadJobVisitor {
    wrapped: bool,
}

/// The job object a wrapped answer holds under `job`, read as a flat one (not wrapped again);
/// `None` when it is none.
fn inner_job(raw: &RawValue) -> Option<ReadJob> {
    use serde::Deserializer as _;
    let mut reader = serde_json::Deserializer::from_str(raw.get());
    reader
        .deserialize_map(ReadJobVisitor { wrapped: false })
        .ok()
}

impl<'de> serde::de::Visitor<'de> for ReadJobVisitor {
    type Value = ReadJob;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a job object")
    }

    /// Each known key's last value, kept raw; `id` and `status` read as strings at the end, so
    /// an earlier value of another type that a later one replaces does not matter.
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ReadJob, A::Error> {
        use serde::de::Error;
        let (mut id, mut status, mut object, mut created_at) = (None, None, None, None);
        let (mut completed_at, mut result, mut error, mut job) = (None, None, None, None);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let slot = match &*key {
                "id" => &mut id,
                "status" => &mut status,
                "object" => &mut object,
                "created_at" => &mut created_at,
                "completed_at" => &mut completed_at,
                "result" => &mut result,
                "error" => &mut error,
                "job" if self.wrapped => &mut job,
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value::<Box<RawValue>>()?);
        }
        let text = |raw: Option<Box<RawValue>>, name: &'static str| {
            let raw = raw.ok_or_else(|| A::Error::missing_field(name))?;
            serde_json::from_str::<String>(raw.get())
                .map_err(|e| A::Error::custom(format_args!("{name}: {e}")))
        };
        let (id, status) = (text(id, "id"), text(status, "status"));
        if id.is_err() || status.is_err() {
            if let Some(inner) = job.as_deref().and_then(inner_job) {
                return Ok(inner);
            }
        }
        // A `null` is absent.
        let present = |raw: Option<Box<RawValue>>| raw.filter(|r| r.get() != "null");
        Ok(ReadJob {
            id: id?,
            status: status?,
            object: present(object),
            created_at: present(created_at),
            completed_at: present(completed_at),
            result: present(result),
            error: present(error),
        })
    }
}

/// A field read as `T`, `None` when it is absent or does not read as one.
fn read<T: serde::de::DeserializeOwned>(raw: Option<Box<RawValue>>) -> Option<T> {
    raw.and_then(|v| serde_json::from_str(v.get()).ok())
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

    /// [`JobObject::outcome_value`] as JSON text: as the answer sent it (lone surrogates
    /// mended), so its numbers keep every digit; made from the values when the object was not
    /// read from an answer.
    pub fn outcome_text(&self) -> Option<crate::JsonText> {
        self.kept_text
            .clone()
            .or_else(|| self.outcome_value().as_ref().map(crate::JsonText::of))
    }

    /// What a database can store of it: an `id` or `status` holding a NUL character
    /// (`\u0000`, which neither `text` nor `jsonb` holds) makes the object unusable (`None`);
    /// a status past [`MAX_STATUS_CHARS`] is cut. (Its `result` and `error` were judged as it
    /// was read.)
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
#[path = "job_tests.rs"]
mod tests;
