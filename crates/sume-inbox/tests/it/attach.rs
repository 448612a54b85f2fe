//! Attach: events and job rows meeting in any order, on any instance, applied once.

use std::time::Duration;

use rand::Rng;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn event_before_the_job_row_completes_once_the_row_commits() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let app = app_pool(&db).await;
    assert_eq!(
        Delivery::completed("job_early")
            .send(&http, &daemon.url("/webhooks/sume"))
            .await
            .status(),
        204
    );
    assert_eq!(job_state(&db, "job_early").await, None, "no row yet");
    app_commit_job(&app, "job_early", "order-7", Duration::from_millis(50)).await;
    wait_for("job_early completed", Duration::from_secs(10), || async {
        job_state(&db, "job_early").await.as_deref() == Some("completed")
    })
    .await;
    let job: serde_json::Value = http
        .get(daemon.admin_url("/v1/jobs/job_early"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(job["order_id"], "order-7");
    assert_eq!(job["closed_by"], "webhook");
    assert_eq!(job["result"]["url"], "https://cdn.example/job_early.mp4");
    assert!(job["closed_at"].is_string());
    assert_eq!(
        db.scalar(
            "select count(*) from sume.events where applied_at is not null and outcome = 'closed'"
        )
        .await,
        1,
        "the event is marked applied, not deleted"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_with_no_event_stays_open() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let app = app_pool(&db).await;
    app_commit_job(&app, "job_late", "order-8", Duration::ZERO).await;
    app_commit_job(&app, "job_other", "order-9", Duration::ZERO).await;
    // Another job's event goes through attach, so attach has demonstrably run past job_late.
    Delivery::completed("job_other")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    wait_for("job_other completed", Duration::from_secs(10), || async {
        job_state(&db, "job_other").await.as_deref() == Some("completed")
    })
    .await;
    let r = http
        .get(daemon.admin_url("/v1/jobs/job_late"))
        .send()
        .await
        .unwrap();
    let job: serde_json::Value = r.json().await.unwrap();
    assert_eq!(job["state"], "open");
    assert!(job["closed_by"].is_null() && job["closed_at"].is_null());
    let missing = http
        .get(daemon.admin_url("/v1/jobs/job_nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn registration_api_attaches_at_once_and_refuses_bad_input() {
    let db = TestDb::new().await;
    let mut cfg = config(&db.url);
    cfg.api_keys = vec![sume_inbox::config::ApiKey {
        name: "main".into(),
        key: sume_wire::Secret::new("sk_main"),
    }];
    let daemon = Daemon::start(cfg).await;
    let http = reqwest::Client::new();
    Delivery::completed("job_a")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    let reg = |body: serde_json::Value| {
        let http = http.clone();
        let url = daemon.admin_url("/v1/jobs");
        async move { http.post(url).json(&body).send().await.unwrap() }
    };
    let r = reg(serde_json::json!({"job_id": "job_a", "order_id": "o1", "api_key": "main"})).await;
    assert_eq!(r.status(), 201);
    let job: serde_json::Value = r.json().await.unwrap();
    assert_eq!(job["state"], "completed", "attached before answering");
    assert_eq!(job["api_key"], "main");
    let again =
        reg(serde_json::json!({"job_id": "job_a", "order_id": "o1", "api_key": "main"})).await;
    assert_eq!(again.status(), 200);
    let clash = reg(serde_json::json!({"job_id": "job_a", "order_id": "o2"})).await;
    assert_eq!(clash.status(), 409);
    let clash: serde_json::Value = clash.json().await.unwrap();
    assert_eq!(
        clash["job"]["order_id"], "o1",
        "the existing job is shown, unchanged"
    );
    assert_eq!(
        reg(serde_json::json!({"order_id": "o3"})).await.status(),
        422
    );
    assert_eq!(reg(serde_json::json!({"job_id": ""})).await.status(), 422);
    assert_eq!(
        reg(serde_json::json!({"job_id": "j", "api_key": "nope"}))
            .await
            .status(),
        422
    );
    assert_eq!(
        reg(serde_json::json!({"job_id": "j", "surprise": 1}))
            .await
            .status(),
        422
    );
    let not_json = http
        .post(daemon.admin_url("/v1/jobs"))
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400);
    assert_eq!(db.scalar("select count(*) from sume.jobs").await, 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_token_guards_every_admin_endpoint() {
    let db = TestDb::new().await;
    let mut cfg = config(&db.url);
    cfg.admin_token = Some(sume_wire::Secret::new("a-long-admin-token-123"));
    let daemon = Daemon::start(cfg).await;
    let http = reqwest::Client::new();
    let bare = http
        .get(daemon.admin_url("/v1/jobs/x"))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 401);
    let wrong = http
        .post(daemon.admin_url("/v1/jobs"))
        .bearer_auth("a-long-admin-token-124")
        .json(&serde_json::json!({"job_id": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let ok = http
        .get(daemon.admin_url("/v1/jobs/x"))
        .bearer_auth("a-long-admin-token-123")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 404);
    assert_eq!(db.scalar("select count(*) from sume.jobs").await, 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_state_is_final_and_redeliveries_change_nothing() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    assert_eq!(
        api_register(&http, &daemon, "job_f", "o").await.status(),
        201
    );
    for status in ["running", "completed", "failed", "processing"] {
        assert_eq!(
            Delivery::status("job_f", status)
                .send(&http, &url)
                .await
                .status(),
            204
        );
        wait_for("event applied", Duration::from_secs(10), || async {
            db.scalar("select count(*) from sume.events where applied_at is null")
                .await
                == 0
        })
        .await;
    }
    // Days later, Sume redelivers the completed event.
    assert_eq!(
        Delivery::status("job_f", "completed")
            .send(&http, &url)
            .await
            .status(),
        204
    );
    let c = db.client().await;
    let row = c
        .query_one(
            "select state, sume_status, closed_event_id from sume.jobs",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "completed");
    assert_eq!(row.get::<_, String>(1), "completed");
    assert_eq!(row.get::<_, String>(2), "job_f/job.completed");
    let outcomes: Vec<(String, String)> = c
        .query(
            "select status, outcome from sume.events order by received_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("running".into(), "status".into()),
            ("completed".into(), "closed".into()),
            ("failed".into(), "disagreement".into()),
            ("processing".into(), "ignored".into()),
        ]
    );
    let d = c
        .query_one(
            "select kept_state, seen_state, source, event_id from sume.disagreements",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(d.get::<_, String>(0), "completed");
    assert_eq!(d.get::<_, String>(1), "failed");
    assert_eq!(d.get::<_, String>(2), "webhook");
    assert_eq!(d.get::<_, String>(3), "job_f/job.failed");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_notification_is_caught_up() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    Delivery::completed("job_quiet")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    // Insert the row with triggers off, so no notification is ever sent.
    let c = db.client().await;
    c.batch_execute(
        "set session_replication_role = replica;
         insert into sume.jobs (job_id, order_id) values ('job_quiet', 'o');
         set session_replication_role = origin;",
    )
    .await
    .unwrap();
    wait_for(
        "catch-up scan closes job_quiet",
        Duration::from_secs(10),
        || async { job_state(&db, "job_quiet").await.as_deref() == Some("completed") },
    )
    .await;
    daemon.stop().await;
}

/// How many of ingest's hints went without a query.
async fn hints_skipped(daemon: &Daemon) -> f64 {
    crate::port::metric(daemon, "sume_inbox_attach_hints_skipped_total").await
}

/// Ingest hints attach only the jobs whose row its insert saw, and those registered since. The
/// hard case: a registration that commits after an event's insert took its snapshot and before
/// it committed is seen by neither statement. Its notification, remembered by attach, closes the
/// job when the event's hint arrives, with no catch-up scan to fall back on.
#[tokio::test(flavor = "multi_thread")]
async fn a_registration_inside_an_inserts_window_attaches_without_the_scan() {
    let db = TestDb::new().await;
    let mut cfg = config(&db.url);
    cfg.attach.scan_interval = Duration::from_secs(3600);
    // Behind a pooler, notifications need LISTEN_DATABASE_URL: without LISTEN every hint is
    // checked (and this test's first part would wait for a skip in vain).
    if cfg.database.pooler == sume_inbox::config::Pooler::Transaction {
        cfg.database.listen_url = Some(sume_wire::Secret::new(db.url.clone()));
    }
    let daemon = Daemon::start(cfg).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let app = app_pool(&db).await;
    // Every hint is checked for a window after LISTEN comes up (notifications may have been
    // missed before it).
    tokio::time::sleep(sume_inbox::actors::attach::HINT_WINDOW).await;

    jobless_hints_go_without_a_query(&daemon, &http, &url).await;
    // A job registered long before its event: the insert sees the row.
    app_commit_job(&app, "job_known", "order-k", Duration::ZERO).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    Delivery::completed("job_known").send(&http, &url).await;
    wait_for("job_known completed", Duration::from_secs(10), || async {
        job_state(&db, "job_known").await.as_deref() == Some("completed")
    })
    .await;
    // Attach takes hints in order: every jobless one before job_known's has been counted.
    let skipped = hints_skipped(&daemon).await;

    a_registration_inside_the_inserts_window(&db, &app, &http, &url).await;
    assert_eq!(
        hints_skipped(&daemon).await,
        skipped,
        "only jobless hints went without a query"
    );
    daemon.stop().await;
}

/// Events for jobs nobody registered: left waiting, no query, once LISTEN has been up for the
/// window (on a busy machine it comes up a little after the daemon).
async fn jobless_hints_go_without_a_query(daemon: &Daemon, http: &reqwest::Client, url: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut nobody = 0;
    loop {
        nobody += 1;
        let job = format!("job_nobody_{nobody}");
        assert_eq!(
            Delivery::completed(&job).send(http, url).await.status(),
            204
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        if hints_skipped(daemon).await >= 1.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no hint went without a query"
        );
    }
}

/// The race: an uncommitted row holding the event's key makes the daemon's insert wait after
/// taking its snapshot; the job row commits meanwhile; then the insert goes on.
async fn a_registration_inside_the_inserts_window(
    db: &TestDb,
    app: &deadpool_postgres::Pool,
    http: &reqwest::Client,
    url: &str,
) {
    let mut blocker = db.client().await;
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        "insert into sume.events (event_id, job_id, body, signed_at, signature)
         values ('job_race/job.completed', 'job_race', '\\x00', 0, 'x')",
        &[],
    )
    .await
    .unwrap();
    let send = {
        let (http, url) = (http.clone(), url.to_owned());
        tokio::spawn(async move {
            Delivery::completed("job_race")
                .send(&http, &url)
                .await
                .status()
        })
    };
    wait_for(
        "the insert waits on the held key",
        Duration::from_secs(10),
        || async {
            db.scalar(
                "select count(*) from pg_stat_activity
             where wait_event_type = 'Lock' and query like '%insert into sume.events%'",
            )
            .await
                >= 1
        },
    )
    .await;
    app_commit_job(app, "job_race", "order-r", Duration::ZERO).await;
    // Attach takes the registration's notification now, and finds no committed event.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(job_state(db, "job_race").await.as_deref(), Some("open"));
    tx.rollback().await.unwrap();
    assert_eq!(send.await.unwrap(), 204);
    wait_for("job_race completed", Duration::from_secs(10), || async {
        job_state(db, "job_race").await.as_deref() == Some("completed")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_catch_up_scan_drains_a_backlog_larger_than_its_batch() {
    let db = TestDb::new().await;
    let mut cfg = config(&db.url);
    cfg.attach.batch_max = 16;
    cfg.attach.scan_interval = Duration::from_millis(200);
    let daemon = Daemon::start(cfg).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    // The oldest waiting events are jobless (the race still open), then 60 jobs with two
    // events each (a status, then the end): batches hold the same job twice.
    for i in 0..20 {
        Delivery::completed(&format!("jobless_{i:02}"))
            .send(&http, &url)
            .await;
    }
    for i in 0..60 {
        let job = format!("job_{i:02}");
        Delivery::status(&job, "processing").send(&http, &url).await;
        Delivery::completed(&job).send(&http, &url).await;
    }
    // Rows with triggers off: no notification, only the scan can find them.
    db.client()
        .await
        .batch_execute(
            "set session_replication_role = replica;
             insert into sume.jobs (job_id) select 'job_' || lpad(g::text, 2, '0')
             from generate_series(0, 59) g;
             set session_replication_role = origin;",
        )
        .await
        .unwrap();
    wait_for(
        "the scan closes all 60 jobs, 16 events at a time",
        Duration::from_secs(20),
        || async {
            let c = db.client().await;
            let closed: i64 = c
                .query_one(
                    "select count(*) from sume.jobs where state = 'completed'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            closed == 60
        },
    )
    .await;
    let c = db.client().await;
    let waiting: Vec<String> = c
        .query(
            "select job_id from sume.events where applied_at is null order by job_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let jobless: Vec<String> = (0..20).map(|i| format!("jobless_{i:02}")).collect();
    assert_eq!(waiting, jobless, "every event of a registered job applied");
    daemon.stop().await;
}

/// Registers `jobs` jobs and delivers their events in random order with random delays, through
/// both registration paths, against the given daemons; every job must end `completed`.
async fn race(db: &TestDb, daemons: &[&Daemon], jobs: usize) {
    let http = reqwest::Client::new();
    let app = app_pool(db).await;
    let mut tasks = Vec::new();
    for i in 0..jobs {
        let job_id = format!("job_{i:04}");
        let (event_delay, reg_delay, via_api, dup, ingest_on, register_on) = {
            let mut rng = rand::thread_rng();
            (
                Duration::from_millis(rng.gen_range(0..300)),
                Duration::from_millis(rng.gen_range(0..300)),
                rng.gen_bool(0.5),
                rng.gen_bool(0.2),
                rng.gen_range(0..daemons.len()),
                rng.gen_range(0..daemons.len()),
            )
        };
        let hook = daemons[ingest_on].url("/webhooks/sume");
        let admin = daemons[register_on].admin_url("/v1/jobs");
        let (http2, app) = (http.clone(), app.clone());
        let id = job_id.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(event_delay).await;
            let d = Delivery::completed(&id);
            assert_eq!(d.send(&http2, &hook).await.status(), 204);
            if dup {
                assert_eq!(d.send(&http2, &hook).await.status(), 204);
            }
        }));
        let http2 = http.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(reg_delay).await;
            if via_api {
                let r = http2
                    .post(admin)
                    .json(&serde_json::json!({"job_id": job_id, "order_id": format!("o-{job_id}")}))
                    .send()
                    .await
                    .unwrap();
                assert!(r.status() == 201, "{}", r.status());
            } else {
                let slow = Duration::from_millis(rand::thread_rng().gen_range(0..100));
                app_commit_job(&app, &job_id, &format!("o-{job_id}"), slow).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    each_job_closed_once_by_its_event(db, jobs).await;
}

/// Every one of `jobs` jobs completed, by its own event, exactly once, and nothing waits.
async fn each_job_closed_once_by_its_event(db: &TestDb, jobs: usize) {
    wait_for("every job completed", Duration::from_secs(60), || async {
        db.scalar("select count(*) from sume.jobs where state = 'completed'")
            .await
            == jobs as i64
    })
    .await;
    assert_eq!(
        db.scalar("select count(*) from sume.jobs").await,
        jobs as i64
    );
    assert_eq!(
        db.scalar("select count(*) from sume.events").await,
        jobs as i64
    );
    assert_eq!(
        db.scalar("select count(*) from sume.events where applied_at is null")
            .await,
        0
    );
    assert_eq!(
        db.scalar("select count(*) from sume.events where outcome = 'closed'")
            .await,
        jobs as i64,
        "each job closed exactly once"
    );
    assert_eq!(
        db.scalar(
            "select count(*) from sume.jobs where closed_event_id <> job_id || '/job.completed'"
        )
        .await,
        0
    );
    assert_eq!(
        db.scalar("select count(*) from sume.disagreements").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn five_hundred_jobs_racing_through_both_paths() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    race(&db, &[&daemon], 500).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_instances_on_one_database() {
    let db = TestDb::new().await;
    let a = Daemon::start(config(&db.url)).await;
    let b = Daemon::start(config(&db.url)).await;
    race(&db, &[&a, &b], 300).await;
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_set_aside_event_attaches_when_its_job_is_registered_later_without_a_notification() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let d = Delivery::completed("job_judged_foreign");
    assert_eq!(
        d.send(&http, &daemon.url("/webhooks/sume")).await.status(),
        204
    );
    // Judged foreign (as the inbox check does when no key of ours knows the job)...
    let mut c = db.client().await;
    c.execute(
        "update sume.events set set_aside_at = now(), set_aside_reason = 'foreign: test'
         where job_id = 'job_judged_foreign'",
        &[],
    )
    .await
    .unwrap();
    // ...then the application registers the job after all, and its notification is lost
    // (triggers off for this transaction: no NOTIFY).
    let tx = c.transaction().await.unwrap();
    tx.batch_execute(
        "set local session_replication_role = replica;
         insert into sume.jobs (job_id, order_id) values ('job_judged_foreign', 'o_late');",
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    // The catch-up scan finds it: the event is applied and closes the job.
    wait_for(
        "the set-aside event applied",
        Duration::from_secs(10),
        || async { job_state(&db, "job_judged_foreign").await.as_deref() == Some("completed") },
    )
    .await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sumes_late_word_supersedes_a_give_up_and_keeps_it_in_the_history() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    // A job the sweep gave up on (POLL_GIVE_UP passed with no terminal status).
    db.client()
        .await
        .batch_execute(
            "insert into sume.jobs (job_id, order_id, state, sume_status, closed_by, close_reason,
                                    closed_at)
             values ('job_late', 'o_late', 'expired', 'running', 'give_up',
                     'no terminal status within POLL_GIVE_UP', now() - interval '1 hour')",
        )
        .await
        .unwrap();
    // Sume's completion arrives after all.
    assert_eq!(
        Delivery::completed("job_late")
            .send(&http, &url)
            .await
            .status(),
        204
    );
    wait_for(
        "the give-up superseded",
        Duration::from_secs(10),
        || async { job_state(&db, "job_late").await.as_deref() == Some("completed") },
    )
    .await;
    let c = db.client().await;
    let row = c
        .query_one(
            "select closed_by, closed_event_id, superseded_give_up, close_reason,
                    closed_at > now() - interval '1 minute'
             from sume.jobs where job_id = 'job_late'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "webhook");
    assert_eq!(row.get::<_, String>(1), "job_late/job.completed");
    let given_up: serde_json::Value = row.get(2);
    assert_eq!(given_up["state"], "expired");
    assert_eq!(given_up["sume_status"], "running");
    assert_eq!(given_up["reason"], "no terminal status within POLL_GIVE_UP");
    assert_eq!(row.get::<_, Option<String>>(3), None);
    assert!(row.get::<_, bool>(4), "closed again, now");
    assert_eq!(
        db.scalar("select count(*) from sume.disagreements").await,
        0
    );
    // A later, different terminal status from Sume is a disagreement: Sume's first word wins.
    assert_eq!(
        Delivery::status("job_late", "failed")
            .send(&http, &url)
            .await
            .status(),
        204
    );
    wait_for(
        "the disagreement recorded",
        Duration::from_secs(10),
        || async { db.scalar("select count(*) from sume.disagreements").await == 1 },
    )
    .await;
    assert_eq!(
        job_state(&db, "job_late").await.as_deref(),
        Some("completed")
    );
    daemon.stop().await;
}
