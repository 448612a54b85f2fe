//! How a text Sume sent, of any length (a request id, a redirect's `Location`, a list entry
//! that is no job), is shown in a log line or a report: cut, and said to be.

/// The first `max` characters of `text`, and `"..."` when that cut something off (else `""`).
pub(crate) fn cut_chars(text: &str, max: usize) -> (&str, &'static str) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], "..."),
        None => (text, ""),
    }
}
