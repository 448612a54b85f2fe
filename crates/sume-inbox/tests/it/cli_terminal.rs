//! The admin commands' text is for a terminal: a control character of stored data (a webhook's
//! fields, an audit actor) or of a typed id is shown escaped, never written raw, from the
//! database and through the admin API alike; `--json` keeps every string exact.

use std::process::Command;

use serde_json::{json, Value};

use crate::support::*;

const TOKEN: &str = "operator-token-for-the-cli";

/// Runs `sume-inbox ARGS` with `env` (and nothing else of ours): (exit code, stdout).
fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("SUME_INBOX_ADMIN_URL")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

/// No control character but the line ends the renderer writes.
fn assert_terminal_safe(args: &[&str], out: &str) {
    assert!(
        !out.chars().any(|c| c.is_control() && c != '\n'),
        "{args:?} wrote a control character: {out:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stored_and_typed_control_characters_are_shown_escaped() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.admin_token = Some(sume_wire::Secret::new(TOKEN));
    let daemon = Daemon::start(c).await;
    let mut hostile = Delivery::completed("job_ctl2");
    hostile.body = json!({
        "event": "job.completed\u{1b}]0;pwned\u{7}",
        "job_id": "job_ctl2",
        "status": "comp\u{1b}[2Jleted",
    })
    .to_string();
    let r = hostile
        .send(&reqwest::Client::new(), &daemon.url("/webhooks/sume"))
        .await;
    assert!(r.status().is_success(), "{}", r.status());
    let store = sume_inbox::db::Store::new(&db.url, 1).unwrap();
    store
        .audit_log_insert(
            "cli:eve\u{1b}[2J\u{9b}1m\u{7f}@h",
            "replay_event",
            &json!({}),
            None,
        )
        .await
        .unwrap();
    let admin = daemon.admin_url("");
    let sources: [&[(&str, &str)]; 2] = [
        &[("DATABASE_URL", db.url.as_str())],
        &[
            ("SUME_INBOX_ADMIN_URL", &admin),
            ("SUME_INBOX_ADMIN_TOKEN", TOKEN),
        ],
    ];
    for env in sources {
        for (args, want) in [
            (&["inbox", "ls"][..], r"comp\u{1b}[2Jleted"),
            (
                &["jobs", "show", "job_ctl2"],
                r"job.completed\u{1b}]0;pwned\u{7}",
            ),
            (&["audit", "ls"], r"cli:eve\u{1b}[2J\u{9b}1m\u{7f}@h"),
            (
                &["dead-letters", "drop", "dl\u{1b}[2J\u{85}"],
                r"dl\u{1b}[2J\u{85}: no such",
            ),
        ] {
            let (_, out) = run(args, env);
            assert_terminal_safe(args, &out);
            assert!(out.contains(want), "{args:?}: {out}");
        }
        // JSON stays exact.
        let (code, out) = run(&["jobs", "show", "job_ctl2", "--json"], env);
        assert_eq!(code, Some(0), "{out}");
        let detail: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(detail["events"][0]["status"], "comp\u{1b}[2Jleted");
    }
    daemon.stop().await;
}
