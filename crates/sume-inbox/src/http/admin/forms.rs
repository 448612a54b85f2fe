//! The forms of the admin API's text values, as the document states them: each a
//! document-only type (standing for its `String` field, as `db::value_names`' do) whose schema
//! carries the pattern. A pattern states exactly what the value's reader takes, or a part of
//! it (the reader may take more: `wait` reads any duration humantime does, the pattern states
//! the usual forms), never more: a client that sends what the document allows is answered,
//! never refused. The tests below read values made from each pattern with the reader the route
//! uses.

use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
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

/// A whole number of milliseconds, seconds, minutes or hours, up to 9 digits.
pub const WAIT: &str = r"^[0-9]{1,9}(ms|s|m|h)$";

/// A whole number of nanoseconds, milliseconds, seconds, minutes, hours or days, at most 3650
/// days: up to 17, 11, 8, 6 and 4 digits for the smaller units (each at most 1157 days), and
/// 3650 days at most.
pub const AGE: &str = concat!(
    r"^([0-9]{1,17}ns|[0-9]{1,11}ms|[0-9]{1,8}s|[0-9]{1,6}m|[0-9]{1,4}h",
    r"|([0-9]{1,3}|[0-2][0-9]{3}|3[0-5][0-9]{2}|36[0-4][0-9]|3650)d)$"
);

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

#[cfg(test)]
#[path = "forms_tests.rs"]
mod tests;
