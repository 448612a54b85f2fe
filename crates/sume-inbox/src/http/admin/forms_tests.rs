//! Values made from each pattern of [`super`], read by the reader the route uses: every one is
//! taken. (Anchors are left out for the generator, which makes whole strings.)

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::db::{FeedCursor, PageKey};

/// Strings of `pattern`, a `^...$` of [`super`].
fn of(pattern: &str) -> impl Strategy<Value = String> {
    let inner = pattern.strip_prefix('^').and_then(|p| p.strip_suffix('$'));
    proptest::string::string_regex(inner.expect("anchored")).expect("a pattern proptest reads")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn text_is_what_postgresql_holds(s in of(TEXT)) {
        prop_assert!(crate::db::text_can_hold(&s));
    }

    #[test]
    fn time_keys_are_read_as_positions(s in of(TIME_KEY)) {
        prop_assert!(s.is_empty() || PageKey::decode(&s).is_some(), "{s:?}");
        prop_assert!(crate::db::text_can_hold(&s));
    }

    #[test]
    fn number_keys_are_read_as_numbers(s in of(NUMBER_KEY)) {
        prop_assert!(s.is_empty() || s.parse::<i64>().is_ok(), "{s:?}");
    }

    #[test]
    fn cursors_are_read_as_cursors(s in of(CURSOR)) {
        prop_assert!(s.is_empty() || s.parse::<FeedCursor>().is_ok(), "{s:?}");
    }

    #[test]
    fn waits_are_read_as_durations(s in of(WAIT)) {
        let max = Duration::from_secs(60);
        prop_assert!(crate::http::admin::wait::parse_wait(&s, max).is_ok(), "{s:?}");
    }

    #[test]
    fn ages_are_read_within_ten_years(s in of(AGE)) {
        prop_assert!(crate::http::admin::operator::read_age(&s).is_ok(), "{s:?}");
    }

    #[test]
    fn names_within_their_length_are_usable(s in of(NAME)) {
        prop_assume!(s.chars().count() <= NAME_MAX);
        prop_assert!(usable_name(&s), "{s:?}");
    }

    #[test]
    fn dead_letter_ids_within_their_length_are_taken(s in of(NOT_BLANK)) {
        prop_assume!(s.chars().count() <= DEAD_LETTER_ID_MAX);
        prop_assert_eq!(crate::http::admin::replay_routes::refusal(&[s]), None);
    }
}

/// The edges of each pattern's bounds are read as the pattern says.
#[test]
fn the_bounds_of_the_patterns_are_the_readers() {
    let ten_years = crate::config::setting::MAX_DURATION;
    for age in [
        "3650d",
        "99999999s",
        "999999m",
        "9999h",
        "99999999999ms",
        "99999999999999999ns",
    ] {
        let read = crate::http::admin::operator::read_age(age).unwrap();
        assert!(read <= ten_years, "{age}");
    }
    assert!(crate::http::admin::operator::read_age("3651d").is_err());
    for leap in [
        "2000-02-29T00:00:00Z|x",
        "0000-02-29T00:00:00Z|x",
        "2024-02-29T23:59:59.123456789+23:59|x",
    ] {
        assert!(PageKey::decode(leap).is_some(), "{leap}");
    }
    for cursor in [
        "3-0",
        "000000000000000003-000000000000000000",
        "999999999999999999-999999999999999999",
    ] {
        assert!(cursor.parse::<FeedCursor>().is_ok(), "{cursor}");
    }
    assert!(usable_name(&"é".repeat(NAME_MAX)));
    assert!(!usable_name(&"é".repeat(NAME_MAX + 1)));
    assert!(!usable_name(" \u{3000}"));
    assert!(!usable_name("a\u{85}"));
}
