//! Whether a job's result can make the round trip through the database: PostgreSQL's `jsonb`
//! takes JSON nested thousands deep and numbers of any size, but what this service reads back
//! (`serde_json`) stops at 128 levels and at numbers past `f64`'s range, and a `jsonb` nested
//! deep enough fails the insert itself. A result beyond [`MAX_RESULT_DEPTH`] levels or with a
//! number `f64` cannot hold is left out of the `result` column (the raw body keeps it), so
//! every stored result can be read back by the attach, the feed and the admin API.

use serde_json::Value;

/// The deepest result kept in the `result` column: arrays and objects nested at most this many
/// levels (a job's output is a few levels deep; the reader's own limit is 128).
pub const MAX_RESULT_DEPTH: usize = 64;

/// Whether JSON text (already known to be valid JSON) nests at most [`MAX_RESULT_DEPTH`] levels
/// and holds no number outside `f64`'s range. One pass over the bytes, no tree.
pub fn readable_json_text(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = after_string(bytes, i + 1),
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_RESULT_DEPTH {
                    return false;
                }
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                if !finite_number(&raw[start..i]) {
                    return false;
                }
            }
            _ => i += 1,
        }
    }
    true
}

/// Whether a parsed JSON value nests at most [`MAX_RESULT_DEPTH`] levels (its numbers came
/// through `serde_json`, so they fit).
pub fn readable_value(v: &Value) -> bool {
    fn depth_within(v: &Value, left: usize) -> bool {
        match v {
            Value::Array(a) => left > 0 && a.iter().all(|v| depth_within(v, left - 1)),
            Value::Object(o) => left > 0 && o.values().all(|v| depth_within(v, left - 1)),
            _ => true,
        }
    }
    depth_within(v, MAX_RESULT_DEPTH)
}

/// The index just past the string whose first byte after the opening quote is `i`.
fn after_string(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Whether a JSON number token reads as a finite `f64` (short plain integers always do).
fn finite_number(token: &str) -> bool {
    let plain = token.len() <= 20 && !token.contains(['e', 'E']);
    plain || token.parse::<f64>().is_ok_and(f64::is_finite)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn a_result_is_readable_up_to_the_depth_and_within_f64() {
        assert!(readable_json_text(
            r#"{"url":"https://cdn.example/a.png","n":[1,2.5,-3e5]}"#
        ));
        assert!(readable_json_text(&nested(MAX_RESULT_DEPTH)));
        assert!(!readable_json_text(&nested(MAX_RESULT_DEPTH + 1)));
        assert!(!readable_json_text(&nested(128)));
        assert!(!readable_json_text(r#"{"n":1e400}"#));
        assert!(!readable_json_text(&format!(
            r#"{{"n":{}}}"#,
            "9".repeat(400)
        )));
        assert!(readable_json_text(&format!(
            r#"{{"n":{}}}"#,
            "9".repeat(30)
        )));
        assert!(readable_json_text(r#"{"n":1e-400}"#));
    }

    #[test]
    fn brackets_and_digits_inside_strings_do_not_count() {
        let text = format!(
            r#"{{"s":"{}","t":"1e999 \" [[","u":"\\"}}"#,
            "[".repeat(200)
        );
        assert!(readable_json_text(&text));
    }

    #[test]
    fn a_parsed_value_is_held_to_the_same_depth() {
        let v: Value = serde_json::from_str(&nested(MAX_RESULT_DEPTH)).unwrap();
        assert!(readable_value(&v));
        let v: Value = serde_json::from_str(&nested(MAX_RESULT_DEPTH + 1)).unwrap();
        assert!(!readable_value(&v));
        assert!(readable_value(&serde_json::json!({"url": "u"})));
    }
}
