//! Reading a webhook body: which job it is about, what it says happened, and the id it is
//! deduplicated by. It owns no state; signatures are checked before this, in [`crate::signature`].
//!
//! Two shapes are in use and both are accepted:
//! - the guide's `{"event":"job.completed","job_id":"job_..."}` (a `status` and `result` may
//!   ride along);
//! - the docs' envelope `{"id":"evt_...","type":"job.completed","data":{"object":{...job...}}}`,
//!   whose `data.object` is the job object of `GET /jobs/{id}`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::readable::readable_json_text;
use crate::surrogates::mend_lone_surrogates;

/// The longest job or event id accepted; longer ones are treated as garbage, not truncated.
pub const MAX_ID_LEN: usize = 255;

/// The longest event id [`dedupe_key`] makes: a job id, `/` and a type of at most
/// [`MAX_ID_LEN`] bytes each (a longer type is written as its 71-byte hash). A dead letter is
/// keyed by such an id or by a body's hash, so no dead letter's id is longer either.
pub const MAX_EVENT_ID_LEN: usize = 2 * MAX_ID_LEN + 1;

/// Why a body (whose signature was valid) cannot be filed under a job.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The body is not valid JSON; the text is the JSON reader's message.
    #[error("body is not JSON: {0}")]
    NotJson(String),
    /// The body is JSON, but an array, string, number, boolean or `null`.
    #[error("body is JSON but not an object")]
    NotAnObject,
    /// Neither `data.object.id` (the docs' envelope) nor `job_id` (the guide's shape) is there.
    #[error("body names no job id (neither data.object.id nor job_id)")]
    NoJobId,
    /// The id is not a string, is blank, is longer than [`MAX_ID_LEN`] bytes or holds a control
    /// character.
    #[error("job id is not a usable id (empty, too long, or with control characters)")]
    BadJobId,
}

/// What this service needs from an event body.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedEvent {
    /// The job the event is about: `data.object.id`, else `job_id`. Always usable: not blank,
    /// at most [`MAX_ID_LEN`] bytes, no control characters.
    pub job_id: String,
    /// The body's own event id (`id` of the envelope shape), if any.
    pub body_event_id: Option<String>,
    /// `type` or `event`, e.g. `job.completed`.
    pub event_type: Option<String>,
    /// The job status the event reports: `data.object.status`, else `status`, else the part of
    /// the event type after `job.`.
    pub status: Option<String>,
    /// The job's output (`result`), or `{"error": ...}` for a failed job, when the body has one,
    /// as JSON text (on the usual path the text as it came, not re-encoded).
    pub result: Option<String>,
}

/// Whether `s` can be a job or event id: not blank, at most [`MAX_ID_LEN`] bytes of UTF-8, no
/// control character. The admin API registers only such job ids, so that a webhook can name any
/// job it registers.
pub fn usable_id(s: &str) -> bool {
    !s.trim().is_empty() && s.len() <= MAX_ID_LEN && !s.chars().any(char::is_control)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, key| v.get(key))?.as_str()
}

/// Reads an event body of either shape.
///
/// Webhook bodies are read on the hot path, so the usual case (objects where objects are
/// expected, each key once) is read without building a JSON tree; anything else goes through the
/// general reading below, which gives the same answer for the usual case.
pub fn parse_event(body: &[u8]) -> Result<ParsedEvent, ParseError> {
    match parse_fast(body) {
        Some(parsed) => parsed,
        None => parse_general(body),
    }
    .map(storable)
}

/// Drops what a database cannot store as text or jsonb (a NUL character, `\u0000`): such a
/// status, type or result is treated as absent (so is a blank status beside a type that names
/// one); the raw body keeps everything. So is a result
/// that `jsonb` refuses or that could not be read back ([`crate::readable`]: nested too deep, a
/// number past `f64`, or with more digits after the point than `numeric` holds). A result's lone
/// surrogates (`\udfff`, which `jsonb` refuses too) are mended into U+FFFD instead
/// ([`mend_lone_surrogates`]): the rest of the result is worth keeping.
fn storable(mut p: ParsedEvent) -> ParsedEvent {
    let has_nul = |s: &String| s.contains('\0');
    if p.event_type.as_ref().is_some_and(has_nul) {
        p.event_type = None;
    }
    if p.status.as_ref().is_some_and(has_nul) {
        // As for a body with no status: the type's (`job.completed`), when it has one.
        p.status = p.event_type.as_deref().and_then(status_of_type);
    } else if p.status.as_ref().is_some_and(|s| s.trim().is_empty()) {
        // A blank status (`""`, spaces) says nothing: the type's, when it names one (the
        // dedupe key is the type's then, so it is the same as before); without, kept as sent.
        if let Some(status) = p.event_type.as_deref().and_then(status_of_type) {
            p.status = Some(status);
        }
    }
    p.result = p.result.and_then(kept_result);
    p
}

/// What is kept of a job's outcome as JSON text (its `result`, or `{"error": ...}`): its lone
/// surrogates mended into U+FFFD ([`mend_lone_surrogates`]), and nothing at all when it holds
/// a NUL character or could not be read back ([`readable_json_text`]). A webhook body's result
/// and a status answer's ([`crate::JobObject`]) are judged by this one rule, so a job closes
/// with the same result whichever path brings its status.
pub(crate) fn kept_result(raw: String) -> Option<String> {
    let mended = match mend_lone_surrogates(&raw) {
        Cow::Owned(mended) => Some(mended),
        Cow::Borrowed(_) => None,
    };
    let text = mended.unwrap_or(raw);
    (!json_has_nul(&text) && readable_json_text(&text)).then_some(text)
}

/// A job's outcome as JSON text, from its `result` and `error` as they came: the result, else
/// `{"error": error}`, else nothing (JSON `null` reads as absent before this).
pub(crate) fn outcome_text(result: Option<&RawValue>, error: Option<&RawValue>) -> Option<String> {
    match (result, error) {
        (Some(r), _) => Some(r.get().to_owned()),
        (None, Some(e)) => Some(format!("{{\"error\":{}}}", e.get())),
        (None, None) => None,
    }
}

/// The status an event type names: the part after `job.` (Sume's `job.completed`), the prefix
/// read in any case and the spaces around it ignored, as a status's are; `None` for another
/// type, or when nothing follows the prefix.
fn status_of_type(kind: &str) -> Option<String> {
    let kind = kind.trim();
    let prefix = kind.get(..4).filter(|p| p.eq_ignore_ascii_case("job."))?;
    let status = kind[prefix.len()..].trim();
    (!status.is_empty()).then(|| status.to_owned())
}

/// Whether JSON text holds a NUL in a string or key (`\u0000`, not an escaped backslash).
fn json_has_nul(raw: &str) -> bool {
    raw.contains("\\u0000")
        && serde_json::from_str::<Value>(raw).map_or(true, |v| crate::job::value_has_nul(&v))
}

/// The keys this service reads, at any level, as raw JSON.
#[derive(Deserialize)]
struct Keys<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    event: Option<&'a RawValue>,
    #[serde(borrow, default)]
    job_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    status: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
}

/// Reads an object's keys; `None` for anything but an object read cleanly.
fn keys(raw: &str) -> Option<Keys<'_>> {
    if !raw.trim_start().starts_with('{') {
        return None;
    }
    serde_json::from_str(raw).ok()
}

/// A JSON string's value; `None` for any other JSON type.
fn string(raw: Option<&RawValue>) -> Option<Cow<'_, str>> {
    raw.and_then(|r| serde_json::from_str::<Cow<str>>(r.get()).ok())
}

/// `None` when the body needs the general reading (not an object, a repeated key, `data` or
/// `data.object` present but not an object).
fn parse_fast(body: &[u8]) -> Option<Result<ParsedEvent, ParseError>> {
    let text = std::str::from_utf8(body).ok()?;
    let top = keys(text)?;
    let object = match top.data {
        None => None,
        Some(data) => match keys(data.get())?.object {
            None => None,
            Some(object) => Some(keys(object.get())?),
        },
    };
    let job_id = match object.as_ref().and_then(|o| o.id).or(top.job_id) {
        None => return Some(Err(ParseError::NoJobId)),
        Some(raw) => match string(Some(raw)) {
            Some(id) if usable_id(&id) => id.into_owned(),
            _ => return Some(Err(ParseError::BadJobId)),
        },
    };
    let event_type = string(top.kind)
        .or_else(|| string(top.event))
        .map(Cow::into_owned);
    let status = object
        .as_ref()
        .and_then(|o| string(o.status))
        .or_else(|| string(top.status))
        .map(Cow::into_owned)
        .or_else(|| event_type.as_deref().and_then(status_of_type));
    let holder = object.as_ref().unwrap_or(&top);
    let result = outcome_text(holder.result, holder.error);
    let body_event_id = string(top.id)
        .filter(|id| object.is_some() && usable_id(id))
        .map(Cow::into_owned);
    Some(Ok(ParsedEvent {
        job_id,
        body_event_id,
        event_type,
        status,
        result,
    }))
}

/// The general reading: any JSON, through a tree.
fn parse_general(body: &[u8]) -> Result<ParsedEvent, ParseError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ParseError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(ParseError::NotAnObject);
    }
    let object = value
        .get("data")
        .and_then(|d| d.get("object"))
        .filter(|o| !o.is_null());
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
        .or_else(|| event_type.as_deref().and_then(status_of_type));
    let holder = object.unwrap_or(&value);
    let result =
        crate::job::outcome_value(holder.get("result"), holder.get("error")).map(|v| v.to_string());
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

/// The key an event is deduplicated by, taken only from what the signature covers (the
/// body): the body's own event `id` (envelope shape), else `"{job_id}/{type}"` (the type, else
/// the status). Sume's docs make the event id "stable per job and terminal event type", which
/// is what this encodes, so a redelivery whose body differs still deduplicates. A type that is
/// no usable id (over [`MAX_ID_LEN`] bytes, control characters) is written as its hash, so the
/// key stays within what the inbox's index holds and is still the same at every redelivery.
///
/// Never the `X-Sume-Event-Id` header: it is not signed, so whoever holds one signed delivery
/// could replay it under fresh ids, or claim a future event's id in advance.
pub fn dedupe_key(parsed: &ParsedEvent) -> String {
    if let Some(id) = parsed.body_event_id.as_deref() {
        return id.to_owned();
    }
    let kind = parsed
        .event_type
        .as_deref()
        .or(parsed.status.as_deref())
        .unwrap_or("event");
    if usable_id(kind) {
        format!("{}/{kind}", parsed.job_id)
    } else {
        format!("{}/{}", parsed.job_id, body_key(kind.as_bytes()))
    }
}

/// The key of a verified body that names no job (a dead letter): `sha256:<hex of the body>`,
/// so a byte-identical redelivery is kept once whatever its headers say.
pub fn body_key(body: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(body)))
}

/// Whether `header` (an `X-Sume-Event-Id` as received) is usable as an id at all.
pub fn usable_header_id(header: Option<&str>) -> Option<&str> {
    header.map(str::trim).filter(|h| usable_id(h))
}

#[cfg(test)]
#[path = "event_tests.rs"]
mod tests;
