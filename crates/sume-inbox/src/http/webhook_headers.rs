//! A webhook's headers as the checks read them: the verifying pair (`X-Sume-Timestamp`,
//! `X-Sume-Signature`) and the event id hint, and what makes a verifying header unreadable
//! (sent twice, not ASCII text), which is said as such rather than as "missing"; and the
//! checks made from them alone, before a body is read ([`before_the_body`]), which the webhook
//! route refuses by and [`super::misrouted`] counts by.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use sume_wire::{headers, VerifyError};

use crate::decisions::delivery::{check_headers, Received};

/// Now, in Unix seconds (what a signed timestamp is compared with).
pub(super) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// What the headers alone can tell of a delivery: both verifying headers there, readable and
/// well formed, and the timestamp within `tolerance` (WEBHOOK_TOLERANCE) of now. What fails
/// cannot verify, whatever its body; what passes may (anyone can write such headers: only the
/// body's signature tells).
pub(super) fn before_the_body(headers: &HeaderMap, tolerance: Duration) -> Result<(), VerifyError> {
    match unreadable(headers) {
        Some(e) => Err(e),
        None => check_headers(received(headers), unix_now(), tolerance.as_secs()),
    }
}

pub(super) fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

pub(super) fn received(headers: &HeaderMap) -> Received<'_> {
    Received {
        timestamp: header_str(headers, headers::TIMESTAMP),
        signature: header_str(headers, headers::SIGNATURE),
        // A hint only, kept as UTF-8 text when it is that (not only visible ASCII).
        event_id: headers
            .get(headers::EVENT_ID)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok()),
    }
}

/// A verifying header that is there but cannot be read as one: sent twice (which one was
/// signed?), or not ASCII text. Said as such, not as "missing".
pub(super) fn unreadable(headers: &HeaderMap) -> Option<VerifyError> {
    [
        ("X-Sume-Timestamp", headers::TIMESTAMP),
        ("X-Sume-Signature", headers::SIGNATURE),
    ]
    .into_iter()
    .find_map(|(name, key)| {
        let mut values = headers.get_all(key).iter();
        let first = values.next()?;
        let why = if values.next().is_some() {
            "is sent more than once"
        } else if first.to_str().is_err() {
            "is not ASCII text"
        } else {
            return None;
        };
        Some(VerifyError::UnreadableHeader { name, why })
    })
}
