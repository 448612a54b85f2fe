//! `reconcile` against the simulator: after a restore lost the events, every registered job
//! Sume lists as terminal is closed through the normal fold, within the read budget, and a
//! second run changes nothing.

use std::time::Duration;

use serde_json::json;
use sume_inbox::config::Rate;
use sume_inbox::db::Store;
use sume_inbox::operations::reconciliation::Reconcile;
use sume_sim::{RequestsAnswer, RunningSim};

use crate::support::*;
use crate::sweep::{
    create, main_key, migrate, register, sim_config, sim_get, wait_ended, MAIN_KEY,
};

fn reconcile(db: &TestDb, sim: &RunningSim, daily: u32) -> Reconcile {
    reconcile_at(db, &sim.api_url(), daily)
}

/// A run against what answers at `api_url`, two jobs a page, within `daily` reads.
fn reconcile_at(db: &TestDb, api_url: &str, daily: u32) -> Reconcile {
    let store = Store::new(&db.url, 2).unwrap();
    let client = sume_wire::StatusClient::new(api_url, Duration::from_secs(5)).unwrap();
    let rate = Rate {
        count: 1000,
        per: Duration::from_secs(1),
    };
    Reconcile::new(store, client, vec![main_key()], rate, daily).with_page_size(2)
}

async fn list_reads(http: &reqwest::Client, sim: &RunningSim) -> usize {
    let log: RequestsAnswer = sim_get(http, sim, "requests?key=main").await;
    log.requests
        .iter()
        .filter(|r| r.path.ends_with("/jobs"))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn terminal_jobs_sume_lists_are_closed_once_within_the_budget() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let jobs = LostJobs::create(&db, &http, &sim).await;
    one_read_a_day_stops_the_run_after_one_page(&db, &http, &sim).await;

    let full = reconcile(&db, &sim, 1000)
        .run(Duration::from_secs(6 * 3600), Duration::from_secs(10))
        .await
        .unwrap();
    assert!(full.complete(), "{full:?}");
    let key = &full.keys[0];
    assert_eq!((key.listed, key.terminal), (4, 3), "{key:?}");
    assert_eq!(key.not_registered, 1, "{key:?}");
    assert_eq!((key.closed, key.already_closed), (2, 0), "{key:?}");
    jobs.are_closed_as_sume_says(&db).await;

    let again = reconcile(&db, &sim, 1000)
        .run(Duration::from_secs(6 * 3600), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        (again.keys[0].closed, again.keys[0].already_closed),
        (0, 2),
        "{again:?}"
    );
    assert_eq!(
        db.scalar("select count(*) from sume.disagreements").await,
        0
    );
}

/// Jobs whose webhooks were dropped, as if their events were lost with the restore: two
/// registered and ended, one registered and running, one ended and never registered.
struct LostJobs {
    done: String,
    failed: String,
    running: String,
    stranger: String,
}

impl LostJobs {
    async fn create(db: &TestDb, http: &reqwest::Client, sim: &RunningSim) -> LostJobs {
        let quick = |outcome: &str| json!({"drop": true, "duration_ms": 1, "outcome": outcome});
        let done = create(http, sim, MAIN_KEY, None, quick("completed")).await;
        let failed = create(http, sim, MAIN_KEY, None, quick("failed")).await;
        let running = create(
            http,
            sim,
            MAIN_KEY,
            None,
            json!({"drop": true, "duration_ms": 3_600_000}),
        )
        .await;
        let stranger = create(http, sim, MAIN_KEY, None, quick("canceled")).await;
        wait_ended(http, sim, &[done.clone(), failed.clone(), stranger.clone()]).await;
        for id in [&done, &failed, &running] {
            register(db, id).await;
        }
        LostJobs {
            done,
            failed,
            running,
            stranger,
        }
    }

    /// The registered jobs that ended are closed by poll as Sume says; the others are as they were.
    async fn are_closed_as_sume_says(&self, db: &TestDb) {
        assert_eq!(
            job_state(db, &self.done).await.as_deref(),
            Some("completed")
        );
        assert_eq!(job_state(db, &self.failed).await.as_deref(), Some("failed"));
        assert_eq!(job_state(db, &self.running).await.as_deref(), Some("open"));
        assert_eq!(
            job_state(db, &self.stranger).await,
            None,
            "reconcile registers nothing"
        );
        let by_poll = db
            .scalar("select count(*) from sume.jobs where closed_by = 'poll'")
            .await;
        assert_eq!(by_poll, 2);
    }
}

/// A daily allowance of one read: one page, then the run stops and says so.
async fn one_read_a_day_stops_the_run_after_one_page(
    db: &TestDb,
    http: &reqwest::Client,
    sim: &RunningSim,
) {
    let short = reconcile(db, sim, 1)
        .run(Duration::from_secs(6 * 3600), Duration::from_secs(1))
        .await
        .unwrap();
    assert!(!short.complete(), "{short:?}");
    assert_eq!(short.keys[0].pages, 1);
    assert!(
        short.keys[0]
            .stopped
            .as_deref()
            .unwrap_or("")
            .contains("budget"),
        "{short:?}"
    );
    assert_eq!(
        list_reads(http, sim).await,
        1,
        "nothing beyond the budget was sent"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_created_before_since_are_not_read() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let done = create(
        &http,
        &sim,
        MAIN_KEY,
        None,
        json!({"drop": true, "duration_ms": 1}),
    )
    .await;
    wait_ended(&http, &sim, std::slice::from_ref(&done)).await;
    register(&db, &done).await;
    // Everything Sume lists was created before "the last millisecond".
    let report = reconcile(&db, &sim, 1000)
        .run(Duration::from_millis(1), Duration::from_secs(10))
        .await
        .unwrap();
    assert!(report.complete());
    assert_eq!(
        (report.keys[0].listed, report.keys[0].closed),
        (0, 0),
        "{report:?}"
    );
    assert_eq!(job_state(&db, &done).await.as_deref(), Some("open"));
}

#[test]
fn without_a_key_reconcile_refuses_to_start_naming_the_setting() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(["reconcile", "--since", "6h"])
        .env_clear()
        .env("DATABASE_URL", "postgres://u:pw@127.0.0.1:1/db")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SUME_API_KEYS"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(["reconcile", "--since", "six hours"])
        .env_clear()
        .env("DATABASE_URL", "postgres://u:pw@127.0.0.1:1/db")
        .env("SUME_API_KEYS", "main:sk_secret_value")
        .output()
        .unwrap();
    // A flag's value, refused as a flag is.
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--since") && !err.contains("sk_secret_value"),
        "{err}"
    );
}

#[test]
fn reconcile_takes_db_pooler_and_refuses_a_value_it_does_not_know() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(["reconcile", "--since", "6h"])
        .env_clear()
        .env("DATABASE_URL", "postgres://u:pw@127.0.0.1:1/db")
        .env("SUME_API_KEYS", "main:sk_secret_value")
        .env("DB_POOLER", "statement")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("DB_POOLER"), "{err}");
}

/// A list whose cursor does not move on: the run stops at the first cursor it had seen before
/// and says so, after two reads, instead of reading the same page until `--max-wait` or the
/// day's budget (a thousand reads here) runs out.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_that_does_not_move_on_stops_the_run_saying_so() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let mut config = sim_config();
    config.faults.list_cursor_stuck = 1.0;
    let sim = RunningSim::start(config).await.unwrap();
    let http = reqwest::Client::new();
    LostJobs::create(&db, &http, &sim).await;
    let report = reconcile(&db, &sim, 1000)
        .run(Duration::from_secs(6 * 3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!report.complete(), "{report:?}");
    let stopped = report.keys[0].stopped.as_deref().unwrap_or("");
    assert!(stopped.contains("cursor it had given before"), "{report:?}");
    assert_eq!(report.keys[0].pages, 2, "{report:?}");
    assert_eq!(list_reads(&http, &sim).await, 2);
}

/// Sume saying no read remains for a minute (longer than `--max-wait`): the run stops saying
/// so, not that this fleet's own budget ran out (a 429 is said the same way, with its request
/// id).
#[tokio::test(flavor = "multi_thread")]
async fn sumes_own_limit_outlasting_max_wait_is_reported_as_sume_refusing() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let mut config = sim_config();
    config.limits.reads_per_window = 1;
    config.limits.rate_window = Duration::from_secs(60);
    let sim = RunningSim::start(config).await.unwrap();
    let http = reqwest::Client::new();
    LostJobs::create(&db, &http, &sim).await;
    let report = reconcile(&db, &sim, 1000)
        .run(Duration::from_secs(6 * 3600), Duration::from_secs(2))
        .await
        .unwrap();
    assert!(!report.complete(), "{report:?}");
    let stopped = report.keys[0].stopped.as_deref().unwrap_or("");
    assert!(
        stopped.starts_with("Sume said no read remains"),
        "{report:?}"
    );
    assert!(stopped.contains("--max-wait"), "{report:?}");
}

/// A list page that says more follows but gives no cursor: the run cannot read the rest, and
/// says so (exit 1 from the command); before, it reported the window covered.
#[tokio::test(flavor = "multi_thread")]
async fn a_page_saying_more_follows_without_a_cursor_is_not_a_complete_run() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let app = axum::Router::new().fallback(|| async {
        axum::Json(json!({"data": [], "has_more": true, "next_cursor": null}))
    });
    let api = stand_in_api(app).await;
    let report = reconcile_at(&db, &api, 1000)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!report.complete(), "{report:?}");
    let stopped = report.keys[0].stopped.as_deref().unwrap_or("");
    assert!(stopped.contains("gave no cursor"), "{report:?}");
}

/// A page listing one job twice, `failed` then `completed` (and the first entry again): the
/// first closes it, the second is a recorded disagreement, the repeat says nothing new; before,
/// the second was dropped without a word and counted as a job not registered here.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_listed_twice_saying_two_things_is_a_recorded_disagreement() {
    let db = TestDb::new().await;
    migrate(&db).await;
    register(&db, "job_listed_twice").await;
    let page = json!({"data": [
        {"id": "job_listed_twice", "status": "failed"},
        {"id": "job_listed_twice", "status": "failed"},
        {"id": "job_listed_twice", "status": "completed"},
        {"id": "job_never_registered", "status": "completed"},
    ], "has_more": false});
    let app = axum::Router::new().fallback(move || {
        let page = page.clone();
        async move { axum::Json(page) }
    });
    let api = stand_in_api(app).await;
    let report = reconcile_at(&db, &api, 1000)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    let key = &report.keys[0];
    assert_eq!(
        (
            key.closed,
            key.disagreements,
            key.not_registered,
            key.already_closed
        ),
        (1, 1, 1, 0),
        "{report:?}"
    );
    assert_eq!(
        job_state(&db, "job_listed_twice").await.as_deref(),
        Some("failed")
    );
    assert_eq!(
        db.scalar("select count(*) from sume.disagreements").await,
        1
    );
}

/// A stand-in for Sume's list answering whatever `page` makes of the `cursor` asked with (none
/// for the first page) and the count of pages asked for so far.
async fn list_stand_in(
    page: impl Fn(Option<String>, usize) -> serde_json::Value + Clone + Send + Sync + 'static,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    let app = axum::Router::new().fallback(
        move |axum::extract::Query(q): axum::extract::Query<
            std::collections::HashMap<String, String>,
        >| {
            let n = count.fetch_add(1, Ordering::SeqCst) + 1;
            let body = page(q.get("cursor").cloned(), n);
            async move { axum::Json(body) }
        },
    );
    (stand_in_api(app).await, asked)
}

/// A list that never ends: empty pages, each saying more follows with a cursor never given
/// before. The run stops after a few such pages, saying the list does not move on; before, it
/// read on until the day's budget was spent (a thousand pages here; the fleet's whole day with
/// `SUME_READ_DAILY`'s), printing nothing.
#[tokio::test(flavor = "multi_thread")]
async fn an_endless_list_of_empty_pages_stops_the_run_saying_it_does_not_move_on() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let (api, asked) = list_stand_in(|_, n| {
        json!({"object": "list", "data": [], "has_more": true, "next_cursor": format!("c{n}")})
    })
    .await;
    let report = reconcile_at(&db, &api, 1000)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!report.complete(), "{report:?}");
    let key = &report.keys[0];
    let stopped = key.stopped.as_deref().unwrap_or("");
    assert!(
        stopped.contains("no job it had not shown before"),
        "{report:?}"
    );
    assert_eq!(key.pages, 5, "{report:?}");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 5);
}

/// Jobs whose `created_at` is Unix seconds (an integer, or with a fraction): the walk stops at
/// the first one created before `--since`, as with RFC 3339. Before, only an RFC 3339 string
/// was read: five pages of jobs from 2020 were all listed as created since, and the oldest
/// registered one closed.
#[tokio::test(flavor = "multi_thread")]
async fn created_at_in_unix_seconds_ends_the_walk_at_since() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let now = chrono::Utc::now().timestamp();
    let in_2020 = 1_590_000_000_i64;
    for id in ["job_now_float", "job_now_int", "job_2020_a", "job_2020_b"] {
        register(&db, id).await;
    }
    let (api, asked) = list_stand_in(move |cursor, _| match cursor.as_deref() {
        None => json!({"object": "list", "data": [
            {"id": "job_now_float", "status": "completed", "created_at": now as f64 - 0.25},
            {"id": "job_now_int", "status": "failed", "created_at": now - 60},
            {"id": "job_2020_a", "status": "completed", "created_at": in_2020},
        ], "has_more": true, "next_cursor": "p2"}),
        Some(c) => {
            let n: u32 = c[1..].parse().unwrap();
            json!({"object": "list", "data": [
                {"id": format!("job_2020_{n}"), "status": "completed", "created_at": in_2020 - i64::from(n)},
                {"id": "job_2020_b", "status": "completed", "created_at": in_2020 - 100},
            ], "has_more": n < 5, "next_cursor": format!("p{}", n + 1)})
        }
    })
    .await;
    let report = reconcile_at(&db, &api, 1000)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(report.complete(), "{report:?}");
    let key = &report.keys[0];
    assert_eq!((key.pages, key.listed, key.closed), (1, 2, 2), "{report:?}");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(
        job_state(&db, "job_now_int").await.as_deref(),
        Some("failed")
    );
    for old in ["job_2020_a", "job_2020_b"] {
        assert_eq!(job_state(&db, old).await.as_deref(), Some("open"), "{old}");
    }
}

/// A list that never reaches `--since`: every page new jobs, half of them created now, half
/// with a `created_at` in milliseconds (no time, read as seconds). The run stops at
/// `--max-pages`, saying what it did not look at and why the cutoff could not be found, and the
/// command exits 1 printing it; before, it read on until the day's budget was spent.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_that_never_reaches_since_stops_at_max_pages_saying_so() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let now = chrono::Utc::now();
    let (api, asked) = list_stand_in(move |_, n| {
        json!({"object": "list", "data": [
            {"id": format!("job_now_{n}"), "status": "running", "created_at": now.to_rfc3339()},
            {"id": format!("job_ms_{n}"), "status": "queued", "created_at": now.timestamp_millis()},
        ], "has_more": true, "next_cursor": format!("c{n}")})
    })
    .await;
    let report = reconcile_at(&db, &api, 1000)
        .with_max_pages(20)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!report.complete(), "{report:?}");
    let key = &report.keys[0];
    assert_eq!(
        (key.pages, key.listed, key.undated),
        (20, 40, 20),
        "{report:?}"
    );
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 20);
    let stopped = key.stopped.as_deref().unwrap_or("");
    assert!(
        stopped.starts_with("read 20 page(s), the most --max-pages lets it"),
        "{stopped}"
    );
    let ms = now.timestamp_millis().to_string();
    assert!(
        stopped.contains(&format!(
            "20 of the 40 jobs listed had a created_at not read as a time, such as {ms}"
        )),
        "{stopped}"
    );

    let keys = format!("main:{MAIN_KEY}");
    let url = db.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
            .args(["reconcile", "--since", "1h", "--max-pages", "3"])
            .env_clear()
            .env("DATABASE_URL", url)
            .env("SUME_API_URL", api)
            .env("SUME_API_KEYS", keys)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("3 page(s), 6 job(s) listed (3 with a created_at not read as a time"),
        "{text}"
    );
    assert!(text.contains("STOPPED EARLY: read 3 page(s)"), "{text}");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 23);
}

/// Jobs listed without a `created_at`, or with one that is no time: looked at all the same
/// (what Sume reports terminal is closed), counted, and the walk goes on to the list's end.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_without_a_readable_created_at_are_closed_and_counted() {
    let db = TestDb::new().await;
    migrate(&db).await;
    for id in ["job_no_date", "job_bad_date"] {
        register(&db, id).await;
    }
    let (api, _) = list_stand_in(|_, _| {
        json!({"object": "list", "data": [
            {"id": "job_no_date", "status": "completed"},
            {"id": "job_bad_date", "status": "failed", "created_at": "last tuesday"},
        ], "has_more": false})
    })
    .await;
    let report = reconcile_at(&db, &api, 1000)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(report.complete(), "{report:?}");
    let key = &report.keys[0];
    assert_eq!(
        (key.listed, key.undated, key.closed),
        (2, 2, 2),
        "{report:?}"
    );
    assert_eq!(key.undated_example.as_deref(), Some("none"));
    assert_eq!(
        job_state(&db, "job_bad_date").await.as_deref(),
        Some("failed")
    );
}

/// A list that comes oldest first (Sume's docs fix no order): the first page holds only jobs
/// from 2020, the jobs of the last hour come after. The walk sees the order, reads on to the
/// list's end and closes the registered job that ended, saying the list is not newest first;
/// before, the first old job ended the walk, reported complete with nothing listed.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_seen_oldest_first_is_read_on_past_since_saying_so() {
    let db = TestDb::new().await;
    migrate(&db).await;
    register(&db, "job_recent").await;
    let now = chrono::Utc::now().timestamp();
    let (api, asked) = list_stand_in(move |cursor, _| match cursor {
        None => json!({"object": "list", "data": [
            {"id": "job_2020_a", "status": "completed", "created_at": "2020-05-20T18:40:00Z"},
            {"id": "job_2020_b", "status": "completed", "created_at": "2020-05-20T18:50:00Z"},
        ], "has_more": true, "next_cursor": "job_2020_b"}),
        Some(_) => json!({"object": "list", "data": [
            {"id": "job_recent", "status": "completed", "created_at": now - 60},
        ], "has_more": false}),
    })
    .await;
    let report = reconcile_at(&db, &api, 1000)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(report.complete(), "{report:?}");
    let key = &report.keys[0];
    assert_eq!((key.pages, key.listed, key.closed), (2, 1, 1), "{report:?}");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    let order = key.out_of_order.as_deref().unwrap_or("");
    assert!(
        order.contains("listed after one created at 2020-05-20T18:40:00"),
        "{report:?}"
    );
    assert_eq!(
        job_state(&db, "job_recent").await.as_deref(),
        Some("completed")
    );
}

/// A page on which one job's `result` nests 200 deep once did not read as a page: the run
/// stopped there, its jobs unread. The page now reads: that job closes without its result, and
/// the run goes on to the next page.
#[tokio::test(flavor = "multi_thread")]
async fn a_page_holding_an_odd_result_is_read_and_the_run_goes_on() {
    let db = TestDb::new().await;
    migrate(&db).await;
    for id in ["job_r1", "job_r2", "job_r3"] {
        register(&db, id).await;
    }
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let first = format!(
        r#"{{"data":[{{"id":"job_r1","status":"completed","result":{deep}}},
            {{"id":"job_r2","status":"completed","result":{{"url":"u"}}}}],
            "has_more":true,"next_cursor":"job_r2"}}"#
    );
    let second = r#"{"data":[{"id":"job_r3","status":"failed"}],"has_more":false}"#;
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let first = first.clone();
        async move {
            use axum::response::IntoResponse;
            let body = match uri.query().unwrap_or_default().contains("cursor=") {
                true => second.to_owned(),
                false => first,
            };
            ([("content-type", "application/json")], body).into_response()
        }
    });
    let api = stand_in_api(app).await;
    let report = reconcile_at(&db, &api, 1000)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(report.complete(), "{report:?}");
    assert_eq!(
        (report.keys[0].pages, report.keys[0].closed),
        (2, 3),
        "{report:?}"
    );
    for (job, state) in [
        ("job_r1", "completed"),
        ("job_r2", "completed"),
        ("job_r3", "failed"),
    ] {
        assert_eq!(job_state(&db, job).await.as_deref(), Some(state), "{job}");
    }
    let kept = db
        .scalar("select count(*) from sume.jobs where result is not null")
        .await;
    assert_eq!(kept, 1, "only job_r2's result");
}

/// A page of the list holding one entry that is no job (`null`, an object with no `status` or
/// a `null` one) did not read at all: the run stopped there, "Sume answered 200 with a body
/// that does not read as a page of jobs", exit 1, every job on that page and after it not
/// looked at. The entry is left out and counted, the page and the pages after it read.
#[tokio::test(flavor = "multi_thread")]
async fn a_page_holding_an_entry_that_is_no_job_is_read_without_it() {
    let db = TestDb::new().await;
    migrate(&db).await;
    for id in ["job_n1", "job_n2", "job_n3"] {
        register(&db, id).await;
    }
    let first = r#"{"data":[{"id":"job_n1","status":"completed"},null,
        {"id":"job_n0"},{"id":"job_nn","status":null},
        {"id":"job_n2","status":"failed"}],"has_more":true,"next_cursor":"job_n2"}"#;
    let second = r#"{"data":[{"id":"job_n3","status":"canceled"}],"has_more":false}"#;
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| async move {
        use axum::response::IntoResponse;
        let body = match uri.query().unwrap_or_default().contains("cursor=") {
            true => second,
            false => first,
        };
        ([("content-type", "application/json")], body).into_response()
    });
    let api = stand_in_api(app).await;
    let report = reconcile_at(&db, &api, 1000)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(report.complete(), "{report:?}");
    let key = &report.keys[0];
    assert_eq!(
        (
            key.pages,
            key.closed,
            key.unread,
            key.unread_example.as_deref()
        ),
        (2, 3, 3, Some("null")),
        "{report:?}"
    );
    for (job, state) in [
        ("job_n1", "completed"),
        ("job_n2", "failed"),
        ("job_n3", "canceled"),
    ] {
        assert_eq!(job_state(&db, job).await.as_deref(), Some(state), "{job}");
    }
    let shown = sume_inbox::cli::reconcile::render(&report);
    assert!(
        shown.contains(
            "(3 entries not read as a job, such as null: left out, the rest of the page read)"
        ),
        "{shown}"
    );
}

/// A list page answered as a web page (`Content-Type: text/html`, a login page in front of
/// Sume) or compressed (`Content-Encoding: gzip`) stopped the run saying only that it "does
/// not read as a page of jobs"; a `304 Not Modified` was said to be a redirect. The stop now
/// names how the page came, and a 304 as what it is.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_page_that_is_no_json_stops_the_run_saying_how_it_came() {
    let db = TestDb::new().await;
    migrate(&db).await;
    for (code, header, said) in [
        (
            200,
            ("content-type", "text/html; charset=utf-8"),
            "Sume answered 200 with a body that does not read as a page of jobs \
             (Content-Type text/html; charset=utf-8, request_id -)",
        ),
        (
            200,
            ("content-encoding", "gzip"),
            "Sume answered 200 with a body that does not read as a page of jobs \
             (Content-Encoding gzip, request_id -)",
        ),
        (
            304,
            ("etag", "\"v1\""),
            "the list answered 304 Not Modified, though it sent no validator",
        ),
    ] {
        let app = axum::Router::new().fallback(move || async move {
            let body = match code {
                200 => "<!doctype html><title>Sign in</title>",
                _ => "",
            };
            let mut response = axum::response::Response::new(axum::body::Body::from(body));
            *response.status_mut() = axum::http::StatusCode::from_u16(code).unwrap();
            response
                .headers_mut()
                .insert(header.0, header.1.parse().unwrap());
            response
        });
        let api = stand_in_api(app).await;
        let report = reconcile_at(&db, &api, 1000)
            .run(Duration::from_secs(3600), Duration::from_secs(5))
            .await
            .unwrap();
        assert!(!report.complete(), "{report:?}");
        let stopped = report.keys[0].stopped.as_deref().unwrap_or("");
        assert!(stopped.starts_with(said), "{stopped}");
    }
}

/// A page of the list past 1 MiB (a hundred jobs with results of 12 KB) did not read at all:
/// the run stopped there, "a body that does not read as a page of jobs", no job on it closed.
/// The jobs whole before the cut are closed, and the run stops there saying so: the page's
/// `has_more: false` came after the cut, so it is no word that the listing is complete.
#[tokio::test(flavor = "multi_thread")]
async fn a_page_past_one_mib_closes_what_came_before_the_cut_and_stops_saying_so() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let (page, whole) = crate::walks::page_past_the_cap(&db).await;
    let app = axum::Router::new().fallback(move || {
        let page = page.clone();
        async move {
            use axum::response::IntoResponse;
            ([("content-type", "application/json")], page).into_response()
        }
    });
    let api = stand_in_api(app).await;
    let report = reconcile_at(&db, &api, 1000)
        .run(Duration::from_secs(3600), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!report.complete(), "{report:?}");
    assert_eq!(
        (report.keys[0].pages, report.keys[0].closed),
        (1, whole),
        "{report:?}"
    );
    let stopped = report.keys[0].stopped.as_deref().unwrap_or("");
    let said = format!("a page of Sume's list was past 1 MiB and cut: the {whole} entries");
    assert!(stopped.starts_with(&said), "{stopped}");
    let open = db
        .scalar("select count(*) from sume.jobs where state = 'open'")
        .await;
    assert_eq!(open, (100 - whole) as i64);
}
