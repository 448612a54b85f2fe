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
