//! A job's whole story: the poll history (a ring of the latest calls per job, written by the
//! poll pass, gone with the job), the console's timeline with each delivery's signed-at and
//! each poll's answer (Sume's text, escaped), the replay of a set-aside event from the console,
//! and a migration that lands after a higher-numbered one.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use reqwest::header::LOCATION;
use reqwest::StatusCode;
use serde_json::{json, Value};
use sume_inbox::db::POLL_HISTORY;
use sume_sim::RunningSim;

use crate::console::{csrf_of, Console, OPERATOR};
use crate::support::*;
use crate::sweep::{clocked_config, create, register, sim_config, Sweep, MAIN_KEY};

const HOSTILE: &str = "<script>alert(1)</script>";

/// The job's kept calls: (count, lowest seq, highest seq, distinct slots).
async fn history(db: &TestDb, job_id: &str) -> (i64, i64, i64, i64) {
    let row = db
        .client()
        .await
        .query_one(
            "select count(*), coalesce(min(seq), 0), coalesce(max(seq), 0),
                    count(distinct slot)
             from sume.job_polls where job_id = $1",
            &[&job_id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

/// Moves the sweep's clock past the longest backoff step (POLL_MAX_INTERVAL, +20% jitter).
fn past_next_poll(sweep: &Sweep) {
    sweep.advance(sweep.config.poll_max_interval.mul_f64(1.25));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_keeps_its_latest_polls_and_they_go_with_it() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    // Each job read by itself (a walk of the list leaves the unreadable one to such a read).
    let one_by_one = sume_inbox::config::SweepConfig {
        list_walks: false,
        ..clocked_config()
    };
    let sweep = Sweep::new(&db, &sim, one_by_one).await;
    let long = json!({"duration_ms": 3_600_000, "queued_ms": 0});
    let (busy, quiet) = (
        create(&http, &sim, MAIN_KEY, None, long.clone()).await,
        create(&http, &sim, MAIN_KEY, None, long).await,
    );
    register(&db, &busy).await;
    register(&db, &quiet).await;
    // Past POLL_AFTER from the rows' commit (the sweep's clock started before it).
    sweep.advance(sweep.config.poll_after + Duration::from_secs(60));
    let polls = POLL_HISTORY + 5;
    for n in 1..=polls {
        let stats = sweep.poll_once().await;
        assert_eq!(stats.still_open, if n == 1 { 2 } else { 1 }, "poll {n}");
        assert_eq!(history(&db, &busy).await.2, n as i64, "one row per call");
        if n == 1 {
            // The quiet job is polled once and then kept out of the way (far in the future).
            db.client()
                .await
                .execute(
                    "update sume.jobs set next_poll_at = 'infinity' where job_id = $1",
                    &[&quiet],
                )
                .await
                .unwrap();
        }
        past_next_poll(&sweep);
    }
    let first_kept = (polls - POLL_HISTORY + 1) as i64;
    assert_eq!(
        history(&db, &busy).await,
        (
            POLL_HISTORY as i64,
            first_kept,
            polls as i64,
            POLL_HISTORY as i64
        ),
        "exactly the latest {POLL_HISTORY}, one per slot"
    );
    assert_eq!(history(&db, &quiet).await, (1, 1, 1, 1));
    the_detail_shows_the_latest(&db, &busy, polls, first_kept).await;
    // Removing the job (JOB_RETENTION, or the application) removes its history.
    db.client()
        .await
        .execute("delete from sume.jobs where job_id = $1", &[&busy])
        .await
        .unwrap();
    assert_eq!(history(&db, &busy).await.0, 0);
    assert_eq!(history(&db, &quiet).await.0, 1);
}

/// The job's detail and `job show` hold the latest POLL_HISTORY polls of `polls`, in order.
async fn the_detail_shows_the_latest(db: &TestDb, busy: &str, polls: usize, first_kept: i64) {
    let store = sume_inbox::db::Store::new(&db.url, 2).unwrap();
    let detail = store.job_detail(busy).await.unwrap();
    assert_eq!(detail.polls.len(), POLL_HISTORY);
    assert_eq!(detail.polls[0].seq, first_kept);
    assert!(detail
        .polls
        .windows(2)
        .all(|w| w[0].polled_at < w[1].polled_at));
    assert!(detail
        .polls
        .iter()
        .all(|p| p.answer == "200 running" && p.key_name == "main"));
    let (text, known) = sume_inbox::cli::render::render_job_detail(&detail, false);
    assert!(known);
    assert!(
        text.contains(&format!("polls (latest {POLL_HISTORY}):")),
        "{text}"
    );
    assert!(
        text.contains(&format!("  #{polls} "))
            && !text.contains(&format!("  #{} ", first_kept - 1)),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_timeline_shows_each_polls_answer_escaped_and_each_deliverys_signed_at() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    let overrides = json!({"duration_ms": 3_600_000, "queued_ms": 0, "working_status": HOSTILE});
    let job = create(&http, &sim, MAIN_KEY, None, overrides).await;
    register(&db, &job).await;
    // Past POLL_AFTER from the rows' commit (the sweep's clock started before it).
    sweep.advance(sweep.config.poll_after + Duration::from_secs(60));
    assert_eq!(sweep.poll_once().await.still_open, 1);
    // A delivery signed a minute ago (within WEBHOOK_TOLERANCE), stored now.
    let mut d = Delivery::status(&job, "running");
    d.timestamp = unix_now() - 60;
    let hook = console.daemon.url("/webhooks/sume");
    assert_eq!(d.send(&console.http, &hook).await.status(), 204);
    console.sign_in().await;
    let (s, _, page) = console.get(&format!("/console/jobs?q={job}")).await;
    assert_eq!(s, 200);
    assert!(!page.to_ascii_lowercase().contains("<script"), "{page}");
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
    assert!(
        page.contains(&format!(
            "key <code>main</code>: <strong class=\"answer\">200 {escaped}</strong>"
        )),
        "the poll and its answer: {page}"
    );
    let signed: DateTime<Utc> = Utc.timestamp_opt(d.timestamp, 0).unwrap();
    let signed = signed.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string();
    assert!(page.contains(&format!("signed at {signed}")), "{page}");
    // In time order: the row, the delivery stored now, the poll (on the sweep's clock, moved
    // POLL_AFTER ahead).
    let row_at = page.find("row committed").unwrap();
    let stored_at = page.find("delivery stored").unwrap();
    let poll_at = page.find(">poll<").expect("a poll entry");
    assert!(row_at < stored_at && stored_at < poll_at, "{page}");
    // The admin API's job detail carries the same history.
    let r = console
        .http
        .get(console.daemon.admin_url(&format!("/v1/jobs/{job}/detail")))
        .bearer_auth(OPERATOR)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["polls"][0]["answer"], format!("200 {HOSTILE}"));
    assert_eq!(v["polls"][0]["seq"], 1);
    assert_eq!(
        v["events"][0]["signed_at"].as_str().map(|s| &s[..19]),
        Some(
            &*Utc
                .timestamp_opt(d.timestamp, 0)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%S")
                .to_string()
        )
    );
    console.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_set_aside_event_is_replayed_from_the_console_only_with_its_csrf_token() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    let job = "job_not_ours";
    let event = set_aside_after_the_grace(&db, &sweep, &console, job).await;
    console.sign_in().await;
    let (_, _, page) = console.get("/console/set-aside").await;
    assert!(
        page.contains(&format!("name=\"event_id\" value=\"{event}\"")),
        "{page}"
    );
    assert!(
        page.contains("main</code>: 404"),
        "every key's answer: {page}"
    );
    let csrf = csrf_of(&page);
    a_replay_without_the_token_changes_nothing(&db, &console, &event).await;
    let (s, h) = console
        .post(
            "/console/set-aside/replay",
            &[("csrf", &csrf), ("event_id", &event)],
        )
        .await;
    assert_eq!(
        (s, h[LOCATION].to_str().unwrap()),
        (StatusCode::SEE_OTHER, "/console/jobs?q=job_not_ours")
    );
    back_in_the_inbox_and_audited(&db, &event, job).await;
    // An id that names nothing is answered so, and recorded as a replay that failed, as the
    // admin API and `sume-inbox replay` record it.
    let (s, _) = console
        .post(
            "/console/set-aside/replay",
            &[("csrf", &csrf), ("event_id", HOSTILE)],
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(db.scalar(REPLAYS).await, 2);
    console.daemon.stop().await;
}

const REPLAYS: &str = "select count(*) from sume.audit_log where action = 'replay_event'";
const SET_ASIDE: &str = "select count(*) from sume.events where set_aside_at is not null";

/// A delivery for a job no key of ours can read: after INBOX_GRACE it is set aside. Answers
/// its event id.
async fn set_aside_after_the_grace(
    db: &TestDb,
    sweep: &Sweep,
    console: &Console,
    job: &str,
) -> String {
    let d = Delivery::completed(job);
    let hook = console.daemon.url("/webhooks/sume");
    assert_eq!(d.send(&console.http, &hook).await.status(), 204);
    sweep.advance(sweep.config.inbox_grace * 2);
    assert_eq!(sweep.check_once().await.events_set_aside, 1);
    db.client()
        .await
        .query_one(
            "select event_id from sume.events where set_aside_at is not null",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// Without a token field, or with a forged one, the replay is refused and nothing changes.
async fn a_replay_without_the_token_changes_nothing(db: &TestDb, console: &Console, event: &str) {
    let (s, _) = console
        .post("/console/set-aside/replay", &[("event_id", event)])
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "no token field");
    let (s, _) = console
        .post(
            "/console/set-aside/replay",
            &[("csrf", "forged"), ("event_id", event)],
        )
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(db.scalar(REPLAYS).await, 0);
    assert_eq!(db.scalar(SET_ASIDE).await, 1);
}

/// Back in the inbox, its check forgotten: Sume is asked about the job again. The audit log
/// says who replayed it from which session, and what came of it.
async fn back_in_the_inbox_and_audited(db: &TestDb, event: &str, job: &str) {
    assert_eq!(db.scalar(SET_ASIDE).await, 0);
    assert_eq!(db.scalar("select count(*) from sume.inbox_checks").await, 0);
    let row = db
        .client()
        .await
        .query_one(
            "select actor, detail from sume.audit_log where action = 'replay_event'",
            &[],
        )
        .await
        .unwrap();
    assert!(row
        .get::<_, String>(0)
        .starts_with("console:operator (session "));
    let detail: Value = row.get(1);
    assert_eq!(detail["event_id"], event);
    assert_eq!(
        detail["result"]["result"],
        format!("back in the inbox, waiting for job {job}'s row")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_migration_that_lands_after_a_higher_numbered_one_is_still_applied() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    // As if migration 8 had been merged after 10 was applied: 10 is there, 8 is not.
    c.batch_execute(
        "delete from sume.schema_migrations where version = 8;
         drop table sume.audit_log;",
    )
    .await
    .unwrap();
    // The highest version is this binary's, yet the schema is not current for it: readiness
    // and a start without migrating say which one is missing.
    let store = sume_inbox::db::Store::new(&db.url, 1).unwrap();
    assert_eq!(
        store.schema_migrations_version().await.unwrap(),
        sume_inbox::db::migrate::latest()
    );
    assert_eq!(store.schema_migrations_missing().await.unwrap(), vec![8]);
    let applied = sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    assert_eq!(applied, vec![8]);
    assert_eq!(db.scalar("select count(*) from sume.audit_log").await, 0);
    assert!(sume_inbox::db::migrate::migrate(&mut c)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_status_no_database_can_store_fails_its_own_poll_not_the_pass() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    // Each job read by itself (a walk of the list leaves the unreadable one to such a read).
    let one_by_one = sume_inbox::config::SweepConfig {
        list_walks: false,
        ..clocked_config()
    };
    let sweep = Sweep::new(&db, &sim, one_by_one).await;
    let long = json!({"duration_ms": 3_600_000, "queued_ms": 0});
    let mut nul = long.clone();
    nul["working_status"] = json!("running\u{0}");
    let bad = create(&http, &sim, MAIN_KEY, None, nul).await;
    let good = create(&http, &sim, MAIN_KEY, None, long).await;
    register(&db, &bad).await;
    register(&db, &good).await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(60));
    // A NUL cannot be stored as text: the answer is unreadable, the job polled again later.
    let stats = sweep.poll_once().await;
    assert_eq!((stats.still_open, stats.requests), (2, 2));
    let store = sume_inbox::db::Store::new(&db.url, 1).unwrap();
    let answer = |d: sume_inbox::db::JobDetail| d.polls[0].answer.clone();
    assert_eq!(
        answer(store.job_detail(&bad).await.unwrap()),
        "200 with a NUL character in the job's id or status"
    );
    assert_eq!(
        answer(store.job_detail(&good).await.unwrap()),
        "200 running"
    );
    assert_eq!(job_state(&db, &bad).await.as_deref(), Some("open"));
}

/// A status no spelling of this version knows (`thinking`) is read as in flight, and counted
/// where it was read: a read of the job, a page of the list, a webhook. Known spellings are not.
#[tokio::test(flavor = "multi_thread")]
async fn a_status_this_version_does_not_know_is_counted_where_it_was_read() {
    use sume_inbox::metrics::{Metrics, StatusSource, StatusSourceLabels};
    let counted = |m: &Metrics, source| {
        m.unknown_statuses
            .get_or_create(&StatusSourceLabels { source })
            .get()
    };
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let long = json!({"duration_ms": 3_600_000, "queued_ms": 0});
    let mut odd = long.clone();
    odd["working_status"] = json!("thinking");
    let thinking = create(&http, &sim, MAIN_KEY, None, odd).await;
    let running = create(&http, &sim, MAIN_KEY, None, long).await;
    let one_by_one = sume_inbox::config::SweepConfig {
        list_walks: false,
        ..clocked_config()
    };
    let sweep = Sweep::new(&db, &sim, one_by_one).await;
    register(&db, &thinking).await;
    register(&db, &running).await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(60));
    let stats = sweep.poll_once().await;
    assert_eq!((stats.still_open, stats.requests), (2, 2), "{stats:?}");
    assert_eq!(counted(&sweep.metrics, StatusSource::status_read), 1);

    let store = sume_inbox::db::Store::new(&db.url, 1).unwrap();
    let client = sume_wire::StatusClient::new(&sim.api_url(), Duration::from_secs(5)).unwrap();
    let reader = sume_inbox::sume_api::StatusReader::new(
        store,
        sweep.metrics.clone(),
        client,
        vec![crate::sweep::main_key()],
        sweep.config.read_rate,
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let page = reader
        .list_page(&crate::sweep::main_key(), None, deadline)
        .await
        .unwrap();
    assert!(
        matches!(page, Some(sume_inbox::sume_api::ListAnswer::Page(ref p)) if p.data.len() == 2),
        "{page:?}"
    );
    assert_eq!(counted(&sweep.metrics, StatusSource::list), 1);

    let daemon = Daemon::start(config(&db.url)).await;
    let hook = daemon.url("/webhooks/sume");
    for status in ["thinking", "running", "completed"] {
        let r = Delivery::status(&format!("job_hook_{status}"), status)
            .send(&http, &hook)
            .await;
        assert_eq!(r.status(), StatusCode::NO_CONTENT, "{status}");
    }
    let from_webhooks = r#"sume_inbox_unknown_statuses_total{source="webhook"}"#;
    assert_eq!(crate::port::metric(&daemon, from_webhooks).await, 1.0);
    daemon.stop().await;
}
