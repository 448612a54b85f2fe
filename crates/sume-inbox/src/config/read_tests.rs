//! Rules between settings and warnings at start, as an operator meets them.

use super::*;
use crate::config::tests::{refused, values};

/// `WEBHOOK_TOLERANCE=30d RETENTION=1h` started: a delivery replayed a day later passed the
/// signature's check and found no event left to be a duplicate of.
#[test]
fn a_tolerance_not_shorter_than_the_retention_is_refused() {
    let e = refused(&[(&WEBHOOK_TOLERANCE, "30d"), (&RETENTION, "1h")]);
    assert_eq!(e.name, "WEBHOOK_TOLERANCE");
    let text = e.to_string();
    assert!(
        text.contains("WEBHOOK_TOLERANCE=\"30d\"") && text.contains("RETENTION=\"1h\""),
        "{text}"
    );
    let e = refused(&[(&WEBHOOK_TOLERANCE, "14d")]);
    assert!(
        e.to_string().contains("RETENTION (14days, its default)"),
        "{e}"
    );
    assert_eq!(
        refused(&[(&RETENTION, "1h"), (&WEBHOOK_TOLERANCE, "1h")]).name,
        "WEBHOOK_TOLERANCE"
    );
    let e = Config::read(&values(&[(&RETENTION, "1h")])).err();
    assert_eq!(e, None, "the default tolerance (5m) is shorter than 1h");
    let e = Config::read(&values(&[(&WEBHOOK_TOLERANCE, "6h"), (&RETENTION, "1d")])).err();
    assert_eq!(e, None);
}

/// `MAX_CONNECTIONS=20` started with MAX_IN_FLIGHT left at 1,024: a request in flight holds a
/// connection, so that limit was never reached, and forged uploads holding every connection
/// kept genuine deliveries out. Refused by the setting that was set, saying what works.
#[test]
fn max_in_flight_not_below_max_connections_is_refused() {
    let e = refused(&[(&MAX_CONNECTIONS, "20")]);
    assert_eq!(e.name, "MAX_CONNECTIONS");
    let text = e.to_string();
    for part in [
        "MAX_CONNECTIONS=\"20\" is not more than MAX_IN_FLIGHT (1024, its default)",
        "set MAX_IN_FLIGHT to 19 or less, or raise MAX_CONNECTIONS",
    ] {
        assert!(text.contains(part), "{part:?} missing from {text}");
    }
    let e = refused(&[(&MAX_IN_FLIGHT, "10000")]);
    assert_eq!(e.name, "MAX_IN_FLIGHT");
    assert!(
        e.to_string()
            .contains("MAX_CONNECTIONS (10000, its default) is not more than"),
        "{e}"
    );
    let e = refused(&[(&MAX_CONNECTIONS, "1"), (&MAX_IN_FLIGHT, "1")]);
    assert!(e.to_string().contains("raise MAX_CONNECTIONS above"), "{e}");
    let fits = [(&MAX_CONNECTIONS, "20"), (&MAX_IN_FLIGHT, "19")];
    assert_eq!(Config::read(&values(&fits)).err(), None);
}

/// `SUME_READ_RATE=200`, `100/1ms` and `SUME_READ_DAILY=20000` started without a word, though
/// Sume documents 120 reads a minute and 10,000 a day per key.
#[test]
fn reads_above_sumes_documented_limits_are_warned_of() {
    assert!(rate_doubts(&Values::defaults()).is_empty());
    assert!(rate_doubts(&values(&[(&SUME_READ_RATE, "100/1m")])).is_empty());
    assert!(rate_doubts(&values(&[(&SUME_READ_DAILY, "10000")])).is_empty());
    for rate in ["200", "100/1ms", "2000/1h"] {
        let doubts = rate_doubts(&values(&[(&SUME_READ_RATE, rate)]));
        assert_eq!(doubts.len(), 1, "{rate}: {doubts:?}");
        assert!(
            doubts[0].starts_with("SUME_READ_RATE=")
                && doubts[0].contains("documented 120 a minute"),
            "{doubts:?}"
        );
    }
    let doubts = rate_doubts(&values(&[(&SUME_READ_DAILY, "20000")]));
    assert_eq!(doubts.len(), 1, "{doubts:?}");
    assert!(
        doubts[0].starts_with("SUME_READ_DAILY=\"20000\"") && doubts[0].contains("10000"),
        "{doubts:?}"
    );
    // A warning, not a refusal: a workspace's limit may have been raised.
    assert!(Config::read(&values(&[
        (&SUME_READ_RATE, "200"),
        (&SUME_READ_DAILY, "20000")
    ]))
    .is_ok());
}

/// `DB_POOL_SIZE=0 MAX_WAIT=0 LIST_WALKS=on` and no DATABASE_URL nor SUME_WEBHOOK_SECRET: every
/// problem is reported at once, each naming its setting, in the order they are declared.
/// Before, only the first was, the next met at the next start.
#[test]
fn every_setting_refused_is_reported_at_once() {
    let v = Values::defaults()
        .with(&DB_POOL_SIZE, "0")
        .with(&MAX_WAIT, "0")
        .with(&LIST_WALKS, "on");
    let e = Config::read(&v).unwrap_err();
    let names: Vec<&str> = e.each().iter().map(|e| e.name).collect();
    for name in [
        "DATABASE_URL",
        "DB_POOL_SIZE",
        "SUME_WEBHOOK_SECRET",
        "MAX_WAIT",
        "LIST_WALKS",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    assert_eq!(names.len(), 5, "{names:?}");
    assert_eq!(e.to_string().lines().count(), 5, "{e}");
    assert!(e
        .to_string()
        .lines()
        .all(|l| names.iter().any(|n| l.starts_with(n))));
    let nothing = Config::read(&Values::defaults()).unwrap_err();
    assert_eq!(
        nothing.to_string().lines().collect::<Vec<_>>(),
        [
            Values::defaults()
                .postgres_url(&DATABASE_URL)
                .unwrap_err()
                .to_string(),
            Values::defaults()
                .secrets(&SUME_WEBHOOK_SECRET)
                .unwrap_err()
                .to_string(),
        ]
    );
}

/// A single problem is reported alone, as before.
#[test]
fn one_setting_refused_is_reported_alone() {
    let e = refused(&[(&DB_POOL_SIZE, "0")]);
    assert!(e.also.is_empty(), "{e}");
}
