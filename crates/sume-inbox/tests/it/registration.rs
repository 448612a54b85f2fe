//! `POST /v1/jobs` under load and in a fleet: a burst of the same registration never starves
//! the pool, and a key name is judged against every live instance's keys, not this one's alone.

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_the_same_registration_is_answered_200_by_a_pool_of_two() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.db_pool_size = 2;
    let daemon = Daemon::start(c).await;
    let http = reqwest::Client::new();
    let first = api_register(&http, &daemon, "job_pre_1", "o").await;
    assert_eq!(first.status(), 201);
    // Each repeat once held its connection while asking the pool for a second: two at once
    // took both and waited for a third until the pool's wait ran out (503, "no database
    // connection"), and every other request waited behind them.
    let burst = (0..40).map(|_| api_register(&http, &daemon, "job_pre_1", "o"));
    let other = http.get(daemon.admin_url("/v1/jobs/job_other")).send();
    let (answers, other) = tokio::join!(join_all(burst), other);
    let statuses: Vec<u16> = answers.iter().map(|r| r.status().as_u16()).collect();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(other.unwrap().status(), 404);
    daemon.stop().await;
}

/// Registers `body` through the admin API: its status and answer.
async fn register(http: &reqwest::Client, daemon: &Daemon, body: Value) -> (u16, Value) {
    let r = http
        .post(daemon.admin_url("/v1/jobs"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_another_live_instance_holds_is_accepted_and_a_repeat_is_200_whatever_its_key() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.api_keys = vec![sume_inbox::config::ApiKey {
        name: "main".into(),
        key: sume_wire::Secret::new("sk_main"),
    }];
    let daemon = Daemon::start(c).await;
    let http = reqwest::Client::new();
    // Another instance of the fleet, live, holding the key `side` only.
    let other = db.client().await;
    other
        .execute(
            "insert into sume.instances (instance, hostname, pid, version, started_at, last_seen, \
             tasks, api_keys) values ('side-1', 'h', 1, 'v', now(), now(), \
             '{\"sweep\": \"running\"}', '{side}')",
            &[],
        )
        .await
        .unwrap();
    let side = json!({"job_id": "job_side", "order_id": "o", "api_key": "side"});
    let (status, job) = register(&http, &daemon, side.clone()).await;
    assert_eq!(status, 201, "{job}");
    assert_eq!(job["api_key"], "side");
    assert_eq!(register(&http, &daemon, side.clone()).await.0, 200);
    // A name no live instance holds is a typo: refused, naming every name the fleet holds.
    let typo = json!({"job_id": "job_typo", "api_key": "sied"});
    let (status, body) = register(&http, &daemon, typo).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "unknown_api_key");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("(configured: main, side)"), "{message}");
    assert_eq!(job_state(&db, "job_typo").await, None);
    // The other instance stopped (every task finished): nobody holds `side` any more.
    other
        .execute(
            "update sume.instances set tasks = '{\"sweep\": \"finished\"}' where instance = 'side-1'",
            &[],
        )
        .await
        .unwrap();
    let fresh = json!({"job_id": "job_side_2", "api_key": "side"});
    assert_eq!(register(&http, &daemon, fresh).await.0, 422);
    // A repeat of what a row already records is a repeat all the same, whoever wrote the row.
    assert_eq!(register(&http, &daemon, side).await.0, 200);
    other
        .execute(
            "insert into sume.jobs (job_id, order_id, api_key) values ('job_sql', 'o2', 'gone')",
            &[],
        )
        .await
        .unwrap();
    let repeat = json!({"job_id": "job_sql", "order_id": "o2", "api_key": "gone"});
    let (status, job) = register(&http, &daemon, repeat).await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["api_key"], "gone");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_later_version_of_traceparent_is_kept_as_its_first_55_characters() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let head = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    // W3C Trace Context reads a later version from its first 55 characters and ignores the
    // rest: the whole header (15,056 bytes here) was once stored with the job.
    let r = reqwest::Client::new()
        .post(daemon.admin_url("/v1/jobs"))
        .header("traceparent", format!("{head}-{}", "z".repeat(15_000)))
        .json(&json!({"job_id": "job_tp_1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let row = db
        .client()
        .await
        .query_one(
            "select traceparent from sume.jobs where job_id = 'job_tp_1'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>(0).as_deref(), Some(head));
    daemon.stop().await;
}
