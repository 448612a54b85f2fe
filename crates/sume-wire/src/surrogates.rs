//! Lone surrogates in JSON text: `\udfff`, or `\ud800` not followed by its low half. JSON's
//! grammar allows them, and a service that cuts strings by UTF-16 code units (a caption
//! truncated in JavaScript, then `JSON.stringify`) writes them; but they name no character, so
//! PostgreSQL's `jsonb` refuses them and `serde_json` will not read them into a string. Sume's
//! answers are read with each one mended into U+FFFD, the replacement character, as a lossy
//! UTF-8 decoding does with a broken sequence; a pair (an emoji) is kept.

use std::borrow::Cow;

/// `json` with every escaped lone surrogate written `\ufffd`; borrowed when it has none. Only
/// escapes count: an escaped backslash followed by `udfff` is text, and left alone.
pub fn mend_lone_surrogates(json: &str) -> Cow<'_, str> {
    if !json.contains("\\u") {
        return Cow::Borrowed(json);
    }
    let b = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes of `json` already in `out`
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = escape_at(b, i) else {
            i += 2; // another escape (`\\`, `\"`, `\n`, ...): both bytes at once
            continue;
        };
        let paired = match unit {
            0xD800..=0xDBFF => escape_at(b, i + 6).is_some_and(|u| (0xDC00..=0xDFFF).contains(&u)),
            0xDC00..=0xDFFF => false,
            _ => {
                i += 6;
                continue;
            }
        };
        if paired {
            i += 12;
            continue;
        }
        let mended = out.get_or_insert_with(|| String::with_capacity(json.len()));
        mended.push_str(&json[copied..i]);
        mended.push_str("\\ufffd");
        i += 6;
        copied = i;
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut mended) => {
            mended.push_str(&json[copied..]);
            Cow::Owned(mended)
        }
    }
}

/// The code unit of a `\uXXXX` escape starting at `at`, if one does.
fn escape_at(b: &[u8], at: usize) -> Option<u16> {
    let esc = b.get(at..at + 6)?;
    if esc[0] != b'\\' || esc[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&esc[2..]).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_halves_become_the_replacement_character() {
        for (text, mended) in [
            (r#""\udfff""#, r#""\ufffd""#),
            (r#""a\ud800""#, r#""a\ufffd""#),
            (r#""\ud800\u0041""#, r#""\ufffd\u0041""#),
            (r#""\uD800x\uDC00""#, r#""\ufffdx\ufffd""#),
            (r#""\udc00\ud800""#, r#""\ufffd\ufffd""#),
            (r#"{"\udc00":["\ud83d"]}"#, r#"{"\ufffd":["\ufffd"]}"#),
        ] {
            assert_eq!(mend_lone_surrogates(text), mended, "{text}");
            let v: serde_json::Value = serde_json::from_str(&mend_lone_surrogates(text)).unwrap();
            assert!(v.to_string().contains('\u{fffd}'), "{text}");
        }
    }

    #[test]
    fn pairs_text_and_other_escapes_are_kept_as_they_are() {
        for kept in [
            r#""\ud83d\ude00""#,
            r#""\\udfff""#,
            r#""\\\ud83d\ude00""#,
            r#""\u00e9\n\"\u0000""#,
            r#""plain""#,
            r#""\u12"#,
            "",
        ] {
            assert!(
                matches!(mend_lone_surrogates(kept), Cow::Borrowed(_)),
                "{kept}"
            );
        }
    }
}
