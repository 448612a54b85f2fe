//! The simulator's own reading of Sume's docs: header names, the signed string, the job object
//! and the error envelope, written here from `../shared/sume-api.md`'s sentences and nowhere
//! taken from `sume-wire` (the daemon's crate). Were the two readings to differ, the fixed
//! vectors of `fixtures/sume/` (computed by `openssl dgst -sha256 -hmac`, outside Rust) catch
//! it on whichever side is wrong, where sharing one crate would let both sides agree on the
//! same mistake.

use std::fmt;

use hmac::{Hmac, Mac};
use serde::Serialize;
use serde_json::Value;
use sha2::Sha256;

/// "`X-Sume-Event-Id`: stable per job and terminal event type, so a redelivery repeats it."
pub const EVENT_ID_HEADER: &str = "X-Sume-Event-Id";
/// "`X-Sume-Timestamp`: Unix seconds."
pub const TIMESTAMP_HEADER: &str = "X-Sume-Timestamp";
/// "`X-Sume-Signature`: `v1=<hex>`, the HMAC-SHA256 of the string `"{timestamp}.{raw body}"`
/// under the integration's signing secret."
pub const SIGNATURE_HEADER: &str = "X-Sume-Signature";

/// A webhook signing secret or an API key. `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value` as given (nothing trimmed).
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the HMAC and the key lookup only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The string the docs say is signed: the timestamp's decimal digits, a dot, the raw body.
pub fn signed_string(timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut s = format!("{timestamp}.").into_bytes();
    s.extend_from_slice(body);
    s
}

/// Lowercase hex of HMAC-SHA256(`secret`, [`signed_string`]); what `openssl dgst -sha256
/// -hmac SECRET` prints for the same bytes.
pub fn hmac_hex(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(&signed_string(timestamp, body));
    hex::encode(mac.finalize().into_bytes())
}

/// The `X-Sume-Signature` value: `v1=<hex>` for each secret, joined by `,` (two while a
/// secret is rotated; the docs show one, the several-value form is this project's assumption).
pub fn signature_value(secrets: &[Secret], timestamp: i64, body: &[u8]) -> String {
    let mut out = String::new();
    for (i, s) in secrets.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("v1=");
        out.push_str(&hmac_hex(s, timestamp, body));
    }
    out
}

/// The job object of `GET /jobs/{id}` and of an envelope's `data.object`: the docs name `id`
/// and `status`; the times, `result` and `error` are this project's assumption.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobObject {
    /// `job_...`.
    pub id: String,
    /// Always `"job"` (an assumption).
    pub object: String,
    /// As the status dialect of the job's kind spells it.
    pub status: String,
    /// RFC 3339 (an assumption: the docs fix no format).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Value>,
    /// When the job ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Value>,
    /// The output of a successful job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why an unsuccessful job ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// The docs' error envelope:
/// `{"error":{"code":"rate_limit_exceeded","message":"...","details":{}},"request_id":"req_..."}`.
pub fn error_envelope(code: &str, message: &str, request_id: &str) -> Value {
    serde_json::json!({
        "error": { "code": code, "message": message, "details": {} },
        "request_id": request_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_string_is_timestamp_dot_body() {
        assert_eq!(signed_string(17, b"{}"), b"17.{}");
        let two = signature_value(&[Secret::new("a"), Secret::new("b")], 1, b"x");
        assert_eq!(two.matches("v1=").count(), 2);
        assert!(!format!("{:?}", Secret::new("hunter2")).contains("hunter2"));
    }
}
