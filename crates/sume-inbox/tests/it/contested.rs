//! Two different terminal events of one job stored by one ingest transaction have no order:
//! they share its `received_at`, their signed timestamps are not Sume's order, and their keys'
//! spelling is none. Neither closes the job; both are recorded as disagreements, and Sume's
//! answer to a poll made at once decides, through real deliveries and the simulator.

use std::time::Duration;

use serde_json::json;
use sume_sim::RunningSim;

use crate::support::*;
use crate::sweep::{
    clocked_config, count, create, daemon_without_keys, sim_config, wait_ended, Sweep, MAIN_KEY,
};

/// Deliveries the daemon verified so far (the counter of its first secret).
async fn verified(http: &reqwest::Client, daemon: &Daemon) -> u64 {
    let text = http
        .get(daemon.admin_url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| {
            l.strip_prefix(r#"sume_inbox_webhooks_verified_by_secret_total{secret="0"} "#)
        })
        .map_or(0, |n| n.trim().parse().unwrap())
}

fn signed(job_id: &str, status: &str) -> Delivery {
    let mut d = Delivery::status(job_id, status);
    d.secret = sume_sim::TEST_WEBHOOK_SECRET.into();
    d
}

/// Sends `completed` and `failed` for `job_id` so that one ingest transaction stores both: the
/// daemon's one writer is held on an earlier delivery (the inbox locked) while both are
/// verified and queued behind it. Answers whether they did share a transaction (a queue that
/// was not yet reached when the lock went is possible in principle; the caller tries again).
async fn send_together(http: &reqwest::Client, daemon: &Daemon, db: &TestDb, job_id: &str) -> bool {
    let url = daemon.url("/webhooks/sume");
    let hold = db.client().await;
    hold.batch_execute("begin; lock table sume.events in share row exclusive mode")
        .await
        .unwrap();
    let before = verified(http, daemon).await;
    let send = |d: Delivery| {
        let (http, url) = (http.clone(), url.clone());
        tokio::spawn(async move { d.send(&http, &url).await.status() })
    };
    let plug = send(signed(&format!("{job_id}_plug"), "completed"));
    wait_for(
        "the writer waits for the inbox",
        Duration::from_secs(10),
        || async {
            count(
                db,
                "select count(*) from pg_locks
             where relation = 'sume.events'::regclass and not granted",
            )
            .await
                > 0
        },
    )
    .await;
    let pair = [
        send(signed(job_id, "completed")),
        send(signed(job_id, "failed")),
    ];
    wait_for(
        "both verified and queued",
        Duration::from_secs(10),
        || async { verified(http, daemon).await >= before + 3 },
    )
    .await;
    tokio::task::yield_now().await;
    hold.batch_execute("commit").await.unwrap();
    assert_eq!(plug.await.unwrap(), 204);
    for sent in pair {
        assert_eq!(sent.await.unwrap(), 204);
    }
    let c = db.client().await;
    let row = c
        .query_one(
            "select count(*), count(distinct received_at) from sume.events where job_id = $1",
            &[&job_id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 2);
    row.get::<_, i64>(1) == 1
}

#[tokio::test(flavor = "multi_thread")]
async fn two_different_terminal_events_stored_together_wait_for_sumes_answer() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let mut config = daemon_without_keys(&db, &sim);
    config.ingest.writers = 1;
    let daemon = Daemon::start(config).await;
    let http = reqwest::Client::new();
    // A job Sume fails, whose own webhook is lost: what reaches the daemon are two signed
    // deliveries of it that contradict each other, stored by one transaction.
    let mut job = None;
    for _ in 0..5 {
        let id = create(
            &http,
            &sim,
            MAIN_KEY,
            Some("http://127.0.0.1:9/webhooks/sume"),
            json!({"drop": true, "outcome": "failed"}),
        )
        .await;
        if send_together(&http, &daemon, &db, &id).await {
            job = Some(id);
            break;
        }
    }
    let job = job.expect("two deliveries stored by one transaction");
    wait_ended(&http, &sim, std::slice::from_ref(&job)).await;
    assert_eq!(
        api_register(&http, &daemon, &job, "order_1").await.status(),
        201
    );
    both_recorded_neither_closed(&db, &job).await;
    let c = db.client().await;
    // Sume's answer decides, as a poll always does: the job closes as Sume says.
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    sweep.advance(Duration::from_secs(1));
    let polled = sweep.poll_once().await;
    assert_eq!(polled.closed_by_poll, 1, "{polled:?}");
    let row = c
        .query_one(
            "select state, closed_by from sume.jobs where job_id = $1",
            &[&job],
        )
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, String>(1)),
        ("failed".into(), "poll".into())
    );
    daemon.stop().await;
}

/// Attach folded both: neither closed the job, both are recorded, the job is due a poll.
async fn both_recorded_neither_closed(db: &TestDb, job: &str) {
    let c = db.client().await;
    let outcomes: Vec<(String, Option<String>)> = c
        .query(
            "select status, outcome from sume.events where job_id = $1 order by status",
            &[&job],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("completed".into(), Some("disagreement".into())),
            ("failed".into(), Some("disagreement".into()))
        ]
    );
    let row = c
        .query_one(
            "select state, closed_by, next_poll_at is not null from sume.jobs where job_id = $1",
            &[&job],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "open", "neither closed the job");
    assert_eq!(row.get::<_, Option<String>>(1), None);
    assert!(row.get::<_, bool>(2), "due for a poll at once");
    let recorded: Vec<(String, String)> = c
        .query(
            "select kept_state, seen_state from sume.disagreements where job_id = $1
             order by seen_state",
            &[&job],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        recorded,
        [
            ("open".into(), "completed".into()),
            ("open".into(), "failed".into())
        ]
    );
}
