//! The media type of an admin write: one `Content-Type`, naming JSON.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};

use crate::http::ApiError;

/// A write's one `Content-Type`, naming JSON ([`is_json`]); refused `415` otherwise, as a write
/// carrying two is whatever they say: the field is a singleton (RFC 9110, 5.3 and 8.3), and
/// which one a proxy in front read is anyone's guess.
pub(super) fn json_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let all: Vec<&HeaderValue> = headers.get_all(header::CONTENT_TYPE).iter().collect();
    let message = match all[..] {
        [one] if one.to_str().is_ok_and(is_json) => return Ok(()),
        [_, _, ..] => format!(
            "a write carries one Content-Type header, this one carries {}: send one, \
             Content-Type: application/json",
            all.len()
        ),
        _ => "a write must be sent with Content-Type: application/json".to_owned(),
    };
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        message,
    ))
}

/// Whether a `Content-Type` names JSON: its type and subtype `application/json`, in any case,
/// whatever parameters follow, with the spaces RFC 9110 allows around their `;`
/// (`application/json ; charset=utf-8`).
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}
