//! The binary's start-up checks: a missing or malformed setting fails with a message naming
//! it, and no secret is ever printed.

use std::process::Command;

fn serve(env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sume-inbox"));
    cmd.arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run sume-inbox");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

const BASE: &[(&str, &str)] = &[
    (
        "DATABASE_URL",
        "postgres://u:db-password-xyz@127.0.0.1:1/db",
    ),
    ("SUME_WEBHOOK_SECRET", "whsec_super_secret_value"),
    ("SUME_API_KEYS", "main:sk_live_secret_key"),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut env: Vec<_> = BASE
        .iter()
        .copied()
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k))
        .collect();
    env.extend(extra.iter().copied().filter(|(_, v)| !v.is_empty()));
    env
}

#[test]
fn bad_settings_fail_at_start_naming_the_setting() {
    for (extra, name) in bad_settings() {
        assert_refused_naming(&extra, name);
    }
    let (ok, text) = serve(&[("SUME_WEBHOOK_SECRET", "x")]);
    assert!(!ok && text.contains("DATABASE_URL"), "{text}");
    // A bad setting exits 78 (EX_CONFIG), so a supervisor can stop restarting it.
    let out = serve_with_only(&with(&[("WEBHOOK_TOLERANCE", "soon")]));
    assert_eq!(out.status.code(), Some(78));
    // WORKER_THREADS is read before the runtime starts, with the same exit and a named error.
    for bad in ["0", "65", "many"] {
        let out = serve_with_only(&with(&[("WORKER_THREADS", bad)]));
        assert_eq!(out.status.code(), Some(78), "WORKER_THREADS={bad}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("WORKER_THREADS"), "{text}");
    }
}

/// Settings (beside [`BASE`]; an empty value unsets it) that `serve` refuses, each with the
/// setting its message must name.
fn bad_settings() -> Vec<(Vec<(&'static str, &'static str)>, &'static str)> {
    vec![
        (vec![("SUME_WEBHOOK_SECRET", "")], "SUME_WEBHOOK_SECRET"),
        (
            vec![("WEBHOOK_TOLERANCE", "five minutes")],
            "WEBHOOK_TOLERANCE",
        ),
        (vec![("MAX_BODY_BYTES", "huge")], "MAX_BODY_BYTES"),
        (vec![("LISTEN_ADDR", "localhost")], "LISTEN_ADDR"),
        (vec![("SUME_API_KEYS", "main")], "SUME_API_KEYS"),
        (vec![("SUME_API_URL", "www.sume.so")], "SUME_API_URL"),
        (
            vec![("DATABASE_URL", "postgres://u@h:notaport/db")],
            "DATABASE_URL",
        ),
        (vec![("ADMIN_ADDR", "0.0.0.0:9090")], "ADMIN_TOKEN"),
        (vec![("LOG_FORMAT", "xml")], "LOG_FORMAT"),
        (vec![("HEADER_TIMEOUT", "0s")], "HEADER_TIMEOUT"),
        (vec![("BODY_TIMEOUT", "slow")], "BODY_TIMEOUT"),
        (vec![("IDLE_TIMEOUT", "2s")], "IDLE_TIMEOUT"),
        (vec![("MAX_CONNECTIONS", "0")], "MAX_CONNECTIONS"),
        (
            vec![("MAX_CONNECTIONS", "20")],
            "MAX_IN_FLIGHT (1024, its default)",
        ),
        (vec![("MAX_IN_FLIGHT", "many")], "MAX_IN_FLIGHT"),
        (vec![("DB_POOLER", "statement")], "DB_POOLER"),
        (
            vec![
                ("DB_POOLER", "transaction"),
                (
                    "LISTEN_DATABASE_URL",
                    "postgres://u:db-password-xyz@127.0.0.1:1/db",
                ),
            ],
            "LISTEN_DATABASE_URL",
        ),
        (
            vec![
                ("DB_POOLER", "transaction"),
                (
                    "MIGRATE_DATABASE_URL",
                    "postgres://u:db-password-xyz@127.0.0.1:1/db",
                ),
            ],
            "MIGRATE_DATABASE_URL",
        ),
        (vec![("JOB_RETENTION", "1d")], "JOB_RETENTION"),
        (vec![("JOB_RETENTION", "a while")], "JOB_RETENTION"),
        (
            vec![("ADMIN_APP_TOKEN", "an-application-token")],
            "ADMIN_APP_TOKEN",
        ),
        (
            vec![
                ("ADMIN_TOKEN", "the-same-token-twice"),
                ("ADMIN_APP_TOKEN", "the-same-token-twice"),
            ],
            "ADMIN_APP_TOKEN",
        ),
        (vec![("ADMIN_APP_TOKEN", "short")], "ADMIN_APP_TOKEN"),
        (vec![("WAIT_WAKEUP", "notify")], "WAIT_WAKEUP"),
        (vec![("MAX_WAIT", "forever")], "MAX_WAIT"),
    ]
}

/// `serve` fails with `extra` beside [`BASE`], naming `name` and printing no secret.
fn assert_refused_naming(extra: &[(&'static str, &'static str)], name: &str) {
    let (ok, text) = serve(&with(extra));
    assert!(!ok, "{extra:?} should fail");
    assert!(
        text.contains(name),
        "{extra:?}: message should name {name}: {text}"
    );
    for secret in [
        "db-password-xyz",
        "whsec_super_secret_value",
        "sk_live_secret_key",
    ] {
        assert!(!text.contains(secret), "{extra:?} printed a secret: {text}");
    }
}

/// `serve` with nothing in its environment but `env` (not even PATH).
fn serve_with_only(env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sume-inbox"));
    cmd.arg("serve").env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn the_config_never_prints_its_secrets() {
    /// `serve`'s flags alone, as the binary parses them (every value given as a flag, so no
    /// variable of the test's environment takes part).
    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: sume_inbox::cli::ServeArgs,
    }
    let cfg = <Serve as clap::Parser>::try_parse_from([
        "serve",
        "--database-url=postgres://u:db-password-xyz@127.0.0.1/db",
        "--webhook-secret=whsec_super_secret_value",
        "--sume-api-keys=main:sk_live_secret_key",
        "--listen-addr=127.0.0.1:0",
        "--admin-addr=127.0.0.1:0",
        "--admin-token=admin-token-0123456789",
    ])
    .unwrap()
    .args
    .into_config()
    .unwrap();
    let printed = format!("{cfg:?}");
    for secret in [
        "db-password-xyz",
        "whsec_super_secret_value",
        "sk_live_secret_key",
        "admin-token-0123456789",
    ] {
        assert!(!printed.contains(secret), "{printed}");
    }
    assert!(printed.contains("main"), "key names are not secret");
}

#[test]
fn secrets_can_come_from_files() {
    let dir = std::env::temp_dir().join(format!("sume-secret-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hook");
    std::fs::write(&file, "whsec_from_file_but_secret\n").unwrap();
    // The file is read before the settings: a setting read later names its own variable.
    let (ok, text) = serve(&[
        ("DATABASE_URL", "postgres://u@h:notaport/db"),
        ("SUME_WEBHOOK_SECRET_FILE", file.to_str().unwrap()),
    ]);
    assert!(!ok && text.contains("DATABASE_URL"), "{text}");
    assert!(!text.contains("SUME_WEBHOOK_SECRET"), "{text}");
    let (ok, text) = serve(&[
        ("DATABASE_URL", "postgres://u@127.0.0.1:1/db"),
        ("SUME_WEBHOOK_SECRET_FILE", file.to_str().unwrap()),
        ("SUME_WEBHOOK_SECRET", "x"),
    ]);
    assert!(
        !ok && text.contains("SUME_WEBHOOK_SECRET_FILE are both set"),
        "{text}"
    );
    let (ok, text) = serve(&[
        ("DATABASE_URL", "postgres://u@127.0.0.1:1/db"),
        ("SUME_WEBHOOK_SECRET_FILE", "/nonexistent/hook"),
    ]);
    assert!(
        !ok && text.contains("SUME_WEBHOOK_SECRET_FILE: cannot read"),
        "{text}"
    );
    let (ok, text) = serve(&[
        ("DATABASE_URL_FILE", "/nonexistent/db"),
        ("SUME_WEBHOOK_SECRET_FILE", file.to_str().unwrap()),
    ]);
    assert!(!ok && text.contains("DATABASE_URL_FILE"), "{text}");
    assert!(!text.contains("whsec_from_file_but_secret"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_daemon_binary_has_no_development_tools() {
    // The simulator, the demo and `sign` are `sume-dev`'s: the shipped binary lists none.
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("serve"), "{text}");
    for tool in ["sim", "demo", "sign"] {
        assert!(
            !text
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{tool} "))),
            "{tool} listed in: {text}"
        );
    }
}

/// A database that refuses who the daemon is or what it asks for stops the start at once,
/// exit 78, naming the setting and the target tried, never the password.
#[tokio::test]
async fn a_database_that_refuses_us_stops_the_start_at_once_naming_the_target() {
    let db = sume_testkit::TestDb::new().await;
    let url = url::Url::parse(&db.url).unwrap();
    let with = |user: &str, password: &str, dbname: &str| {
        let mut u = url.clone();
        u.set_username(user).unwrap();
        u.set_password(Some(password)).unwrap();
        u.set_path(dbname);
        u.to_string()
    };
    for (target, expected) in [
        (
            with("postgres", "pw-never-shown", "no_such_database"),
            "3D000",
        ),
        (with("no_such_role", "pw-never-shown", "postgres"), "28000"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
            .arg("serve")
            .env_clear()
            .env("DATABASE_URL", &target)
            .env("SUME_WEBHOOK_SECRET", "whsec_x")
            .env("LISTEN_ADDR", "127.0.0.1:0")
            .env("ADMIN_ADDR", "127.0.0.1:0")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{text}");
        assert!(text.contains("DATABASE_URL (postgres://"), "{text}");
        assert!(
            text.contains(expected) && text.contains("retrying cannot fix this"),
            "{text}"
        );
        assert!(!text.contains("pw-never-shown"), "{text}");
        // Refused at once: not retried as a server that is not up yet would be.
        assert!(!text.contains("not reachable yet"), "{text}");
    }
}

/// A new user's first run: with nothing set, `serve` says what to set (and the `_FILE` form)
/// and exits 78, not a usage error; `--help` shows every setting's `_FILE` and no required flag.
#[test]
fn a_first_run_with_nothing_set_says_what_to_set() {
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .arg("serve")
        .env_clear()
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains("DATABASE_URL") && text.contains("DATABASE_URL_FILE"),
        "{text}"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(["serve", "--help"])
        .env_clear()
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Usage: sume-inbox serve [OPTIONS]\n"),
        "{help}"
    );
    for file in [
        "DATABASE_URL_FILE",
        "SUME_WEBHOOK_SECRET_FILE",
        "ADMIN_TOKEN_FILE",
    ] {
        assert!(help.contains(file), "{file} missing from --help");
    }
    // The settings with no flag are listed too, with their defaults.
    let env_only = help
        .split("Environment only (no flag):")
        .nth(1)
        .unwrap_or("");
    for setting in [
        "WORKER_THREADS [default: 1]",
        "RUST_LOG [default: info]",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_TRACES_SAMPLER",
    ] {
        assert!(env_only.contains(setting), "{setting} missing from --help");
    }
    // With LOG_FORMAT=json the refusal is a JSON line too, as a log shipper reads the rest.
    let (ok, text) = serve(&with(&[("LOG_FORMAT", "json"), ("DB_POOL_SIZE", "0")]));
    let line: serde_json::Value = serde_json::from_str(text.trim()).expect(&text);
    assert!(
        !ok && line["level"] == "ERROR" && line["exit_code"] == 78,
        "{text}"
    );
    assert!(
        line["message"].as_str().unwrap().contains("DB_POOL_SIZE"),
        "{text}"
    );
    // A log filter that does not parse once fell back to the default without a word.
    let (ok, text) = serve(&with(&[("RUST_LOG", "bogus===")]));
    assert!(
        !ok && text.contains("RUST_LOG: \"bogus===\" is not a filter"),
        "{text}"
    );
    // A level misspelled is a module's name to the filter, and silenced every line.
    let (ok, text) = serve(&with(&[("RUST_LOG", "inof")]));
    assert!(!ok && text.contains("did you mean info?"), "{text}");
    let (ok, text) = serve(&with(&[("POLL_AFTER", "2M")]));
    assert!(!ok);
    assert!(
        text.contains("POLL_AFTER: ") && text.contains("M is months"),
        "{text}"
    );
}

/// Tokens as the binary reads them from its environment: one of only spaces is refused, not
/// taken as none (which left a loopback admin API open), and so is one that is not printable ASCII
/// (it could never be sent in an HTTP header); both exit 78 at once, naming the variable.
#[test]
fn a_blank_or_non_ascii_token_stops_the_start() {
    let blank = " ".repeat(20);
    for (extra, expected) in [
        (
            vec![("ADMIN_TOKEN", blank.as_str())],
            "ADMIN_TOKEN: is blank",
        ),
        (
            vec![
                ("ADMIN_TOKEN", blank.as_str()),
                ("ADMIN_ADDR", "0.0.0.0:9090"),
            ],
            "ADMIN_TOKEN: is blank",
        ),
        (
            vec![
                ("ADMIN_TOKEN", "the-operators-token-0123"),
                ("ADMIN_APP_TOKEN", blank.as_str()),
            ],
            "ADMIN_APP_TOKEN: is blank",
        ),
        (
            vec![("ADMIN_TOKEN", "tök0123456789abcdef0123456789")],
            "ADMIN_TOKEN: holds a character that is not printable ASCII",
        ),
    ] {
        let mut env: Vec<(&str, &str)> = BASE.to_vec();
        env.extend(extra.iter().copied());
        let out = serve_with_only(&env);
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{extra:?}: {text}");
        assert!(text.contains(expected), "{extra:?}: {text}");
        assert!(!text.contains("tök0"), "{text}");
    }
}

/// A secret given by its flag and by its `*_FILE` variable stops the start naming both, as the
/// variable and its `*_FILE` do: the flag must not win silently.
#[test]
fn a_secret_given_by_flag_and_by_file_is_refused() {
    let dir = std::env::temp_dir().join(format!("sume-flag-and-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hook");
    std::fs::write(&file, "whsec_from_file_but_secret\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(["serve", "--webhook-secret", "whsec_from_the_flag"])
        .env_clear()
        .env("DATABASE_URL", "postgres://u@127.0.0.1:1/db")
        .env("SUME_WEBHOOK_SECRET_FILE", &file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains("--webhook-secret and SUME_WEBHOOK_SECRET_FILE are both set"),
        "{text}"
    );
    assert!(!text.contains("whsec_from"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// OTEL_* that this build cannot honour, or that do not read, stop the start (78) naming the
/// variable and what it takes, with traces on or off; no header value or password is printed.
#[test]
fn opentelemetry_settings_that_cannot_be_honoured_stop_the_start() {
    const ON: (&str, &str) = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1");
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[ON, ("OTEL_TRACES_EXPORTER", "zipkin")],
            "OTEL_TRACES_EXPORTER: \"zipkin\" is not one of `otlp` or `none`",
        ),
        (
            &[("OTEL_TRACES_EXPORTER", "console")],
            "OTEL_TRACES_EXPORTER",
        ),
        (
            &[ON, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
            "OTEL_EXPORTER_OTLP_PROTOCOL: \"grpc\" is not supported",
        ),
        (
            &[ON, ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")],
            "write http/protobuf",
        ),
        (
            &[ON, ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")],
            "OTEL_EXPORTER_OTLP_COMPRESSION: \"gzip\" is not supported",
        ),
        (
            &[ON, ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")],
            "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        ),
        (
            &[
                ON,
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=secret123,garbage"),
            ],
            "OTEL_EXPORTER_OTLP_HEADERS: item 2 is not name=value",
        ),
        (&[("OTEL_TRACES_SAMPLER", "bogus")], "OTEL_TRACES_SAMPLER"),
        (
            &[(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://u:hunter2@collector:4318",
            )],
            "credentials go in OTEL_EXPORTER_OTLP_HEADERS",
        ),
        (
            &[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "collector:4318/v1/traces",
            )],
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ),
        (
            &[("SUME_API_URL", "https://u:hunter2@api.example/v1")],
            "\"https://u:***@api.example/v1\" is not an http(s) URL",
        ),
    ];
    for (extra, said) in cases {
        let out = serve_with_only(&with(extra));
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{extra:?}: {text}");
        assert!(text.contains(said), "{extra:?}: {text}");
        for secret in ["secret123", "hunter2", "gzip-http", "db-password-xyz"] {
            assert!(!text.contains(secret), "{extra:?}: {text}");
        }
    }
    // The admin commands' URL too.
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .arg("stats")
        .env_clear()
        .env("SUME_INBOX_ADMIN_URL", "http://op:hunter2@127.0.0.1:9090")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(text.contains("\"http://op:***@127.0.0.1:9090\""), "{text}");
    assert!(
        text.contains("SUME_INBOX_ADMIN_TOKEN") && !text.contains("hunter2"),
        "{text}"
    );
}

/// What OpenTelemetry itself would refuse, or what holds a token, as the binary reads it: a
/// token in the endpoint's query is never printed, a resource attribute that is not
/// percent-encoded is named by its position, and OTEL_SDK_DISABLED takes `true` or `false`
/// only: each stops the start (78).
#[test]
fn opentelemetry_values_that_do_not_read_stop_the_start_without_printing_a_token() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://127.0.0.1:21270?token=SECRETQ",
            )],
            "OTEL_EXPORTER_OTLP_ENDPOINT: \"http://127.0.0.1:21270?***\" is not",
        ),
        (
            &[("OTEL_RESOURCE_ATTRIBUTES", "team=a%2Cb,a=%ZZ")],
            "OTEL_RESOURCE_ATTRIBUTES: item 2 (\"a=%ZZ\") has a %",
        ),
        (
            &[("OTEL_SDK_DISABLED", "yes")],
            "OTEL_SDK_DISABLED: \"yes\" is not one of `true` or `false`",
        ),
    ];
    for (extra, said) in cases {
        let out = serve_with_only(&with(extra));
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{extra:?}: {text}");
        assert!(text.contains(said), "{extra:?}: {text}");
        assert!(!text.contains("SECRETQ"), "{extra:?}: {text}");
    }
}

/// A header value a collector cannot be sent as written, `authorization=Bearer <token>é` (or
/// percent-encoded, or holding a tab), was taken at start and its export failed later: it now
/// stops the start (78), naming the variable and the header, never the value.
#[test]
fn a_header_value_outside_printable_ascii_stops_the_start_naming_the_header() {
    for (name, value, header) in [
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer SECRETQ\u{e9}",
            "authorization",
        ),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-tenant=t1,authorization=Bearer%20SECRETQ%C3%A9",
            "authorization",
        ),
        (
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "x-api-key=SECRETQ\tmore",
            "x-api-key",
        ),
    ] {
        let extra = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            (name, value),
        ];
        let out = serve_with_only(&with(&extra));
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{value:?}: {text}");
        assert!(
            text.contains(&format!("{name}: item ")) && text.contains(&format!("({header})")),
            "{text}"
        );
        assert!(text.contains("a value a header cannot carry"), "{text}");
        assert!(!text.contains("SECRETQ"), "{text}");
    }
}

/// `SUME_API_KEYS=main:k1,` (a stray comma) was refused as "item 2 is not name:key"; now as
/// the empty entry it is, by its position, with its look of a stray comma (78).
#[test]
fn a_stray_comma_in_a_list_stops_the_start_said_as_one() {
    for (name, value, said) in [
        ("SUME_API_KEYS", "main:sk_live_1,", "entry 2 of 2 is empty"),
        (
            "SUME_API_KEYS",
            "main:sk_live_1,,ops:sk_live_2",
            "entry 2 of 3 is empty",
        ),
        ("SUME_WEBHOOK_SECRET", "whsec_1,", "entry 2 of 2 is empty"),
        (
            "ADMIN_HOSTS",
            "a.internal,,b.internal",
            "entry 2 of 3 is empty",
        ),
    ] {
        let out = serve_with_only(&with(&[(name, value)]));
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{value:?}: {text}");
        assert!(text.contains(&format!("{name}: {said}")), "{text}");
        assert!(text.contains("stray comma"), "{text}");
        assert!(
            !text.contains("sk_live") && !text.contains("whsec_1"),
            "{text}"
        );
    }
}
