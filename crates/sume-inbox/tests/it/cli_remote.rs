//! The admin commands through a daemon's admin API (`--admin-url`): no database credentials,
//! the same answers, writes audited with who ran them.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

const TOKEN: &str = "operator-token-for-the-cli";

/// Runs `sume-inbox ARGS` against `daemon`'s admin API with the token and no DATABASE_URL.
fn remote(daemon: &Daemon, token: &str, args: &[&str]) -> (bool, String, String) {
    remote_at(&daemon.admin_url(""), token, args)
}

/// Runs `sume-inbox ARGS` with `SUME_INBOX_ADMIN_URL=url`, the token, and no DATABASE_URL.
fn remote_at(url: &str, token: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("SUME_WEBHOOK_SECRET")
        .env("SUME_INBOX_ADMIN_URL", url)
        .env("SUME_INBOX_ADMIN_TOKEN", token)
        .env("USER", "alice")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A daemon whose admin API takes `TOKEN`.
async fn with_admin_token(db: &TestDb) -> Daemon {
    let mut c = config(&db.url);
    c.admin_token = Some(sume_wire::Secret::new(TOKEN));
    Daemon::start(c).await
}

/// A job id is counted in characters, as the admin API registers it and `sume.jobs`' check
/// counts it: 255 of them name a job however many bytes they take (`jobs show` refused one of
/// 256 bytes as naming nothing).
#[tokio::test(flavor = "multi_thread")]
async fn jobs_show_reads_a_job_id_of_255_characters_beyond_ascii() {
    let db = TestDb::new().await;
    let daemon = with_admin_token(&db).await;
    let wide = "é".repeat(255);
    db.client()
        .await
        .execute("insert into sume.jobs (job_id) values ($1)", &[&wide])
        .await
        .unwrap();
    let (ok, out, err) = remote(&daemon, TOKEN, &["jobs", "show", &wide, "--json"]);
    assert!(
        ok && json(&out)["job"]["job_id"] == wide.as_str(),
        "{out}{err}"
    );
    let (ok, _, err) = remote(&daemon, TOKEN, &["jobs", "show", &format!("{wide}é")]);
    assert!(!ok && err.contains("(256 characters)"), "{err}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_admin_commands_work_through_the_admin_api() {
    let db = TestDb::new().await;
    let daemon = with_admin_token(&db).await;
    let http = reqwest::Client::new();
    let hook = daemon.url("/webhooks/sume");
    Delivery::completed("job_done").send(&http, &hook).await;
    Delivery::completed("job_wait").send(&http, &hook).await;
    let mut garbage = Delivery::completed("x");
    garbage.body = "not json".into();
    garbage.event_id = None;
    garbage.send(&http, &hook).await;
    db.client()
        .await
        .execute("insert into sume.jobs (job_id) values ('job_done')", &[])
        .await
        .unwrap();
    wait_for("job_done closed", Duration::from_secs(10), || async {
        job_state(&db, "job_done").await.as_deref() == Some("completed")
    })
    .await;

    let (ok, out, err) = remote(&daemon, TOKEN, &["stats", "--json"]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["dead_letters"], 1);
    let (ok, out, _) = remote(&daemon, TOKEN, &["jobs", "show", "job_done"]);
    assert!(ok && out.contains("state completed"), "{out}");
    // An event id holds a slash: it travels as one path segment.
    let (ok, out, _) = remote(&daemon, TOKEN, &["jobs", "show", "job_wait", "--json"]);
    assert!(ok);
    assert_eq!(
        json(&out)["events"][0]["event_id"],
        "job_wait/job.completed"
    );
    let (ok, _, err) = remote(&daemon, TOKEN, &["jobs", "show", "job_nobody"]);
    assert!(!ok && err.contains("no job and no event"), "{err}");
    // An id no job can have is said to be so, not sent (a URL could not carry it), and a
    // control character in it is never written to the terminal.
    let long = "x".repeat(100_000);
    let (ok, _, err) = remote(&daemon, TOKEN, &["jobs", "show", &long]);
    assert!(
        !ok && err.contains("a job id is 1 to 255 characters"),
        "{err}"
    );
    let (ok, _, err) = remote(&daemon, TOKEN, &["jobs", "show", "job_\u{1}x"]);
    assert!(
        !ok && err.contains(r#""job_\u{1}x""#) && !err.contains('\u{1}'),
        "{err}"
    );
    let (ok, out, _) = remote(&daemon, TOKEN, &["inbox", "ls"]);
    assert!(ok && out.contains("job_wait"), "{out}");
    let (ok, out, _) = remote(&daemon, TOKEN, &["dead-letters", "ls", "--json"]);
    assert!(ok);
    let letter = json(&out)[0]["dead_letter_id"].as_str().unwrap().to_owned();
    let (ok, out, err) = remote(&daemon, TOKEN, &["replay", "--dead-letters"]);
    assert!(!ok && out.contains("still names no job"), "{out}");
    assert!(
        err.contains("1 of 1 dead letters were not replayed"),
        "{err}"
    );
    let (ok, out, _) = remote(&daemon, TOKEN, &["replay", "job_done/job.completed"]);
    assert!(ok && out.contains("already applied"), "{out}");
    let (ok, out, _) = remote(&daemon, TOKEN, &["replay", "evt_nobody"]);
    assert!(!ok && out.contains("no such event"), "{out}");
    let (ok, _, _) = remote(&daemon, TOKEN, &["dead-letters", "drop", &letter]);
    assert!(ok);
    let (ok, out, _) = remote(&daemon, TOKEN, &["dead-letters", "drop", &letter]);
    assert!(!ok && out.contains("no such dead letter"), "{out}");
    let (ok, out, _) = remote(&daemon, TOKEN, &["audit", "ls", "--json"]);
    assert!(ok);
    let entries = json(&out);
    assert_eq!(entries[0]["action"], "drop_dead_letters");
    assert!(
        entries[0]["actor"]
            .as_str()
            .unwrap()
            .starts_with("api:operator (cli:alice@"),
        "{entries}"
    );
    // Three replays and two drops: the replay of an unknown event is recorded as failed, as
    // it is without the API.
    assert_eq!(entries.as_array().unwrap().len(), 5);
    // A wrong token is refused, and the command says why.
    let (ok, _, err) = remote(&daemon, "not-the-operator-token", &["stats"]);
    assert!(!ok && err.contains("unauthorized"), "{err}");
    daemon.stop().await;
}

/// Runs `sume-inbox stats` against `url` as the admin API: whether it succeeded, its stderr.
fn stats_at(url: &str) -> (bool, String) {
    let (ok, _, err) = remote_at(url, TOKEN, &["stats"]);
    (ok, err)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_admin_url_is_named_with_what_went_wrong() {
    let db = TestDb::new().await;
    let daemon = with_admin_token(&db).await;
    // The webhook port given for the admin port: an answer, but not the API's.
    let (ok, err) = stats_at(&daemon.url(""));
    assert!(!ok);
    assert!(err.contains("404 Not Found"), "{err}");
    assert!(err.contains("is this the daemon's ADMIN_ADDR"), "{err}");
    // A port nothing listens on: the cause, not only "error sending request".
    let (ok, err) = stats_at(&format!("http://127.0.0.1:{}", free_port()));
    assert!(!ok);
    assert!(err.contains("Connection refused"), "{err}");
    // Not a URL at all: an example of one for this setting.
    let (ok, err) = stats_at("127.0.0.1:9090");
    assert!(!ok);
    assert!(err.contains("such as http://127.0.0.1:9090"), "{err}");
}

/// A USER holding control characters: they are left out of who acts, so the header carrying
/// it is sent and the audit log holds no escape sequence.
#[tokio::test(flavor = "multi_thread")]
async fn a_user_with_control_characters_acts_through_the_api_without_them() {
    let db = TestDb::new().await;
    let daemon = with_admin_token(&db).await;
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(["dead-letters", "drop", "dl_nobody"])
        .env_remove("DATABASE_URL")
        .env("SUME_INBOX_ADMIN_URL", daemon.admin_url(""))
        .env("SUME_INBOX_ADMIN_TOKEN", TOKEN)
        .env("USER", "eve\u{1b}]0;hi\u{7}")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 of 1 ids name no dead letter"), "{err}");
    let (ok, out, err) = remote(&daemon, TOKEN, &["audit", "ls", "--json"]);
    assert!(ok, "{err}");
    let actor = json(&out)[0]["actor"].as_str().unwrap().to_owned();
    assert!(
        actor.starts_with("api:operator (cli:eve]0;hi@"),
        "{actor:?}"
    );
    daemon.stop().await;
}

/// Runs `sume-inbox ARGS` against `url` with `token`: (exit code, stdout, stderr).
fn coded_at(url: &str, token: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(args)
        .env_remove("DATABASE_URL")
        .env("SUME_INBOX_ADMIN_URL", url)
        .env("SUME_INBOX_ADMIN_TOKEN", token)
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (out.status.code(), text(out.stdout), text(out.stderr))
}

/// "No such event" and "no job" are read from the route's own 404 `not_found`, never from a
/// message that happens to hold "404": a wrong token, a daemon not there, the webhook port or a
/// path no route has are each said as they are.
#[tokio::test(flavor = "multi_thread")]
async fn only_the_routes_own_not_found_reads_as_no_such_event_or_job() {
    let db = TestDb::new().await;
    let daemon = with_admin_token(&db).await;
    let http = reqwest::Client::new();
    Delivery::completed("job_b1")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    let admin = daemon.admin_url("");
    let doubled = daemon.admin_url("/v1");
    let closed = format!("http://127.0.0.1:{}", free_port());
    for (url, token, said) in [
        (
            admin.as_str(),
            "wrongtokenwrongtoken",
            "401 Unauthorized unauthorized",
        ),
        (closed.as_str(), TOKEN, "Connection refused"),
        (&daemon.url(""), TOKEN, "is this the daemon's ADMIN_ADDR"),
        (
            doubled.as_str(),
            TOKEN,
            "404 Not Found no_route: no such route",
        ),
    ] {
        for args in [
            &["replay", "evt_404"][..],
            &["jobs", "show", "job_b1"],
            &["jobs", "show", "job_b1", "--json"],
        ] {
            let (code, out, err) = coded_at(url, token, args);
            assert_eq!(code, Some(1), "{url} {args:?}: {out} {err}");
            assert!(err.contains(said), "{url} {args:?}: {err}");
            assert!(
                !out.contains("no such event") && !err.contains("no job and no event"),
                "{url} {args:?}: {out} {err}"
            );
        }
    }
    // The route's own answers still read as nothing there.
    let (code, out, _) = coded_at(&admin, TOKEN, &["replay", "evt_404"]);
    assert!(
        code == Some(1) && out.contains("evt_404: no such event"),
        "{out}"
    );
    let (code, _, err) = coded_at(&admin, TOKEN, &["jobs", "show", "job_404"]);
    assert!(
        code == Some(1) && err.contains("no job and no event"),
        "{err}"
    );
    let (code, out, _) = coded_at(&admin, TOKEN, &["jobs", "show", "job_b1"]);
    assert!(
        code == Some(0) && out.contains("job_b1/job.completed"),
        "{out}"
    );
    // `.` and `..` cannot travel as a path segment: refused, not answered "no job".
    for id in [".", ".."] {
        for args in [&["jobs", "show", id][..], &["replay", id]] {
            let (code, out, err) = coded_at(&admin, TOKEN, args);
            assert_eq!(code, Some(2), "{args:?}: {out} {err}");
            assert!(err.contains("use DATABASE_URL"), "{err}");
        }
    }
    daemon.stop().await;
}

/// `inbox ls --older-than 1500ms` through the API sent `older_than=1s`, its whole seconds: the
/// listing held events 1 to 1.5 seconds old that the same command on the database leaves out.
/// The age is sent as the API reads it back, to the nanosecond (asked of a stand-in for the API
/// that keeps the query, then of the daemon, which takes it).
#[tokio::test(flavor = "multi_thread")]
async fn inbox_ls_sends_its_age_to_the_api_without_cutting_it() {
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let kept = asked.clone();
    let app = axum::Router::new().route(
        "/v1/inbox",
        axum::routing::get(move |uri: axum::http::Uri| async move {
            kept.lock()
                .unwrap()
                .push(uri.query().unwrap_or("").to_owned());
            axum::Json(serde_json::json!({ "events": [], "next_after": null }))
        }),
    );
    let stand_in = stand_in_api(app).await;
    let base = stand_in.trim_end_matches("/v1");
    for (flag, want) in [
        ("1500ms", Duration::from_millis(1500)),
        ("2m", Duration::from_secs(120)),
        ("1s 1ns", Duration::new(1, 1)),
    ] {
        let (ok, _, err) = remote_at(base, TOKEN, &["inbox", "ls", "--older-than", flag]);
        assert!(ok, "{flag}: {err}");
        let query = asked.lock().unwrap().pop().expect("the command asked");
        let sent = url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "older_than")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_else(|| panic!("{flag}: no older_than in {query:?}"));
        assert_eq!(
            humantime::parse_duration(&sent),
            Ok(want),
            "{flag}: {query}"
        );
    }
    let db = TestDb::new().await;
    let daemon = with_admin_token(&db).await;
    let (ok, out, err) = remote(&daemon, TOKEN, &["inbox", "ls", "--older-than", "1500ms"]);
    assert!(ok, "{out}{err}");
    daemon.stop().await;
}
