//! How a text Sume sent, of any length (a request id, a redirect's `Location`, a list entry
//! that is no job, a header naming what a body is), is shown in a log line or a report: cut,
//! and said to be.

use crate::status_client::MAX_SHOWN_CHARS;

/// The first `max` characters of `text`, and `"..."` when that cut something off (else `""`).
pub(crate) fn cut_chars(text: &str, max: usize) -> (&str, &'static str) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], "..."),
        None => (text, ""),
    }
}

/// An answer's id as kept for logs, spans and reports: Sume's are short (`req_...`); a longer
/// one (a front's, or an envelope's `request_id` of a megabyte) is cut at [`MAX_SHOWN_CHARS`],
/// so no answer makes every line that quotes it that long.
pub(crate) fn shown_request_id(id: String) -> String {
    match cut_chars(&id, MAX_SHOWN_CHARS) {
        (_, "") => id,
        (cut, more) => format!("{cut}{more}"),
    }
}

/// A redirect as recorded: its status and where it pointed, cut at [`MAX_SHOWN_CHARS`].
pub(crate) fn redirected(status: http::StatusCode, location: Option<&http::HeaderValue>) -> String {
    match location.map(|v| String::from_utf8_lossy(v.as_bytes())) {
        Some(l) => {
            let (cut, more) = cut_chars(&l, MAX_SHOWN_CHARS);
            format!("{} to {cut:?}{more}", status.as_u16())
        }
        None => format!("{} with no Location", status.as_u16()),
    }
}

/// The most characters of a `Content-Encoding` or `Content-Type` value that [`body_kind`]
/// keeps.
const MAX_HEADER_CHARS: usize = 64;

/// What an answer's `Content-Encoding` and `Content-Type` say, when they say its body may not
/// be JSON as sent (an encoding other than `identity`, as from a front compressing what the
/// client never asked to be, or a type that is no JSON, as of a maintenance or login page):
/// each that came, as `Content-Type text/html; charset=utf-8`, its value cut at
/// [`MAX_HEADER_CHARS`]. `None` for an answer saying it is plain JSON (or saying nothing).
pub(crate) fn body_kind(headers: &http::HeaderMap) -> Option<String> {
    let value = |name: http::header::HeaderName| {
        let values: Vec<_> = headers
            .get_all(&name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect();
        (!values.is_empty()).then(|| values.join(", "))
    };
    let encoding = value(http::header::CONTENT_ENCODING);
    let kind = value(http::header::CONTENT_TYPE);
    let encoded = encoding
        .as_deref()
        .is_some_and(|e| !e.eq_ignore_ascii_case("identity"));
    let not_json = kind.as_deref().is_some_and(|t| !is_json(t));
    if !encoded && !not_json {
        return None;
    }
    let named: Vec<String> = [("Content-Encoding", encoding), ("Content-Type", kind)]
        .into_iter()
        .filter_map(|(name, value)| {
            let value = value?;
            let (cut, more) = cut_chars(&value, MAX_HEADER_CHARS);
            Some(format!("{name} {cut}{more}"))
        })
        .collect();
    Some(named.join(", "))
}

/// Whether a media type is JSON: `application/json`, or any `.../json` or `...+json`, whatever
/// its parameters.
fn is_json(media_type: &str) -> bool {
    let essence = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.ends_with("/json") || essence.ends_with("+json")
}
