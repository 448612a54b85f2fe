//! The admin commands, run as the binary against a database a daemon has filled.

use std::process::Command;

use sume_wire::{signature_header, Secret};

use crate::support::*;

fn admin(db: &TestDb, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env("SUME_WEBHOOK_SECRET", SECRET)
        .env("LOG_FORMAT", "pretty")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_commands_show_and_replay_what_is_stored() {
    let db = TestDb::new().await;
    let (ok, _, err) = admin(&db, &["stats"]);
    assert!(!ok && err.contains("run `sume-inbox migrate`"), "{err}");

    fill_through_a_daemon(&db).await;
    store_what_the_daemon_would_not(&db).await;

    stats_count_what_is_stored(&db);
    jobs_show_a_job_and_its_events(&db);
    inbox_ls_lists_the_waiting_events(&db);
    let (ok, out, _) = admin(&db, &["dead-letters", "ls"]);
    assert!(
        ok && out.contains("dl_readable") && out.contains("body is not JSON"),
        "{out}"
    );

    replay_turns_the_readable_dead_letter_into_an_event(&db).await;
    replay_applies_a_set_aside_event_and_leaves_a_forged_one(&db).await;
    // Every replay made through the database is in the audit log, with who ran it.
    let (ok, out, _) = admin(&db, &["audit", "ls", "--json"]);
    assert!(ok, "{out}");
    let entries = json(&out);
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), 5, "{entries:?}");
    assert_eq!(entries[0]["action"], "replay_event");
    assert!(entries[0]["actor"].as_str().unwrap().starts_with("cli:"));
}

/// A daemon stores a closing webhook, one for a job not yet committed and one that is not JSON
/// (a dead letter); the first job is then registered.
async fn fill_through_a_daemon(db: &TestDb) {
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let hook = daemon.url("/webhooks/sume");
    Delivery::completed("job_done").send(&http, &hook).await;
    Delivery::status("job_wait", "completed")
        .send(&http, &hook)
        .await;
    let mut garbage = Delivery::completed("x");
    garbage.body = "not json".into();
    garbage.send(&http, &hook).await;
    assert_eq!(
        api_register(&http, &daemon, "job_done", "o1")
            .await
            .status(),
        201
    );
    daemon.stop().await;
}

/// A dead letter an older version could not read, but this one can; a set-aside event; an
/// event whose signature does not verify; and the jobs they name.
async fn store_what_the_daemon_would_not(db: &TestDb) {
    let ts = unix_now();
    let body = r#"{"event":"job.completed","job_id":"job_late_reader"}"#;
    let sig = signature_header(&[Secret::new(SECRET)], ts, body.as_bytes());
    let c = db.client().await;
    c.execute(
        "insert into sume.dead_letters (dead_letter_id, reason, body, header_event_id, signed_at, signature)
         values ('dl_readable', 'old parser', $1, 'evt_late_reader', $2, $3)",
        &[&body.as_bytes(), &ts, &sig],
    )
    .await
    .unwrap();
    let aside = r#"{"event":"job.failed","job_id":"job_aside"}"#;
    let aside_sig = signature_header(&[Secret::new(SECRET)], ts, aside.as_bytes());
    c.execute(
        "insert into sume.events (event_id, job_id, status, body, signed_at, signature, set_aside_at, set_aside_reason)
         values ('evt_aside', 'job_aside', 'failed', $1, $2, $3, now(), 'foreign')",
        &[&aside.as_bytes(), &ts, &aside_sig],
    )
    .await
    .unwrap();
    c.execute(
        "insert into sume.events (event_id, job_id, status, body, signed_at, signature)
         values ('evt_forged', 'job_forged', 'completed', '{}', $1, 'v1=00')",
        &[&ts],
    )
    .await
    .unwrap();
    c.batch_execute(
        "insert into sume.jobs (job_id) values ('job_late_reader'), ('job_aside'), ('job_forged')",
    )
    .await
    .unwrap();
}

fn stats_count_what_is_stored(db: &TestDb) {
    let (ok, out, _) = admin(db, &["stats", "--json"]);
    assert!(ok);
    let s = json(&out);
    assert_eq!(s["dead_letters"], 2);
    assert_eq!(s["set_aside"], 1);
    assert_eq!(s["waiting"], 2, "job_wait and the forged one");
    assert_eq!(s["open_jobs"], 3);
}

fn jobs_show_a_job_and_its_events(db: &TestDb) {
    let (ok, out, _) = admin(db, &["jobs", "show", "job_done"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("state completed") && out.contains("closed by webhook"),
        "{out}"
    );
    assert!(
        out.contains("job_done/job.completed") && out.contains("applied: closed"),
        "{out}"
    );
    let (ok, out, _) = admin(db, &["jobs", "show", "job_wait", "--json"]);
    assert!(ok);
    let j = json(&out);
    assert!(j["job"].is_null());
    assert_eq!(j["events"][0]["event_id"], "job_wait/job.completed");
    let (ok, out, err) = admin(db, &["jobs", "show", "job_nobody"]);
    assert!(!ok && err.contains("no job and no event"));
    assert_eq!(out, "", "said once, on stderr");
    let (ok, out, _) = admin(db, &["jobs", "show", "job_nobody", "--json"]);
    assert!(!ok);
    assert_eq!(json(&out)["job_id"], "job_nobody");
}

fn inbox_ls_lists_the_waiting_events(db: &TestDb) {
    let (ok, out, _) = admin(db, &["inbox", "ls", "--json"]);
    assert!(ok);
    let listed = json(&out);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["job_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"job_wait") && ids.contains(&"job_forged"),
        "{ids:?}"
    );
    let (ok, out, _) = admin(db, &["inbox", "ls", "--older-than", "1h"]);
    assert!(ok && out.contains("no waiting event"), "{out}");
    let (ok, _, err) = admin(db, &["inbox", "ls", "--older-than", "soon"]);
    assert!(!ok && err.contains("--older-than"), "{err}");
}

/// The readable dead letter becomes an event and closes its job, once; the garbage stays.
async fn replay_turns_the_readable_dead_letter_into_an_event(db: &TestDb) {
    let (ok, out, err) = admin(db, &["replay", "--dead-letters"]);
    assert!(
        out.contains("dl_readable: stored and applied (job job_late_reader)"),
        "{out}"
    );
    assert!(out.contains("still names no job"), "{out}");
    // The garbage was not replayed: the run says so, and fails.
    assert!(
        !ok && err.contains("dead letters were not replayed"),
        "{err}"
    );
    assert_eq!(
        job_state(db, "job_late_reader").await.as_deref(),
        Some("completed")
    );
    let (_, again, _) = admin(db, &["replay", "--dead-letters"]);
    assert!(!again.contains("dl_readable"), "replayed once: {again}");
}

/// A set-aside event whose job now exists goes back through attach, once; a stored event whose
/// signature does not verify is left alone; `replay` without a target is a usage error.
async fn replay_applies_a_set_aside_event_and_leaves_a_forged_one(db: &TestDb) {
    let (ok, out, _) = admin(db, &["replay", "evt_aside"]);
    assert!(ok && out.contains("applied to job job_aside"), "{out}");
    assert_eq!(job_state(db, "job_aside").await.as_deref(), Some("failed"));
    let (ok, out, _) = admin(db, &["replay", "evt_aside"]);
    assert!(ok && out.contains("already applied"), "{out}");
    let (ok, out, _) = admin(db, &["replay", "evt_forged"]);
    assert!(!ok && out.contains("does not verify"), "{out}");
    assert_eq!(job_state(db, "job_forged").await.as_deref(), Some("open"));
    let (ok, _, err) = admin(db, &["replay"]);
    assert!(!ok && err.contains("required"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_drops_dead_letters_nobody_wants() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    c.batch_execute(
        "insert into sume.dead_letters (dead_letter_id, reason, body, signed_at, signature)
         values ('dl_unwanted', 'no job id', '\\x7b7d', 0, 'v1=00'),
                ('dl_kept', 'no job id', '\\x7b7d', 0, 'v1=00')",
    )
    .await
    .unwrap();
    let (ok, out, _) = admin(&db, &["dead-letters", "drop", "dl_unwanted", "--json"]);
    assert!(ok, "{out}");
    assert_eq!(json(&out)["dropped"], serde_json::json!(["dl_unwanted"]));
    // An id that names nothing is an error, and drops nothing else.
    let (ok, out, err) = admin(&db, &["dead-letters", "drop", "dl_unwanted"]);
    assert!(
        !ok && out.contains("dl_unwanted: no such dead letter"),
        "{out}{err}"
    );
    assert!(err.contains("1 of 1 ids name no dead letter"), "{err}");
    // An id named twice is said and counted once (it was "2 of 2", listed twice).
    let (ok, out, err) = admin(&db, &["dead-letters", "drop", "dl_unwanted", "dl_unwanted"]);
    assert!(!ok);
    assert_eq!(out.matches("dl_unwanted").count(), 1, "{out}");
    assert!(err.contains("1 of 1 ids name no dead letter"), "{err}");
    let left: Vec<String> = c
        .query("select dead_letter_id from sume.dead_letters", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(left, vec!["dl_kept"]);
    // Without an id: a usage error, nothing dropped.
    let (ok, _, _) = admin(&db, &["dead-letters", "drop"]);
    assert!(!ok);
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 1);
}

/// Dead letters that still cannot be replayed, older than one that can, do not hold it back:
/// `--limit` counts the letters replayed, and the run reads past the others (before, every run
/// read the same oldest ones and never reached the newer).
#[tokio::test(flavor = "multi_thread")]
async fn letters_that_cannot_be_replayed_do_not_hold_the_others_back() {
    let db = TestDb::new().await;
    let c = db.client().await;
    let mut m = db.client().await;
    sume_inbox::db::migrate::migrate(&mut m).await.unwrap();
    // Signed, so they verify, but not JSON: they still name no job.
    let ts = unix_now();
    let sig = signature_header(&[Secret::new(SECRET)], ts, b"no");
    for i in 0..3 {
        c.execute(
            "insert into sume.dead_letters (dead_letter_id, reason, body, signed_at, signature, received_at)
             values ($1, 'not JSON', 'no', $2, $3, now() - interval '1 hour')",
            &[&format!("dl_junk_{i}"), &ts, &sig],
        )
        .await
        .unwrap();
    }
    readable_dead_letter(&db, "dl_good", "job_behind_junk").await;
    let (ok, out, err) = admin(&db, &["replay", "--dead-letters", "--limit", "2", "--json"]);
    assert!(
        !ok && err.contains("3 of 4 dead letters were not replayed"),
        "{out}{err}"
    );
    let results = json(&out);
    let ids: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["dl_junk_0", "dl_junk_1", "dl_junk_2", "dl_good"],
        "{out}"
    );
    assert_eq!(results[3]["ok"], true, "{out}");
    assert_eq!(
        db.scalar("select count(*) from sume.events where job_id = 'job_behind_junk'")
            .await,
        1
    );
}

/// `replay --dead-letters` exited 0 when every letter it read failed (and when some did): a
/// script took the run for a success. It now exits 1 and says on stderr how many failed, of
/// how many, and how many of them do not verify; a run where every letter was replayed, or
/// none was there, exits 0.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_letter_run_with_any_letter_not_replayed_exits_1_saying_how_many() {
    let db = TestDb::new().await;
    let c = db.client().await;
    let mut m = db.client().await;
    sume_inbox::db::migrate::migrate(&mut m).await.unwrap();
    let (ok, out, err) = admin(&db, &["replay", "--dead-letters"]);
    assert!(ok && out.contains("nothing to replay"), "{out}{err}");
    let ts = unix_now();
    let signed = signature_header(&[Secret::new(SECRET)], ts, b"no");
    let forged = signature_header(&[Secret::new("whsec_not_ours")], ts, b"no");
    for (id, sig) in [("dl_junk", &signed), ("dl_forged", &forged)] {
        c.execute(
            "insert into sume.dead_letters (dead_letter_id, reason, body, signed_at, signature)
             values ($1, 'not JSON', 'no', $2, $3)",
            &[&id, &ts, sig],
        )
        .await
        .unwrap();
    }
    let (ok, out, err) = admin(&db, &["replay", "--dead-letters"]);
    assert!(!ok, "every letter failed, yet 0: {out}{err}");
    assert!(
        err.contains("2 of 2 dead letters were not replayed")
            && err.contains("1 of them do not verify"),
        "{err}"
    );
    readable_dead_letter(&db, "dl_good", "job_among_junk").await;
    let (ok, out, err) = admin(&db, &["replay", "--dead-letters", "--json"]);
    assert!(!ok, "some letters failed, yet 0: {out}{err}");
    assert!(
        err.contains("2 of 3 dead letters were not replayed"),
        "{err}"
    );
    c.batch_execute(
        "delete from sume.dead_letters where dead_letter_id in ('dl_junk', 'dl_forged')",
    )
    .await
    .unwrap();
    readable_dead_letter(&db, "dl_fine", "job_alone").await;
    let (ok, out, err) = admin(&db, &["replay", "--dead-letters"]);
    assert!(ok && out.contains("dl_fine: stored"), "{out}{err}");
}

/// A role that may not write the audit log (granted its rights before the log existed) is
/// refused an operator's write before it is done, exit 78 saying what to grant: before, the
/// drop was made, then reported as failed, with no audit entry.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_that_could_not_be_audited_is_not_made() {
    let db = TestDb::new().await;
    let c = db.client().await;
    let mut m = db.client().await;
    sume_inbox::db::migrate::migrate(&mut m).await.unwrap();
    readable_dead_letter(&db, "dl_kept_unaudited", "job_unaudited").await;
    let role = format!("sume_rt_{}", rand::random::<u32>());
    c.batch_execute(&format!(
        "create role {role} login; grant usage on schema sume to {role};
         grant select, insert, update, delete on all tables in schema sume to {role};
         revoke insert on sume.audit_log from {role};"
    ))
    .await
    .unwrap();
    let (scheme, rest) = db.url.split_once("://").unwrap();
    let host = rest.split_once('@').map_or(rest, |(_, h)| h);
    let as_role = format!("{scheme}://{role}@{host}");
    for args in [
        &["dead-letters", "drop", "dl_kept_unaudited"][..],
        &["replay", "--dead-letters"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
            .args(args)
            .env("DATABASE_URL", &as_role)
            .env("SUME_WEBHOOK_SECRET", SECRET)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {said}");
        assert!(said.contains("may not write the audit log"), "{said}");
    }
    assert_eq!(
        db.scalar("select count(*) from sume.dead_letters where replayed_at is null")
            .await,
        1,
        "nothing dropped nor replayed"
    );
}

/// Runs the binary with settings that name no reachable database or Sume: what it answered
/// (exit code, stderr) can only come from reading its command line.
fn run_unreachable(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(args)
        .env("DATABASE_URL", "postgres://sume@127.0.0.1:1/nowhere")
        .env("SUME_WEBHOOK_SECRET", SECRET)
        .env("SUME_API_KEYS", "main:sk_test")
        .env("SUME_API_URL", "http://127.0.0.1:1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

/// A listing's `--limit` takes what one page of the admin API answers, a replay run's what the
/// API's replay takes, and an id is never empty: refused by the command line, with the range,
/// before any database or daemon is asked (here there is none to ask).
#[test]
fn limits_out_of_range_and_empty_ids_are_refused_with_the_range() {
    let refused = [
        (&["inbox", "ls", "--limit", "0"][..], "0 is not in 1..=1000"),
        (&["inbox", "ls", "--limit=-3"][..], "-3 is not in 1..=1000"),
        (
            &["dead-letters", "ls", "--limit", "1001"][..],
            "1001 is not in 1..=1000",
        ),
        (
            &["audit", "ls", "--limit", "99999999999"][..],
            "is not in 1..=1000",
        ),
        (
            &["replay", "--dead-letters", "--limit", "10001"][..],
            "10001 is not in 1..=10000",
        ),
        (
            &["jobs", "show", ""][..],
            "a value is required for '<JOB_ID>'",
        ),
        (&["replay", ""][..], "a value is required for '[EVENT_ID]'"),
        (
            &["dead-letters", "drop", "dl_1", ""][..],
            "a value is required for '<IDS>...'",
        ),
    ];
    for (args, said) in refused {
        let (code, stderr) = run_unreachable(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
}

/// An age or a span asked for on the command line is at most ten years: longer overflowed a
/// date (`reconcile --since` panicked, `inbox ls --older-than` was a database error). Refused as
/// a flag is, naming the option (exit 2), before anything is asked.
#[test]
fn durations_past_ten_years_are_refused_naming_the_option() {
    for (args, name) in [
        (
            &["inbox", "ls", "--older-than", "100000000y"][..],
            "--older-than",
        ),
        (
            &["inbox", "ls", "--older-than", "3651d"][..],
            "--older-than",
        ),
        (&["reconcile", "--since", "100000000y"][..], "--since"),
        (&["reconcile", "--max-wait", "3651d"][..], "--max-wait"),
    ] {
        let (code, stderr) = run_unreachable(args);
        assert_eq!(code, Some(2), "a flag's value: {args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        let said = format!("{name}: ");
        assert!(stderr.contains(&said), "{args:?}: {stderr}");
        assert!(
            stderr.contains("the longest it takes"),
            "{args:?}: {stderr}"
        );
    }
}

/// Against a schema an older release left (a migration of this version missing), or none, the
/// admin commands say to migrate: before, `stats` failed on a column the older schema lacks,
/// and `reconcile` on a table that was not there.
#[tokio::test(flavor = "multi_thread")]
async fn admin_commands_on_a_schema_behind_this_version_say_to_migrate() {
    let db = TestDb::new().await;
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
            .args(args)
            .env("DATABASE_URL", &db.url)
            .env("SUME_API_KEYS", "main:sk_test")
            .env("SUME_API_URL", "http://127.0.0.1:9/v1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, said) = run(&["reconcile", "--since", "1h"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("run `sume-inbox migrate`"), "{said}");
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    let latest = sume_inbox::db::migrate::latest();
    c.execute(
        "delete from sume.schema_migrations where version = $1",
        &[&latest],
    )
    .await
    .unwrap();
    for args in [&["stats"][..], &["reconcile", "--since", "1h"][..]] {
        let (code, said) = run(args);
        assert_eq!(code, Some(1), "{args:?}: {said}");
        assert!(
            said.contains(&format!("lacks this version's migrations [{latest}]")),
            "{args:?}: {said}"
        );
    }
}
