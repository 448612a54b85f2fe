//! The admin commands against a database that refuses them, run as the binary: said as `serve`
//! says it (the setting, the target without its password, the server's words), exit 78 when
//! waiting cannot help and 1 when the server is only not there; and who acts, in the audit log,
//! without the control characters a USER may hold.

use std::process::{Command, Output};

use serde_json::Value;

use crate::support::*;

/// Runs `sume-inbox ARGS` with `env` and nothing else of the test's environment but PATH.
pub(crate) fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// Every admin command that reads DATABASE_URL, with what else it needs.
const COMMANDS: &[&[&str]] = &[
    &["stats"],
    &["jobs", "show", "job_x"],
    &["inbox", "ls"],
    &["dead-letters", "ls"],
    &["dead-letters", "drop", "dl_x"],
    &["replay", "evt_x"],
    &["audit", "ls"],
    &["reconcile", "--sume-api-url", "http://127.0.0.1:9"],
];

fn with_url(base: &url::Url, user: &str, dbname: &str, query: Option<&str>) -> String {
    let mut u = base.clone();
    u.set_username(user).unwrap();
    u.set_password(Some("pw-never-shown")).unwrap();
    u.set_path(dbname);
    u.set_query(query);
    u.to_string()
}

#[tokio::test]
async fn an_admin_command_refused_by_the_database_says_so_and_exits_78() {
    let db = TestDb::new().await;
    let base = url::Url::parse(&db.url).unwrap();
    let refused = [
        (
            with_url(&base, "postgres", "no_such_database", None),
            "3D000",
        ),
        (with_url(&base, "no_such_role", "postgres", None), "28000"),
        (
            with_url(&base, "postgres", "postgres", Some("sslmode=require")),
            "server does not support TLS",
        ),
    ];
    let mut closed = base.clone();
    closed.set_port(Some(free_port())).unwrap();
    for args in COMMANDS {
        for (target, expected) in &refused {
            let out = run(args, &settings(target));
            let text = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(78), "{args:?} {target}: {text}");
            assert!(text.contains("DATABASE_URL (postgres://"), "{text}");
            assert!(text.contains(expected), "{args:?}: {text}");
            assert!(text.contains("retrying cannot fix this"), "{text}");
            assert!(!text.contains("pw-never-shown"), "{text}");
        }
        // Nothing listening: waiting may help, so 1, with the cause.
        let out = run(args, &settings(closed.as_str()));
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {text}");
        assert!(
            text.contains("DATABASE_URL (postgres://") && text.contains("Connection refused"),
            "{args:?}: {text}"
        );
    }
}

/// DATABASE_URL, and what replay and reconcile need besides.
pub(crate) fn settings(url: &str) -> Vec<(&str, &str)> {
    vec![
        ("DATABASE_URL", url),
        ("SUME_WEBHOOK_SECRET", "whsec_x"),
        ("SUME_API_KEYS", "main:sk_x"),
        ("SUME_API_ALLOW_PLAINTEXT", "true"),
    ]
}

#[tokio::test]
async fn control_characters_of_user_and_logname_never_reach_the_audit_log() {
    let db = TestDb::new().await;
    let out = run(&["migrate"], &[("DATABASE_URL", db.url.as_str())]);
    assert!(out.status.success(), "{out:?}");
    for (var, name) in [
        ("USER", "eve\u{1b}]0;hi\u{7}"),
        ("LOGNAME", "mal\u{9b}lory\u{7f}"),
    ] {
        let env = [("DATABASE_URL", db.url.as_str()), (var, name)];
        let out = run(&["dead-letters", "drop", "dl_nobody"], &env);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let out = run(&["audit", "ls", "--json", "--limit", "1"], &env);
        assert!(out.status.success(), "{out:?}");
        let entries: Value = serde_json::from_slice(&out.stdout).unwrap();
        let actor = entries[0]["actor"].as_str().unwrap();
        let want = name.chars().filter(|c| !c.is_control()).collect::<String>();
        assert!(actor.starts_with(&format!("cli:{want}@")), "{actor:?}");
        assert!(!actor.chars().any(char::is_control), "{actor:?}");
    }
}

/// A listing cut at `--limit` with more left says so on stderr, how to see more, the rows (or
/// `--json`'s bare array) on stdout as they were; one that holds everything says nothing.
/// Before, `audit ls --limit 2` of 3 entries printed 2 and nothing else.
#[tokio::test]
async fn a_listing_cut_at_its_limit_says_so_on_stderr() {
    let db = TestDb::new().await;
    let env = [("DATABASE_URL", db.url.as_str())];
    assert!(run(&["migrate"], &env).status.success());
    for _ in 0..3 {
        let out = run(&["dead-letters", "drop", "dl_nobody"], &env);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
    }
    let out = run(&["audit", "ls", "--json", "--limit", "2"], &env);
    assert!(out.status.success(), "{out:?}");
    let entries: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(entries.as_array().unwrap().len(), 2, "{entries}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("stopped at --limit 2; there are more"),
        "{said}"
    );
    let out = run(&["audit", "ls", "--limit", "2"], &env);
    assert!(out.status.success(), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("--limit"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("raise --limit"));
    for args in [&["audit", "ls", "--limit", "3"][..], &["inbox", "ls"][..]] {
        let out = run(args, &env);
        assert!(out.status.success(), "{out:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {out:?}");
    }
}
