//! Whether a job's result can make the round trip through the database: PostgreSQL's `jsonb`
//! takes JSON nested thousands deep and numbers up to 131072 digits before the decimal point,
//! but what this service reads back (`serde_json`) stops at 128 levels and at numbers past
//! `f64`'s range, and a `jsonb` nested deep enough fails the insert itself. The other way
//! round, `jsonb` refuses a number with more than 16383 digits after the point (`1e-20000`,
//! which `f64` reads as 0) and fails the whole row. A result beyond [`MAX_RESULT_DEPTH`] levels,
//! or with a number `f64` or `jsonb` cannot hold, is left out of the `result` column (the raw
//! body keeps it), so every result is stored and every stored result can be read back by the
//! attach, the feed and the admin API.

/// The most digits after the decimal point PostgreSQL's `numeric`, and so a `jsonb` number,
/// holds (its display scale is 14 bits): `1e-16383` is stored, `1e-16384` and `1.5e-16383`
/// are refused.
pub const NUMERIC_MAX_SCALE: i64 = 16383;

/// PostgreSQL refuses a number whose exponent is this far from 0 or farther, whatever its
/// digits (`0e1073741823`), before it counts them: half of `i32::MAX`.
const NUMERIC_MAX_EXPONENT: i64 = i32::MAX as i64 / 2;

/// The deepest result kept in the `result` column: arrays and objects nested at most this many
/// levels (a job's output is a few levels deep; the reader's own limit is 128).
pub const MAX_RESULT_DEPTH: usize = 64;

/// Whether JSON text (already known to be valid JSON) nests at most [`MAX_RESULT_DEPTH`] levels
/// and holds no number outside `f64`'s range or that `jsonb` refuses ([`numeric_holds`]). One
/// pass over the bytes, no tree.
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
                if !storable_number(&raw[start..i]) {
                    return false;
                }
            }
            _ => i += 1,
        }
    }
    true
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

/// Whether a JSON number token reads as a finite `f64` and `jsonb` holds it (short plain
/// integers always do).
fn storable_number(token: &str) -> bool {
    let plain = token.len() <= 20 && !token.contains(['e', 'E']);
    plain || (numeric_holds(token) && token.parse::<f64>().is_ok_and(f64::is_finite))
}

/// Whether PostgreSQL's `numeric` input, which reads a `jsonb` number, takes this JSON number
/// token (valid JSON number syntax): its exponent must be nearer 0 than 2^30 - 1, and its
/// scale, the digits written after the decimal point less the exponent (`1.50e-2` has 4,
/// `1e5` none), at most [`NUMERIC_MAX_SCALE`]. Its other limit, 131072 digits before the
/// point, is far past `f64`'s range, which [`readable_json_text`] holds numbers to anyway.
pub fn numeric_holds(token: &str) -> bool {
    let (mantissa, exponent) = match token.find(['e', 'E']) {
        Some(at) => (&token[..at], exponent_of(&token[at + 1..])),
        None => (token, 0),
    };
    let fraction = mantissa
        .split_once('.')
        .map_or(0, |(_, digits)| digits.len() as i64);
    exponent.abs() < NUMERIC_MAX_EXPONENT && fraction - exponent <= NUMERIC_MAX_SCALE
}

/// An exponent's value (`-16383`, `+5`, `0007`), saturating far past any limit of PostgreSQL's.
fn exponent_of(text: &str) -> i64 {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let value = digits.bytes().fold(0i64, |n, d| {
        n.saturating_mul(10)
            .saturating_add(i64::from(d.wrapping_sub(b'0')))
            .min(i64::from(i32::MAX) * 4)
    });
    if negative {
        -value
    } else {
        value
    }
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
    fn a_number_jsonb_refuses_is_not_readable() {
        for token in [
            "1e-20000",
            "1e-16384",
            "1.5e-16383",
            "0e-16384",
            "10e-16384",
        ] {
            assert!(!numeric_holds(token), "{token}");
            assert!(
                !readable_json_text(&format!(r#"{{"n":{token}}}"#)),
                "{token}"
            );
        }
        assert!(!readable_json_text(&format!("[0.{}]", "0".repeat(16384))));
        assert!(readable_json_text(&format!("[0.{}]", "0".repeat(16383))));
        for token in [
            "1e-16383",
            "-1E-16383",
            "0.1e-16382",
            "0.00e-16381",
            "1e-0016383",
        ] {
            assert!(numeric_holds(token), "{token}");
            assert!(
                readable_json_text(&format!(r#"{{"n":{token}}}"#)),
                "{token}"
            );
        }
    }

    #[test]
    fn an_exponent_past_postgresqls_bound_is_refused_even_for_zero() {
        assert!(numeric_holds("0e1073741822"));
        assert!(readable_json_text("[0e1073741822]"));
        for token in ["0e1073741823", "0E+99999999999999999999", "0e-1073741823"] {
            assert!(!numeric_holds(token), "{token}");
            assert!(!readable_json_text(&format!("[{token}]")), "{token}");
        }
        assert!(numeric_holds("1e131071"), "f64's range is what stops it");
        assert!(!readable_json_text("[1e131071]"));
    }

    #[test]
    fn brackets_and_digits_inside_strings_do_not_count() {
        let text = format!(
            r#"{{"s":"{}","t":"1e999 \" [[","u":"\\"}}"#,
            "[".repeat(200)
        );
        assert!(readable_json_text(&text));
    }
}
