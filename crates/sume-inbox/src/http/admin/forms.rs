//! The forms of the admin API's text values, as the document states them: each a
//! document-only type (standing for its `String` field, as `db::value_names`' do) whose schema
//! carries the pattern, and the lengths where it has some. A pattern states exactly what the
//! value's reader takes, or a part of it (the reader may take more: `wait` reads any duration
//! humantime does, the pattern states the usual forms), never more: a client that sends what the
//! document allows is answered, never refused. The tests below read values made from each
//! pattern with the reader the route uses; `tests/it/openapi_fuzz.rs` sends them to a daemon.
//!
//! JSON Schema counts a length in characters (Unicode code points), and so do the readers.

use utoipa::openapi::schema::{
    Array, ArrayBuilder, Object, ObjectBuilder, Schema, SchemaType, Type,
};
use utoipa::openapi::RefOr;

/// Any text without a NUL character (PostgreSQL's text cannot hold one).
pub const TEXT: &str = r"^[^\u0000]*$";

/// `<RFC 3339 time>|<id>`, or empty: a date of the years 0000 to 9999 that the calendar has
/// (February 29 in leap years only), `T`, the time to the second with up to 9 digits of its
/// fraction, `Z` or an offset, `|`, then any text without a NUL character.
pub const TIME_KEY: &str = concat!(
    r"^((",
    r"[0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])",
    r"|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)",
    r"|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])",
    r"|([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29",
    r")T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?",
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])\|[^\u0000]*)?$"
);

/// A whole number of up to 18 digits, or empty.
pub const NUMBER_KEY: &str = r"^([0-9]{1,18})?$";

/// `0`, `<transaction id>-<sequence>` (the transaction id 3 or more: PostgreSQL's first normal
/// one; leading zeros allowed, up to 18 digits each), or empty.
pub const CURSOR: &str = r"^(0|0*([3-9]|[1-9][0-9]{1,17})-[0-9]{1,18})?$";

/// A whole number of milliseconds, seconds, minutes or hours, up to 9 digits.
pub const WAIT: &str = r"^[0-9]{1,9}(ms|s|m|h)$";

/// A whole number of nanoseconds, milliseconds, seconds, minutes, hours or days, at most 3650
/// days: up to 17, 11, 8, 6 and 4 digits for the smaller units (each at most 1157 days), and
/// 3650 days at most.
pub const AGE: &str = concat!(
    r"^([0-9]{1,17}ns|[0-9]{1,11}ms|[0-9]{1,8}s|[0-9]{1,6}m|[0-9]{1,4}h",
    r"|([0-9]{1,3}|[0-2][0-9]{3}|3[0-5][0-9]{2}|36[0-4][0-9]|3650)d)$"
);

/// Not blank (a character that is not white space, as Rust's `trim` reads it) and no control
/// character (Unicode's `Cc`).
pub const NAME: &str = concat!(
    r"^[^\u0000-\u001f\u007f-\u009f]*",
    r"[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]",
    r"[^\u0000-\u001f\u007f-\u009f]*$"
);

/// Not blank (as [`NAME`]) and no NUL character.
pub const NOT_BLANK: &str = concat!(
    r"^[^\u0000]*",
    r"[^\u0000\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]",
    r"[^\u0000]*$"
);

/// The most characters of a registration's `job_id`, `order_id` and `api_key`.
pub const NAME_MAX: usize = 255;

/// The most characters of a dead letter's id a drop names: as many as the longest id's bytes
/// ([`sume_wire::event::MAX_EVENT_ID_LEN`]), so every id is within it.
pub const DEAD_LETTER_ID_MAX: usize = sume_wire::event::MAX_EVENT_ID_LEN;

/// The most ids one drop names.
pub const DROP_MAX: usize = 1000;

fn form(pattern: &str, example: &str, what: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .examples([example])
        .description(Some(what))
}

/// Declares a document-only type named `$name` in the document: a string of `$pattern`.
macro_rules! text_form {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $schema:expr) => {
        $(#[$doc])*
        pub struct $ty;

        impl utoipa::PartialSchema for $ty {
            fn schema() -> RefOr<Schema> {
                $schema.into()
            }
        }

        impl utoipa::ToSchema for $ty {
            fn name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }
        }
    };
}

text_form!(
    /// [`TEXT`] in the document.
    Text, "Text",
    form(TEXT, "order-7", "Any text without a NUL character (PostgreSQL's text cannot hold one).")
);
text_form!(
    /// [`TIME_KEY`] in the document.
    TimeKey, "TimeKey",
    form(
        TIME_KEY,
        "2026-12-03T18:02:33.380359Z|evt_1",
        "A position in a list ordered by a time, then an id: `<RFC 3339 time>|<id>`, as \
         `next_after` gives it (a date of the years 0000 to 9999, the time to the second with \
         up to 9 digits of its fraction, `Z` or an offset); empty, the start."
    )
);
text_form!(
    /// [`NUMBER_KEY`] in the document.
    NumberKey, "NumberKey",
    form(
        NUMBER_KEY,
        "42",
        "A position in a list ordered by a number: a whole number, as `next_after` gives it; \
         empty, the start."
    )
);
text_form!(
    /// [`CURSOR`] in the document.
    Cursor, "Cursor",
    form(
        CURSOR,
        "5123-88",
        "A position in the feed of closes: a `cursor` or `next_cursor` an answer gave \
         (`<transaction id>-<sequence>`, read as its two numbers: `007-1` is `7-1`), or `0` \
         or empty, the start."
    )
);
text_form!(
    /// [`WAIT`] in the document.
    Wait, "Wait",
    form(
        WAIT,
        "30s",
        "How long to wait: a whole number of `ms`, `s`, `m` or `h`. A wait longer than the \
         instance's MAX_WAIT (60s unless set) waits MAX_WAIT."
    )
);
text_form!(
    /// [`AGE`] in the document.
    Age, "Age",
    form(
        AGE,
        "10m",
        "An age: a whole number of `ns`, `ms`, `s`, `m`, `h` or `d`, at most 3650 days."
    )
);

/// A registration's `job_id`, `order_id` or `api_key`: [`NAME`], 1 to [`NAME_MAX`] characters
/// (or `null`, when `nullable`: none given).
pub fn name(what: &str, nullable: bool) -> Object {
    let types = match nullable {
        true => SchemaType::from_iter([Type::String, Type::Null]),
        false => SchemaType::Type(Type::String),
    };
    ObjectBuilder::new()
        .schema_type(types)
        .min_length(Some(1))
        .max_length(Some(NAME_MAX))
        .pattern(Some(NAME))
        .description(Some(what))
        .build()
}

/// The ids a drop names: 1 to 1000 of them, each [`NOT_BLANK`] and 1 to [`DEAD_LETTER_ID_MAX`]
/// characters.
pub fn dead_letter_ids() -> Array {
    let id = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(DEAD_LETTER_ID_MAX))
        .pattern(Some(NOT_BLANK));
    ArrayBuilder::new()
        .items(id)
        .min_items(Some(1))
        .max_items(Some(DROP_MAX))
        .description(Some(
            "The dead letters' ids, 1 to 1000: each 1 to 511 characters (no dead letter's id is \
             longer), not blank, with no NUL character.",
        ))
        .build()
}

/// Whether `s` is a usable registration value: 1 to [`NAME_MAX`] characters, not blank, no
/// control character ([`NAME`]).
pub fn usable_name(s: &str) -> bool {
    !s.trim().is_empty() && s.chars().count() <= NAME_MAX && !s.chars().any(char::is_control)
}

#[cfg(test)]
#[path = "forms_tests.rs"]
mod tests;
