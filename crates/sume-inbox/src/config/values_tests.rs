//! One setting's text read as the operator wrote it: words in any case, and a refusal of a
//! value read from a file named by that file's variable.

use super::*;
use crate::config::declared::*;
use crate::config::Config;

/// `DEAD_LETTER_RETENTION=NEVER` and `GIVE_UP_RECHECK=Off` were refused (78) while
/// `DB_POOLER=Transaction` and the switches took any case.
#[test]
fn words_are_read_in_any_case() {
    let none = |s: &'static Setting, text: &str| {
        Values::defaults()
            .with(s, text)
            .duration_or_none(s)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    };
    assert_eq!(none(&DEAD_LETTER_RETENTION, "NEVER"), None);
    assert_eq!(none(&GIVE_UP_RECHECK, "Off"), None);
    assert_eq!(none(&JOB_RETENTION, " Never "), None);
    assert!(none(&GIVE_UP_RECHECK, "2d").is_some());
    let choice = |s: &'static Setting, text: &str| Values::defaults().with(s, text).choice(s);
    assert_eq!(choice(&LIST_WALKS, "OFF"), Ok("off"));
    assert_eq!(choice(&DB_POOLER, "Transaction"), Ok("transaction"));
    assert_eq!(choice(&WAIT_WAKEUP, "Poll"), Ok("poll"));
    assert!(choice(&WAIT_WAKEUP, "notify").is_err());
}

/// The settings `serve` needs, and `setting` read from its file.
fn from_file(setting: &'static Setting, text: &str) -> Values {
    let mut v = Values::defaults()
        .with(&DATABASE_URL, "postgres://u:pw@localhost/x")
        .with(&SUME_WEBHOOK_SECRET, "whsec_x");
    v.set(setting, text, Source::File);
    v
}

/// `ADMIN_TOKEN_FILE` holding `short` was refused as `ADMIN_TOKEN: is 5 characters long`: the
/// operator set no ADMIN_TOKEN, and looked for one.
#[test]
fn a_value_read_from_a_file_is_refused_by_the_files_variable() {
    for (setting, text, file_var) in [
        (&ADMIN_TOKEN, "short", "ADMIN_TOKEN_FILE"),
        (&SUME_API_KEYS, "main", "SUME_API_KEYS_FILE"),
        (&SUME_API_KEY, "sk_a\u{1}b", "SUME_API_KEY_FILE"),
        (
            &SUME_WEBHOOK_SECRET,
            "whsec_a\u{1b}b",
            "SUME_WEBHOOK_SECRET_FILE",
        ),
        (
            &DATABASE_URL,
            "postgres://u@h:notaport/db",
            "DATABASE_URL_FILE",
        ),
    ] {
        let e = Config::read(&from_file(setting, text)).unwrap_err();
        assert_eq!(e.name, file_var, "{e}");
    }
    // A rule broken by a value read from a file names the file's variable too.
    let mut v = from_file(&ADMIN_APP_TOKEN, "the-same-token-twice");
    v.set(&ADMIN_TOKEN, "the-same-token-twice", Source::Environment);
    assert_eq!(Config::read(&v).unwrap_err().name, "ADMIN_APP_TOKEN_FILE");
    // The same text from the variable itself is refused by the variable's name.
    let v = Values::defaults().with(&ADMIN_TOKEN, "short");
    assert_eq!(v.token(&ADMIN_TOKEN).unwrap_err().name, "ADMIN_TOKEN");
}

/// `BODY_TIMEOUT=1ns` is more than 0 yet under the floor of 1ms: the refusal says that floor.
/// Before, it said "more than 0".
#[test]
fn a_duration_under_its_floor_is_told_the_floor() {
    let v = Values::defaults().with(&BODY_TIMEOUT, "1ns");
    let e = v.duration(&BODY_TIMEOUT).unwrap_err().to_string();
    assert!(e.contains("at least 1ms"), "{e}");
    assert!(!e.contains("more than 0"), "{e}");
}

/// `SWEEP_INTERVAL=1ms` and `ATTACH_SCAN_INTERVAL=1ms` were taken, and every instance then
/// queried the database without pause; under 100ms each is refused, saying that floor.
#[test]
fn a_sweep_or_attach_scan_interval_under_100ms_is_refused() {
    for s in [&SWEEP_INTERVAL, &ATTACH_SCAN_INTERVAL] {
        for text in ["1ms", "99ms"] {
            let e = Values::defaults().with(s, text).duration(s).unwrap_err();
            assert_eq!(e.name, s.name);
            assert!(e.to_string().contains("at least 100ms"), "{e}");
        }
        let taken = Values::defaults().with(s, "100ms").duration(s);
        assert_eq!(taken, Ok(std::time::Duration::from_millis(100)));
    }
}

/// `WAIT_POLL_INTERVAL=1ms` was taken, and while anyone waited every instance queried the
/// database without pause; under 100ms it is refused, saying that floor.
#[test]
fn a_wait_poll_interval_under_100ms_is_refused() {
    let s = &WAIT_POLL_INTERVAL;
    for text in ["1ns", "1ms", "99ms"] {
        let e = Values::defaults().with(s, text).duration(s).unwrap_err();
        assert_eq!(e.name, s.name);
        assert!(e.to_string().contains("at least 100ms"), "{e}");
    }
    let taken = Values::defaults().with(s, "100ms").duration(s);
    assert_eq!(taken, Ok(std::time::Duration::from_millis(100)));
}
