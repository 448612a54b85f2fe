//! The binary as a hurried operator runs it: secret files written one entry a line, values
//! from files refused by the file's variable, flags and ids refused as flags are (exit 2,
//! before anything is asked), and the command line's own refusals in the log's format.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::cli_refused::run;

/// Variables and their values.
type Env = [(&'static str, &'static str)];

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The directory of `test`'s files.
fn files_dir(test: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sume-cli-flags-{}-{test}", std::process::id()))
}

/// A file holding `content` in a directory of this test's own.
fn secret_file(test: &str, name: &str, content: &str) -> PathBuf {
    let dir = files_dir(test);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

/// What `serve` needs to read every setting; LISTEN_ADDR then collides with ADMIN_ADDR, a
/// rule checked once every value has been read, so a refusal naming LISTEN_ADDR says every
/// value before it was taken, and nothing is connected to.
const READ_THROUGH: &[(&str, &str)] = &[
    ("DATABASE_URL", "postgres://u:pw@127.0.0.1:1/db"),
    ("LISTEN_ADDR", "127.0.0.1:9090"),
];

/// `serve` with READ_THROUGH and `env`: its exit status and what it said.
fn serve(env: &[(&str, &str)]) -> (Option<i32>, String) {
    let all: Vec<(&str, &str)> = READ_THROUGH.iter().chain(env).copied().collect();
    let out = run(&["serve"], &all);
    (out.status.code(), stderr(&out))
}

/// `SUME_API_KEYS_FILE` of one `name:key` a line was one key holding a newline (every request
/// failed, the second key was lost); `SUME_WEBHOOK_SECRET_FILE` of two lines, one secret no
/// delivery verified with.
#[test]
fn a_secret_file_of_one_entry_a_line_is_read_as_its_entries() {
    let file = |name: &str, content: &str| {
        let path = secret_file("lines", name, content);
        path.to_str().unwrap().to_owned()
    };
    let hooks = file("hooks", "whsec_old\nwhsec_new\n");
    let keys = file("keys", "main:sk_main_1\r\nother:sk_other_2\r\n");
    let (code, text) = serve(&[
        ("SUME_WEBHOOK_SECRET_FILE", &hooks),
        ("SUME_API_KEYS_FILE", &keys),
    ]);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("LISTEN_ADDR") && text.contains("same port"),
        "{text}"
    );
    // Its lines are entries: a name given on two lines is given twice, and a control
    // character inside a line is refused, by the file's variable, never printed.
    for (content, says) in [
        ("main:sk_main_1\nmain:sk_main_2\n", "appears twice"),
        ("main:sk_main_1\nother:sk_a\tb\n", "control character"),
        ("a:sk_same\nb:sk_same\n", "are the same key"),
    ] {
        let keys = file("bad-keys", content);
        let (code, text) = serve(&[
            ("SUME_WEBHOOK_SECRET_FILE", &hooks),
            ("SUME_API_KEYS_FILE", &keys),
        ]);
        assert_eq!(code, Some(78), "{text}");
        assert!(
            text.contains("SUME_API_KEYS_FILE: ") && text.contains(says),
            "{text}"
        );
        assert!(!text.contains("sk_"), "{text}");
    }
    let hooks = file("bad-hooks", "whsec_old\nwhsec_\u{1b}new\n");
    let (code, text) = serve(&[("SUME_WEBHOOK_SECRET_FILE", &hooks)]);
    assert_eq!(code, Some(78), "{text}");
    assert!(text.contains("SUME_WEBHOOK_SECRET_FILE: item 2"), "{text}");
    assert!(!text.contains("whsec_"), "{text}");
    // A collector's headers, one a line, reach the exporter as the commas it reads.
    let headers = file("headers", "api-key=k1\nx-tenant=t2\n");
    let (code, text) = serve(&[
        ("SUME_WEBHOOK_SECRET", "whsec_x"),
        ("OTEL_EXPORTER_OTLP_HEADERS_FILE", &headers),
    ]);
    assert_eq!(code, Some(78), "{text}");
    assert!(text.contains("LISTEN_ADDR"), "{text}");
    let _ = std::fs::remove_dir_all(files_dir("lines"));
}

/// `ADMIN_TOKEN_FILE` holding `short` was refused as `ADMIN_TOKEN: is 5 characters long`.
#[test]
fn a_value_read_from_a_file_is_refused_by_the_files_variable() {
    let token = secret_file("named", "token", "short\n");
    let (code, text) = serve(&[
        ("SUME_WEBHOOK_SECRET", "whsec_x"),
        ("ADMIN_TOKEN_FILE", token.to_str().unwrap()),
    ]);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("ADMIN_TOKEN_FILE: is 5 characters long"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(files_dir("named"));
}

/// `inbox ls --older-than 10` and `reconcile --since abc` exited 78 while `--limit abc` exited
/// 2; `reconcile --since 0` did nothing and said so with 0; an id longer than any was sent
/// (and answered 431 as if the address were wrong) or audited whole.
#[test]
fn a_refused_flag_or_id_exits_2_before_anything_is_asked() {
    // Nothing listens there: a refusal that comes first is the flag's own.
    let admin = [("SUME_INBOX_ADMIN_URL", "http://127.0.0.1:9")];
    let reconcile = [
        ("DATABASE_URL", "postgres://u:pw@127.0.0.1:1/db"),
        ("SUME_API_URL", "http://127.0.0.1:9/v1"),
        ("SUME_API_KEYS", "main:sk_x"),
    ];
    let long = "x".repeat(20_000);
    let cases: Vec<(Vec<&str>, &Env, &str)> = vec![
        (
            vec!["inbox", "ls", "--older-than", "10"],
            &admin,
            "--older-than",
        ),
        (vec!["inbox", "ls", "--limit", "abc"], &admin, "--limit"),
        (vec!["reconcile", "--since", "abc"], &reconcile, "--since"),
        (
            vec!["reconcile", "--max-wait", "soon"],
            &reconcile,
            "--max-wait",
        ),
        (
            vec!["reconcile", "--since", "0"],
            &reconcile,
            "looks back over no time",
        ),
        (
            vec!["reconcile", "--max-pages", "0"],
            &reconcile,
            "0 is not in 1..=10000",
        ),
        (
            vec!["replay", &long],
            &admin,
            "an event id is 1 to 511 bytes",
        ),
        (
            vec!["dead-letters", "drop", "dl_x", &long],
            &admin,
            "511 bytes",
        ),
        (
            vec!["jobs", "show", &long],
            &admin,
            "a job id is 1 to 255 characters",
        ),
    ];
    for (args, env, says) in cases {
        let out = run(&args, env);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{:?}: {text}", &args[..2]);
        assert!(text.contains(says), "{:?}: {text}", &args[..2]);
        assert!(
            text.len() < 1_000,
            "the id is not printed whole: {}",
            text.len()
        );
    }
}

/// `LOG_FORMAT=json sume-inbox stats --bogus` printed clap's text, though every other refusal
/// is a line of JSON under it.
#[test]
fn the_command_lines_refusal_is_a_json_line_under_log_format_json() {
    for env in [[("LOG_FORMAT", "json")], [("LOG_FORMAT", "JSON")]] {
        let out = run(&["stats", "--bogus"], &env);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert_eq!(text.lines().count(), 1, "{text}");
        let line: Value =
            serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(line["level"], "ERROR");
        assert_eq!(line["exit_code"], 2);
        let message = line["message"].as_str().unwrap();
        assert!(
            message.starts_with("sume-inbox: ") && message.contains("--bogus"),
            "{message}"
        );
    }
    let out = run(
        &["inbox", "ls", "--log-format", "json", "--limit", "abc"],
        &[],
    );
    let line: Value = serde_json::from_str(stderr(&out).trim()).unwrap();
    assert_eq!(
        (out.status.code(), &line["exit_code"]),
        (Some(2), &Value::from(2))
    );
    // What was asked for stays text.
    for args in [&["--help"][..], &["--version"], &["stats", "--help"]] {
        let out = run(args, &[("LOG_FORMAT", "json")]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(
            serde_json::from_str::<Value>(text.trim()).is_err(),
            "{text}"
        );
    }
    // Without it, clap's text as it was.
    let out = run(&["stats", "--bogus"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: unexpected argument '--bogus'"));
}

/// `inbox ls --limit -1` and `--older-than -5m` were clap's "unexpected argument '-1' found",
/// as if the flag had no value: now the value reaches the flag, which refuses it saying the
/// flag, the value and what it takes (exit 2).
#[test]
fn a_negative_number_or_duration_is_refused_by_its_flag() {
    let admin = [("SUME_INBOX_ADMIN_URL", "http://127.0.0.1:9")];
    let reconcile = [
        ("DATABASE_URL", "postgres://u:pw@127.0.0.1:1/db"),
        ("SUME_API_URL", "http://127.0.0.1:9/v1"),
        ("SUME_API_KEYS", "main:sk_x"),
    ];
    let cases: Vec<(Vec<&str>, &Env, &[&str])> = vec![
        (
            vec!["inbox", "ls", "--limit", "-1"],
            &admin,
            &["'-1'", "--limit", "1..=1000"],
        ),
        (
            vec!["dead-letters", "ls", "--limit", "-5", "--json"],
            &admin,
            &["'-5'", "--limit", "1..=1000"],
        ),
        (
            vec!["audit", "ls", "--limit", "-1"],
            &admin,
            &["'-1'", "1..=1000"],
        ),
        (
            vec!["replay", "--dead-letters", "--limit", "-1"],
            &admin,
            &["'-1'", "1..=10000"],
        ),
        (
            vec!["reconcile", "--max-pages", "-3"],
            &reconcile,
            &["'-3'", "1..=10000"],
        ),
        (
            vec!["inbox", "ls", "--older-than", "-5m", "--json"],
            &admin,
            &["--older-than: \"-5m\" is negative", "3650d"],
        ),
        (
            vec!["reconcile", "--since", "-1h"],
            &reconcile,
            &["--since: \"-1h\" is negative"],
        ),
        (
            vec!["reconcile", "--max-wait", "-10s"],
            &reconcile,
            &["--max-wait: \"-10s\" is negative"],
        ),
    ];
    refused_saying(cases);
}

/// Each command refused (2), saying every piece of what it is paired with, none as an
/// "unexpected argument".
fn refused_saying(cases: Vec<(Vec<&str>, &Env, &[&str])>) {
    for (args, env, says) in cases {
        let out = run(&args, env);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(!text.contains("unexpected argument"), "{args:?}: {text}");
        for said in says {
            assert!(text.contains(said), "{args:?}: {text}");
        }
    }
}

/// A flag taking a negative value still leaves a flag after it a flag: where the value should
/// be it is said to be one, and after a value it is read as before.
#[test]
fn a_flag_after_one_that_takes_a_negative_value_is_still_a_flag() {
    let admin = [("SUME_INBOX_ADMIN_URL", "http://127.0.0.1:9")];
    let cases: Vec<(Vec<&str>, &Env, &[&str])> = vec![
        // A flag where the value should be is still said to be one.
        (
            vec!["inbox", "ls", "--limit", "--json"],
            &admin,
            &["a value is required for '--limit <LIMIT>'"],
        ),
        (
            vec!["inbox", "ls", "--older-than", "--json"],
            &admin,
            &[
                "--older-than: \"--json\" is no duration",
                "--older-than 10m",
            ],
        ),
    ];
    refused_saying(cases);
    // Values and flags after them, read as they were: the run reaches the admin API (not
    // there: 1).
    let out = run(
        &[
            "inbox",
            "ls",
            "--older-than",
            "5m",
            "--json",
            "--limit",
            "3",
        ],
        &admin,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

/// `serve --ingest-writers -1`, `--db-pool-size -3` and `--header-timeout -5s` were clap's
/// "unexpected argument '-1' found" (exit 2), as if the flag had no value: now the value
/// reaches the setting, which refuses it as it refuses its variable's (exit 78, naming the
/// setting and the value), as it refuses `--ingest-writers abc`.
#[test]
fn a_negative_setting_flag_value_is_refused_by_its_setting() {
    for (flag, value, variable) in [
        ("--ingest-writers", "-1", "INGEST_WRITERS"),
        ("--ingest-writers", "abc", "INGEST_WRITERS"),
        ("--db-pool-size", "-3", "DB_POOL_SIZE"),
        ("--header-timeout", "-5s", "HEADER_TIMEOUT"),
        ("--wait-poll-interval", "-1s", "WAIT_POLL_INTERVAL"),
    ] {
        let out = run(&["serve", flag, value], READ_THROUGH);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(78), "{flag} {value}: {text}");
        assert!(
            !text.contains("unexpected argument"),
            "{flag} {value}: {text}"
        );
        assert!(text.contains(variable), "{flag} {value}: {text}");
        assert!(
            text.contains(&format!("{value:?}")),
            "{flag} {value}: {text}"
        );
        // Refused as the variable holding it is.
        let env: Vec<(&str, &str)> = READ_THROUGH
            .iter()
            .copied()
            .chain([(variable, value)])
            .collect();
        let by_env = run(&["serve"], &env);
        assert_eq!(by_env.status.code(), Some(78), "{}", stderr(&by_env));
    }
}

/// A setting's flag taking a negative value still leaves a flag after it a flag: where the
/// value should be it is refused as a flag given no value (2), and after a value it is read as
/// one; after `--` nothing is taken for a value.
#[test]
fn a_flag_after_a_setting_flag_is_still_a_flag() {
    let out = run(
        &["serve", "--ingest-writers", "--db-pool-size", "5"],
        READ_THROUGH,
    );
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("a value is required for '--ingest-writers <INGEST_WRITERS>'"),
        "{text}"
    );
    // After a value, the next flag is read, and its own negative value refused by it.
    let out = run(
        &["serve", "--ingest-writers", "2", "--db-pool-size", "-3"],
        READ_THROUGH,
    );
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains("DB_POOL_SIZE") && text.contains("\"-3\""),
        "{text}"
    );
    let out = run(&["serve", "--", "--ingest-writers", "-1"], READ_THROUGH);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("unexpected argument '--ingest-writers'"),
        "{text}"
    );
}
