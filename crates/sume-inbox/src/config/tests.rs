//! Settings read as an operator writes them: each refusal names the setting that was set,
//! quotes the value as written and as read, and says the form; the declarations hold together.

use super::declared::{self, *};
use super::*;

/// The settings `serve` cannot start without, and `extra` on top.
pub(super) fn values(extra: &[(&'static Setting, &str)]) -> Values {
    let mut v = Values::defaults()
        .with(&DATABASE_URL, "postgres://u:pw@localhost/x")
        .with(&SUME_WEBHOOK_SECRET, "whsec_x");
    for (s, text) in extra {
        v = v.with(s, text);
    }
    v
}

/// What `extra` on top of those settings is refused with.
pub(super) fn refused(extra: &[(&'static Setting, &str)]) -> ConfigError {
    Config::read(&values(extra)).expect_err("refused")
}

#[test]
fn settings_that_cannot_work_are_refused_by_name() {
    assert!(Config::read(&values(&[])).is_ok());
    for (setting, text) in [
        (&ATTACH_SCAN_INTERVAL, "0s"),
        (&INGEST_TIMEOUT, "0s"),
        (&WEBHOOK_TOLERANCE, "500ms"),
        (&HEADER_TIMEOUT, "0s"),
        (&MAX_BODY_MEMORY, "5000MiB"),
        (&BODY_TIMEOUT, "slow"),
        (&IDLE_TIMEOUT, "1s"),
        (&INBOX_GRACE, "0s"),
        (&SWEEP_INTERVAL, "0s"),
        (&SHUTDOWN_TIMEOUT, "0s"),
        (&POLL_MAX_INTERVAL, "1m"),
        (&SUME_API_URL, "http://sume.example/api/v1"),
        (&MAX_CONNECTIONS, "0"),
        (&MAX_CONNECTIONS, "20"),
        (&DB_POOLER, "statement"),
        (&WAIT_WAKEUP, "notify"),
        (&MAX_WAIT, "forever"),
        (&RETENTION, "10m"),
        (&JOB_RETENTION, "1d"),
        (&DEAD_LETTER_RETENTION, "1d"),
        (&SUME_READ_RATE, "0"),
        (&MAX_ADMIN_CONNECTIONS, "1000"),
        (&ADMIN_APP_TOKEN, "an-application-token"),
    ] {
        assert_eq!(refused(&[(setting, text)]).name, setting.name, "{text}");
    }
    let e = refused(&[(&MAX_BODY_MEMORY, "512KiB")]);
    assert_eq!(e.name, "MAX_BODY_MEMORY", "{e}");
    assert!(
        e.to_string().contains("MAX_BODY_BYTES (1MiB, its default)"),
        "{e}"
    );
    for ok in [
        "http://127.0.0.1:8090/v1",
        "http://localhost:8090/v1",
        "http://[::1]:8090/v1",
    ] {
        assert!(
            Config::read(&values(&[(&SUME_API_URL, ok)])).is_ok(),
            "{ok}"
        );
    }
    let allowed = [
        (&SUME_API_URL, "http://sim:8090/v1"),
        (&SUME_API_ALLOW_PLAINTEXT, "1"),
    ];
    assert!(
        Config::read(&values(&allowed)).is_ok(),
        "allowed explicitly"
    );
}

/// `POLL_AFTER=2M` is two months: the rule it breaks names POLL_AFTER (set), not
/// POLL_MAX_INTERVAL (left to its default), and says how 2M was read.
#[test]
fn a_rule_between_two_settings_names_the_one_that_was_set() {
    let e = refused(&[(&POLL_AFTER, "2M")]);
    assert_eq!(e.name, "POLL_AFTER");
    let text = e.to_string();
    for part in [
        "POLL_AFTER=\"2M\" (read as ",
        "M is months, minutes are m",
        "POLL_MAX_INTERVAL (30m, its default)",
    ] {
        assert!(text.contains(part), "{part:?} missing from {text}");
    }
    let e = refused(&[(&POLL_MAX_INTERVAL, "1m")]);
    assert_eq!(e.name, "POLL_MAX_INTERVAL");
    assert!(
        e.to_string().contains("POLL_AFTER (2m, its default)"),
        "{e}"
    );
    let both = refused(&[(&POLL_MAX_INTERVAL, "1m"), (&POLL_AFTER, "5m")]);
    assert_eq!(both.name, "POLL_MAX_INTERVAL");
    assert!(both.to_string().contains("POLL_AFTER=\"5m\""), "{both}");
}

#[test]
fn a_lease_must_outlive_its_requests() {
    assert_eq!(refused(&[(&SUME_TIMEOUT, "60s")]).name, "SUME_TIMEOUT");
    assert_eq!(refused(&[(&SWEEP_LEASE, "20s")]).name, "SWEEP_LEASE");
    let mut config = Config::local("postgres://db/x", "s");
    config.sweep.request_timeout = std::time::Duration::from_secs(60);
    assert_eq!(config.validate().unwrap_err().name, "SWEEP_LEASE");
}

#[test]
fn refusals_say_the_form_that_works() {
    let e = refused(&[(&SUME_READ_RATE, "100/min")]);
    assert!(e.to_string().contains("100/1m"), "{e}");
    let e = refused(&[(&HEADER_TIMEOUT, "soon")]);
    assert!(e.to_string().contains("\"soon\""), "{e}");
    assert!(e.to_string().contains("250ms, 30s, 5m"), "{e}");
    let e = refused(&[(&MAX_IN_FLIGHT, "many")]);
    assert!(e.to_string().contains("whole number"), "{e}");
    let e = refused(&[(&DB_POOLER, "statement")]);
    assert!(e.to_string().contains("`transaction`"), "{e}");
    let missing = Config::read(&Values::defaults().with(&SUME_WEBHOOK_SECRET, "s")).unwrap_err();
    assert_eq!(missing.name, "DATABASE_URL");
    assert!(
        missing.to_string().contains("DATABASE_URL_FILE"),
        "{missing}"
    );
    assert!(missing.to_string().contains("postgres://"), "{missing}");
}

/// A value too large to mean anything is refused with what the most is, not started with: a
/// retention of 31,688 years made every retention pass fail ("timestamp out of range").
#[test]
fn values_past_what_a_setting_takes_say_the_most() {
    for setting in [
        &JOB_RETENTION,
        &DEAD_LETTER_RETENTION,
        &GIVE_UP_RECHECK,
        &IDLE_TIMEOUT,
    ] {
        let e = refused(&[(setting, "1000000000000s")]);
        assert_eq!(e.name, setting.name);
        assert!(e.to_string().contains("longer than 3650d"), "{e}");
    }
    for setting in [&JOB_RETENTION, &DEAD_LETTER_RETENTION, &GIVE_UP_RECHECK] {
        assert!(
            Config::read(&values(&[(setting, "3650d")])).is_ok(),
            "{}",
            setting.name
        );
    }
    let e = refused(&[(&MAX_CONNECTIONS, "99999999999999999999")]);
    assert!(
        e.to_string().contains("is too large: write a whole number"),
        "{e}"
    );
    let e = refused(&[(&MAX_CONNECTIONS, "12x")]);
    assert!(
        e.to_string().contains("\"12x\" is not a whole number"),
        "{e}"
    );
    let e = refused(&[(&MAX_BODY_BYTES, "99999999999999999999")]);
    assert!(
        e.to_string()
            .contains("is out of range: write a number of bytes"),
        "{e}"
    );
}

/// A database URL is read without the spaces and line ends around it, as every other setting
/// (a `_FILE`'s content keeps only the spaces before its last newline): before, they became
/// part of the database's name.
#[test]
fn spaces_around_a_database_url_are_not_part_of_it() {
    let v = Values::defaults()
        .with(&DATABASE_URL, "  postgres://u:pw@localhost/x  \t")
        .with(&MIGRATE_DATABASE_URL, " postgres://m:pw@localhost/x ")
        .with(&SUME_WEBHOOK_SECRET, "whsec_x");
    let config = Config::read(&v).unwrap();
    assert_eq!(config.database_url.expose(), "postgres://u:pw@localhost/x");
    let migrate = config.database.migrate_url.as_ref().unwrap();
    assert_eq!(migrate.expose(), "postgres://m:pw@localhost/x");
}

#[test]
fn secrets_are_never_quoted() {
    for (setting, text) in [
        (&DATABASE_URL, "postgres://u:db-password-xyz@h:notaport/db"),
        (&SUME_API_KEYS, "main"),
        (
            &SUME_API_KEYS,
            "main:sk_live_secret_key,main:sk_live_secret_key",
        ),
        (&ADMIN_TOKEN, "short-secret"),
        (&SUME_WEBHOOK_SECRET, "whsec_super_secret,,x"),
    ] {
        let e = refused(&[(setting, text)]).to_string();
        for secret in [
            "db-password-xyz",
            "sk_live_secret_key",
            "short-secret",
            "whsec_super",
        ] {
            assert!(!e.contains(secret), "{e}");
        }
    }
}

#[test]
fn every_count_has_a_ceiling_a_machine_can_hold() {
    // An unbounded count became a panic at start (a semaphore of 2^64 permits) or tens of GiB
    // of tasks (INGEST_WRITERS=100000000): every count stops at a number that can work.
    let counts = declared::all().filter_map(|s| match s.form {
        Form::Count { min, max } => Some((s, min, max)),
        _ => None,
    });
    let mut seen = 0;
    for (s, min, max) in counts {
        seen += 1;
        assert!(max <= i32::MAX as usize, "{} takes up to {max}", s.name);
        let read = |text: &str| Values::defaults().with(s, text).count(s);
        assert_eq!(read(&max.to_string()), Ok(max), "{}", s.name);
        assert_eq!(read(&min.to_string()), Ok(min), "{}", s.name);
        for past in [(max + 1).to_string(), usize::MAX.to_string()] {
            let e = read(&past).unwrap_err();
            assert_eq!(e.name, s.name);
            assert!(e.to_string().contains(&format!("to {max}")), "{e}");
        }
    }
    assert!(seen >= 10, "{seen} counts");
}

#[test]
fn the_two_listeners_cannot_share_a_port() {
    let e = refused(&[(&LISTEN_ADDR, "0.0.0.0:9090")]);
    assert_eq!(e.name, "LISTEN_ADDR");
    assert!(e.to_string().contains("take the same port"), "{e}");
    let e = refused(&[(&ADMIN_ADDR, "127.0.0.1:8080")]);
    assert_eq!(e.name, "ADMIN_ADDR");
    assert!(Config::read(&values(&[
        (&LISTEN_ADDR, "127.0.0.1:0"),
        (&ADMIN_ADDR, "127.0.0.1:0")
    ]))
    .is_ok());
}

#[test]
fn worker_threads_are_one_to_sixty_four() {
    let read = |text: &str| {
        Values::defaults()
            .with(&WORKER_THREADS, text)
            .count(&WORKER_THREADS)
    };
    assert_eq!(read("1"), Ok(1));
    assert_eq!(read(" 4 "), Ok(4));
    assert_eq!(read("64"), Ok(64));
    assert_eq!(Values::defaults().count(&WORKER_THREADS), Ok(1));
    for bad in ["0", "65", "-1", "two", "1.5", "99999999999999999999999"] {
        assert_eq!(read(bad).unwrap_err().name, "WORKER_THREADS", "{bad}");
    }
}

#[test]
fn every_declaration_is_whole_and_its_default_reads() {
    let mut names = std::collections::BTreeSet::new();
    for s in declared::all() {
        assert!(names.insert(s.name), "{} is declared twice", s.name);
        assert!(!s.about.is_empty(), "{} says nothing", s.name);
        assert!(
            !(s.required && s.default.is_some()),
            "{} is required and has a default",
            s.name
        );
    }
    // The serve scope reads every default it declares.
    let config = Config::read(&values(&[])).unwrap();
    assert_eq!(
        config.port.header_timeout,
        std::time::Duration::from_secs(5)
    );
    assert_eq!(config.max_admin_connections, config.wait.max_waiters + 100);
    assert_eq!(config.sweep.daily_reads, 9_000);
    assert_eq!(config.sume_api_url, sume_wire::DEFAULT_API_URL);
}

/// No flag changes its name: these are every command's flags as they were before the
/// declarations, plus the settings added since.
#[test]
fn the_flags_keep_their_names() {
    let flags: Vec<(&str, &str)> = declared::all()
        .filter_map(|s| s.flag.map(|f| (s.name, f)))
        .collect();
    for (name, flag) in &flags {
        let derived = name.to_ascii_lowercase().replace('_', "-");
        let known_exception = matches!(
            (*name, *flag),
            ("SUME_WEBHOOK_SECRET", "webhook-secret")
                | ("SUME_INBOX_ADMIN_URL", "admin-url")
                | ("SUME_INBOX_ADMIN_TOKEN", "admin-token")
        );
        assert!(*flag == derived || known_exception, "{name}: --{flag}");
    }
    let env_only: Vec<&str> = declared::all()
        .filter(|s| s.flag.is_none())
        .map(|s| s.name)
        .collect();
    assert_eq!(
        env_only,
        [
            "WORKER_THREADS",
            "RUST_LOG",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_SDK_DISABLED",
            "OTEL_TRACES_EXPORTER",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_COMPRESSION",
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_SERVICE_NAME",
            "OTEL_TRACES_SAMPLER",
            "OTEL_TRACES_SAMPLER_ARG",
            "OTEL_RESOURCE_ATTRIBUTES",
        ]
    );
}

/// A token of only spaces is no token: taken as unset it left a loopback admin API open, and
/// on another address the refusal said the token was missing. Only nothing is unset.
#[test]
fn a_blank_token_is_refused_not_taken_as_none() {
    for setting in [&ADMIN_TOKEN, &ADMIN_APP_TOKEN] {
        let e = refused(&[(setting, &" ".repeat(20))]);
        assert_eq!(e.name, setting.name, "{e}");
        assert!(e.to_string().contains("is blank"), "{e}");
    }
    let e = refused(&[(&ADMIN_ADDR, "0.0.0.0:9090"), (&ADMIN_TOKEN, "\t  ")]);
    assert!(e.to_string().contains("ADMIN_TOKEN: is blank"), "{e}");
    let config = Config::read(&values(&[(&ADMIN_TOKEN, "")])).unwrap();
    assert!(config.admin_token.is_none(), "nothing is unset");
}

/// A token travels in an HTTP header: one with a character outside printable ASCII could never
/// be sent as written, so it is refused at start, saying which characters are allowed. A space
/// inside is sent as written (and always worked).
#[test]
fn a_token_is_printable_ascii() {
    for setting in [&ADMIN_TOKEN, &ADMIN_APP_TOKEN] {
        for bad in [
            "tök0123456789abcdef0123456789",
            "token\twith a tab 0123456789",
        ] {
            let mut extra = vec![(setting, bad)];
            if setting.name == ADMIN_APP_TOKEN.name {
                extra.push((&ADMIN_TOKEN, "the-operators-token-0123"));
            }
            let e = refused(&extra);
            assert_eq!(e.name, setting.name, "{e}");
            assert!(e.to_string().contains("0x20 to 0x7e"), "{e}");
            assert!(!e.to_string().contains(bad), "a token is never quoted: {e}");
        }
    }
    let ok = values(&[(&ADMIN_TOKEN, "  a~Z!0123456789{}|  ")]);
    let token = Config::read(&ok).unwrap().admin_token.unwrap();
    assert_eq!(token.expose(), "a~Z!0123456789{}|");
    let spaced = values(&[(&ADMIN_TOKEN, "correct horse battery staple")]);
    let token = Config::read(&spaced).unwrap().admin_token.unwrap();
    assert_eq!(token.expose(), "correct horse battery staple");
}

/// MAX_BODY_MEMORY's lower bound is MAX_BODY_BYTES (a rule between the two), so a value too
/// large says the most it takes, not a bound of 1 byte.
#[test]
fn a_size_too_large_says_the_most_not_a_lower_bound() {
    let e = refused(&[(&MAX_BODY_MEMORY, "4GiB")]).to_string();
    assert!(
        e.starts_with("MAX_BODY_MEMORY: \"4GiB\" is more than it takes"),
        "{e}"
    );
    assert!(!e.contains("from 1 bytes"), "{e}");
}
