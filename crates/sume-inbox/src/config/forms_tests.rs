//! The readers of one value: what each accepts and refuses.

use super::*;

#[test]
fn switches() {
    assert_eq!(parse_bool("X", "1"), Ok(true));
    assert_eq!(parse_bool("X", " TRUE "), Ok(true));
    assert_eq!(parse_bool("X", "off"), Ok(false));
    assert_eq!(parse_bool("X", ""), Ok(false));
    assert!(parse_bool("X", "maybe").is_err());
}

#[test]
fn api_urls() {
    let ok = |raw: &str| parse_http_url("SUME_API_URL", "https://www.sume.so/api/v1", raw);
    assert_eq!(
        ok("https://www.sume.so/api/v1/").as_deref(),
        Ok("https://www.sume.so/api/v1")
    );
    assert_eq!(
        ok(" http://127.0.0.1:8090/v1 ").as_deref(),
        Ok("http://127.0.0.1:8090/v1")
    );
    for bad in [
        "",
        "www.sume.so/api/v1",
        "ftp://sume.so/v1",
        "https://",
        "https://sume.so/v1?x=1",
        "https://sume.so/v1#x",
        "https://user:pw@sume.so/v1",
    ] {
        let e = ok(bad).unwrap_err();
        assert_eq!(e.name, "SUME_API_URL", "{bad}");
    }
}

/// A URL refused for its credentials (or anything else) is quoted with its password hidden,
/// and the refusal says where such credentials go for that setting.
#[test]
fn a_refused_url_never_shows_its_password() {
    let refused = |name, raw: &str| parse_http_url(name, "https://x.example/v1", raw).unwrap_err();
    let e = refused("SUME_API_URL", "https://u:hunter2@api.example/v1").to_string();
    assert!(e.contains(r#""https://u:***@api.example/v1""#), "{e}");
    assert!(e.contains("SUME_API_KEYS"), "{e}");
    for (name, raw, goes_in) in [
        (
            "SUME_INBOX_ADMIN_URL",
            "http://u:hunter2@127.0.0.1:9090",
            "SUME_INBOX_ADMIN_TOKEN",
        ),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://u:hunter2@collector:4318",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://hunter2@collector:4318",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ),
        ("SUME_API_URL", "https://u:hun/ter2@api.example/v1", ""),
        (
            "SUME_API_URL",
            "https://u:hunter2@api.example/v1?x=1",
            "no query",
        ),
        ("SUME_API_URL", "u:hunter2@api.example/v1", ""),
    ] {
        let e = refused(name, raw).to_string();
        assert!(!e.contains("hunter2") && !e.contains("ter2"), "{e}");
        assert!(e.contains(goes_in), "{e}");
    }
    let e = refused("OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:p@collector:4318").to_string();
    assert!(
        !e.contains("SUME_API_KEYS") && !e.contains("ADMIN_TOKEN"),
        "{e}"
    );
    // An `@` in the path hides more than needed, never less.
    assert_eq!(
        without_secrets("http://collector:4318/a@b"),
        "http://collector:***@b"
    );
    assert_eq!(
        without_secrets("http://collector:4318"),
        "http://collector:4318"
    );
}

/// A token is as often put in a URL's query (or fragment) as in its credentials: a refused
/// URL is quoted with both hidden, whichever URL setting it is (a PostgreSQL URL's refusal
/// never quotes it).
#[test]
fn a_refused_url_never_shows_its_query_or_fragment() {
    let refused = |name, raw: &str| parse_http_url(name, "https://x.example/v1", raw).unwrap_err();
    for name in [
        "SUME_API_URL",
        "SUME_INBOX_ADMIN_URL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ] {
        for (raw, shown) in [
            (
                "http://127.0.0.1:21270?token=SECRETQ",
                "http://127.0.0.1:21270?***",
            ),
            ("http://c:4318/v1#SECRETQ", "http://c:4318/v1#***"),
            ("http://c:4318/v1?a=1#SECRETQ", "http://c:4318/v1?***"),
            ("http://u:pw@c/v1?token=SECRETQ", "http://u:***@c/v1?***"),
            ("http://c/v1?mail=a@b&token=SECRETQ", "http://***@?***"),
            ("c:4318?token=SECRETQ", "c:4318?***"),
        ] {
            let e = refused(name, raw).to_string();
            assert!(!e.contains("SECRETQ") && !e.contains("pw"), "{e}");
            assert!(e.contains(&format!("{shown:?}")), "{raw}: {e}");
            assert!(e.starts_with(name), "{e}");
        }
    }
    // A PostgreSQL URL's refusal quotes none of it: at most the one parameter refused.
    for query in [
        "application_name=SECRETQ&connect_timeout=abc",
        "sslmode=bogus&password=SECRETQ",
        "options=SECRETQ&target_session_attrs=bogus",
    ] {
        let url = format!("postgres://u:pw@h/db?{query}#SECRETQ");
        let e = check_database_url("DATABASE_URL", &url).unwrap_err();
        assert!(!e.to_string().contains("SECRETQ"), "{e}");
    }
}

#[test]
fn durations() {
    assert_eq!(parse_duration("X", "250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("X", "30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_duration("X", "5m"), Ok(Duration::from_secs(300)));
    assert_eq!(
        parse_duration("X", "14d"),
        Ok(Duration::from_secs(14 * 86400))
    );
    let err = parse_duration("WEBHOOK_TOLERANCE", "5 minutes please").unwrap_err();
    assert_eq!(err.name, "WEBHOOK_TOLERANCE");
    assert!(err.to_string().starts_with("WEBHOOK_TOLERANCE: "));
    assert!(parse_duration("X", "").is_err());
}

/// `HEADER_TIMEOUT=-5s` (or `--header-timeout -5s`) was refused as `"-5s" is not a duration
/// (expected number at 0)`; it is said to be negative.
#[test]
fn a_negative_duration_is_said_negative() {
    for raw in ["-5s", " -1m30s", "- 2h"] {
        let e = parse_duration("HEADER_TIMEOUT", raw)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is negative: write"), "{raw}: {e}");
        assert!(!e.contains("expected number"), "{raw}: {e}");
    }
    let e = parse_duration("HEADER_TIMEOUT", "-x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a duration"), "{e}");
}

#[test]
fn sizes() {
    assert_eq!(parse_bytes("M", "1048576"), Ok(1 << 20));
    assert_eq!(parse_bytes("M", "1MiB"), Ok(1 << 20));
    assert_eq!(parse_bytes("M", "64KiB"), Ok(64 << 10));
    assert_eq!(parse_bytes("M", "2MB"), Ok(2_000_000));
    assert!(parse_bytes("M", "0").is_err());
    assert!(parse_bytes("M", "lots").is_err());
    assert_eq!(parse_bytes("M", "1GiB"), Ok(1 << 30));
    assert_eq!(parse_bytes("M", "2GB"), Ok(2_000_000_000));
    assert!(parse_bytes("M", "1TiB").is_err());
}

#[test]
fn rates() {
    let r = parse_rate("SUME_READ_RATE", "100").unwrap();
    assert_eq!((r.count, r.per), (100, Duration::from_secs(60)));
    let r = parse_rate("SUME_READ_RATE", "20/10s").unwrap();
    assert_eq!((r.count, r.per), (20, Duration::from_secs(10)));
    assert!((r.per_second() - 2.0).abs() < 1e-9);
    for bad in ["0", "fast", "10/0s", "-1"] {
        assert_eq!(
            parse_rate("SUME_READ_RATE", bad).unwrap_err().name,
            "SUME_READ_RATE"
        );
    }
}

#[test]
fn urls_and_addresses() {
    assert_eq!(
        parse_http_url(
            "U",
            "https://www.sume.so/api/v1",
            "https://www.sume.so/api/v1/"
        )
        .unwrap(),
        "https://www.sume.so/api/v1"
    );
    assert!(parse_http_url("U", "https://www.sume.so/api/v1", "www.sume.so").is_err());
    assert!(parse_addr("A", "0.0.0.0:8080").is_ok());
    assert!(parse_addr("A", "localhost").is_err());
    assert!(check_database_url("DATABASE_URL", "postgres://u:p@127.0.0.1:5432/db").is_ok());
    assert!(check_database_url("DATABASE_URL", "postgres://u:p@127.0.0.1:notaport/db").is_err());
}

/// A rate's window is a duration like any other: at most ten years, and read back with the
/// months hint where `M` (a month) was written.
#[test]
fn a_rate_window_takes_what_a_duration_takes() {
    for bad in ["100/99999y", "100/3651d", "100/1000000M"] {
        let e = parse_rate("SUME_READ_RATE", bad).unwrap_err().to_string();
        assert!(e.contains("longer than 3650d"), "{e}");
        assert!(e.starts_with("SUME_READ_RATE: "), "{e}");
    }
    let e = parse_rate("SUME_READ_RATE", "100/1000000M").unwrap_err();
    assert!(e.to_string().contains("M is months"), "{e}");
    assert!(parse_rate("SUME_READ_RATE", "100/3650d").is_ok());
    let month = month_window("100/1M").expect("a month's window is said");
    assert!(month.contains("M is months, minutes are m"), "{month}");
    assert_eq!(month_window("100/1m"), None);
    assert_eq!(month_window("100"), None);
}

/// A URL the parser refuses names the setting it came from and, where the parser says which,
/// the parameter and its value.
#[test]
fn an_unreadable_database_url_names_its_setting_and_parameter() {
    let e = check_database_url("MIGRATE_DATABASE_URL", "mysql://x").unwrap_err();
    assert_eq!(e.name, "MIGRATE_DATABASE_URL");
    assert!(!e.to_string().contains("bad DATABASE_URL"), "{e}");
    assert!(e.to_string().contains("\"mysql\", not postgres"), "{e}");
    for (query, says) in [
        ("connect_timeout=abc", "connect_timeout=\"abc\""),
        (
            "target_session_attrs=bogus",
            "target_session_attrs=\"bogus\"",
        ),
        ("foo=bar", "foo"),
    ] {
        let url = format!("postgres://u:pw-never-shown@h/db?{query}");
        let e = check_database_url("DATABASE_URL", &url)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{e}");
        assert!(!e.contains("pw-never-shown"), "{e}");
    }
}

/// A URL whose password holds an unencoded `@` (or `/`) is refused, naming the setting and
/// saying to percent-encode, and quoting no part of it; a password whose `?` hides a
/// would-be parameter is read as libpq reads it, the parameter never quoted.
#[test]
fn a_database_url_that_cannot_be_read_unambiguously_is_refused_without_its_password() {
    for (name, url) in [
        (
            "DATABASE_URL",
            "postgres://postgres:p@ssS3cret@127.0.0.1:25432/nodb",
        ),
        ("MIGRATE_DATABASE_URL", "postgres://u:pa/ssS3cret@h/db"),
    ] {
        let e = check_database_url(name, url).unwrap_err();
        assert_eq!(e.name, name);
        let e = e.to_string();
        assert!(e.contains("percent-encode") && e.contains("%40"), "{e}");
        assert!(!e.contains("S3cret") && !e.contains("127.0.0.1"), "{e}");
    }
    let e = check_database_url(
        "DATABASE_URL",
        "postgres://postgres:x?port=LEAKME@127.0.0.1:99999/postgres",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`port`: hosts \"127.0.0.1:99999\""), "{e}");
    assert!(!e.contains("LEAKME"), "{e}");
    assert!(check_database_url("DATABASE_URL", "postgres://u:pa?SECRET2@h/db").is_ok());
}

#[test]
fn a_single_key_beside_the_list_or_in_its_form_is_doubted_and_still_read_as_documented() {
    use crate::config::declared::{SUME_API_KEY, SUME_API_KEYS};
    use crate::config::{api_key_doubts, read::api_keys, Values};
    let single = |text: &str| Values::defaults().with(&SUME_API_KEY, text);
    assert!(api_key_doubts(&single("sk_live_abc")).is_empty());
    assert!(api_key_doubts(&Values::defaults()).is_empty());
    let named = single("main:sk_live_abc");
    let doubts = api_key_doubts(&named);
    assert!(doubts[0].contains("SUME_API_KEYS=name:key"), "{doubts:?}");
    let keys = api_keys(&named).unwrap();
    assert_eq!((keys[0].name.as_str(), keys.len()), ("default", 1));
    let both = single("sk_one").with(&SUME_API_KEYS, "main:sk_two");
    let doubts = api_key_doubts(&both);
    assert!(doubts[0].contains("SUME_API_KEY is ignored"), "{doubts:?}");
    assert_eq!(api_keys(&both).unwrap()[0].name, "main");
}

#[test]
fn a_duration_written_in_months_is_doubted_wherever_it_is() {
    use crate::config::declared::{POLL_AFTER, SWEEP_INTERVAL};
    use crate::config::{month_doubts, Values};
    let v = Values::defaults().with(&SWEEP_INTERVAL, "1M");
    let doubts = month_doubts(&v);
    assert_eq!(doubts.len(), 1, "{doubts:?}");
    assert!(
        doubts[0].starts_with("SWEEP_INTERVAL: \"1M\" (read as ")
            && doubts[0].contains("M is months"),
        "{doubts:?}"
    );
    assert!(month_doubts(&Values::defaults().with(&POLL_AFTER, "2m")).is_empty());
    assert!(month_doubts(&Values::defaults()).is_empty());
}

#[test]
fn admin_hosts_are_names_a_host_header_can_hold() {
    use crate::config::declared::ADMIN_HOSTS;
    use crate::config::Values;
    let read = |text: &str| {
        Values::defaults()
            .with(&ADMIN_HOSTS, text)
            .names(&ADMIN_HOSTS)
    };
    assert_eq!(
        read(" Admin.Internal:9090, [::1]:9090,inbox_1 ").unwrap(),
        ["admin.internal:9090", "[::1]:9090", "inbox_1"]
    );
    for bad in ["a b", "http://x", "x/admin", "x\ty"] {
        let e = read(bad).unwrap_err().to_string();
        assert!(
            e.starts_with("ADMIN_HOSTS: ") && e.contains("is no host name"),
            "{e}"
        );
    }
}

/// `SUME_READ_RATE=4294967296` is a count too large, said so. Before: "is not a rate".
#[test]
fn a_rate_past_the_largest_count_is_too_large_not_unreadable() {
    for raw in ["4294967296", "99999999999999/1m"] {
        let e = parse_rate("SUME_READ_RATE", raw).unwrap_err().to_string();
        assert!(e.contains("is too large"), "{e}");
        assert!(!e.contains("is not a rate"), "{e}");
    }
}

/// `sslmode=allow` was taken (as `prefer`) while the refusal of any other mode said the modes
/// were "disable, prefer, require, verify-ca, verify-full": the refusal now names it too, and
/// what it is read as.
#[test]
fn sslmode_allow_is_taken_and_named_among_the_modes() {
    assert!(check_database_url("DATABASE_URL", "postgres://u:pw@h/db?sslmode=allow").is_ok());
    let e = check_database_url("DATABASE_URL", "postgres://u:pw@h/db?sslmode=sometimes")
        .unwrap_err()
        .to_string();
    assert!(e.contains("sslmode=sometimes is not one of disable, allow (read as prefer), prefer, require, verify-ca, verify-full"), "{e}");
}
