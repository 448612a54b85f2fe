//! What Sume documents, end to end: every status spelling the docs name reaches the daemon
//! (terminal ones by webhook, in-flight ones by poll) and does what it means; and a delivery
//! retried 40 minutes after its first attempt, under each of the two ways Sume may sign a
//! retry (not documented), with the default `WEBHOOK_TOLERANCE`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use sume_inbox::config::SweepConfig;
use sume_sim::{DeliveriesAnswer, JobTruth, RetryTimestamp, RunningSim, SimConfig, WebhookState};

use super::harness::{daemon_config, sim_config, KEY};
use crate::support::{wait_for, Daemon, TestDb};

const DEADLINE: Duration = Duration::from_secs(60);

/// Creates a job of the kind behind `path`; answers its id.
async fn create(http: &reqwest::Client, sim: &RunningSim, path: &str, body: Value) -> String {
    let r = http
        .post(format!("{}{path}", sim.api_url()))
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "{path}");
    let v: Value = r.json().await.unwrap();
    v["job_id"].as_str().unwrap().to_owned()
}

async fn truth(http: &reqwest::Client, sim: &RunningSim, id: &str) -> JobTruth {
    let r = http.get(sim.sim_url(&format!("jobs/{id}"))).send().await;
    r.unwrap().json().await.unwrap()
}

async fn register(db: &TestDb, id: &str) {
    db.client()
        .await
        .execute(
            "insert into sume.jobs (job_id, order_id, api_key) values ($1, $1, 'app')",
            &[&id],
        )
        .await
        .unwrap();
}

/// `(state, sume_status, closed_by)` of a job.
async fn row(db: &TestDb, id: &str) -> (String, Option<String>, Option<String>) {
    let r = db
        .client()
        .await
        .query_one(
            "select state, sume_status, closed_by from sume.jobs where job_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// The documented meaning of each spelling: `fixtures/sume/docs/statuses.json`.
fn documented_state(spelling: &str) -> &'static str {
    let text = include_str!("../../../../../fixtures/sume/docs/statuses.json");
    let statuses: Value = serde_json::from_str(text).unwrap();
    for state in ["completed", "failed", "canceled", "expired"] {
        let spellings = statuses["terminal"][state].as_array().unwrap();
        if spellings.iter().any(|s| s == spelling) {
            return state;
        }
    }
    panic!("{spelling} is not a documented terminal status")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_documented_terminal_spelling_closes_its_job_as_the_docs_say() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let daemon = Daemon::start(daemon_config(&db.url, &sim)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let mut jobs = Vec::new();
    for (path, outcome) in [
        ("/videos/generations", "completed"),
        ("/videos/generations", "failed"),
        ("/videos/generations", "canceled"),
        ("/videos/generations", "expired"),
        ("/avatars", "completed"),
        ("/images/generations", "completed"),
        ("/images/generations", "failed"),
        ("/images/generations", "canceled"),
        ("/face-swap", "completed"),
        ("/face-swap", "failed"),
    ] {
        let body = json!({"webhook_url": url, "sim": {"outcome": outcome, "duration_ms": 1}});
        jobs.push(create(&http, &sim, path, body).await);
    }
    let mut spellings = std::collections::BTreeSet::new();
    for id in &jobs {
        wait_for("the webhook delivered", DEADLINE, || async {
            truth(&http, &sim, id).await.webhook.state == WebhookState::Delivered
        })
        .await;
        // The event waited in the inbox; the row arrives after it, as in the race.
        register(&db, id).await;
    }
    for id in &jobs {
        let t = truth(&http, &sim, id).await;
        wait_for("attach closed the job", DEADLINE, || async {
            row(&db, id).await.0 != "open"
        })
        .await;
        let (state, sume_status, closed_by) = row(&db, id).await;
        assert_eq!(
            state,
            documented_state(&t.final_status),
            "{id} {}",
            t.final_status
        );
        assert_eq!(sume_status.as_deref(), Some(t.final_status.as_str()));
        assert_eq!(closed_by.as_deref(), Some("webhook"));
        spellings.insert(t.final_status);
    }
    assert_eq!(
        spellings.len(),
        10,
        "every terminal spelling: {spellings:?}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_documented_in_flight_spelling_updates_sume_status_and_leaves_the_job_open() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let mut cfg = daemon_config(&db.url, &sim);
    cfg.sweep = SweepConfig {
        interval: Duration::from_millis(100),
        poll_after: Duration::from_millis(100),
        // The key's list is walked every half of this: a job registered after one walk is
        // seen by the next.
        poll_max_interval: Duration::from_secs(2),
        ..SweepConfig::default()
    };
    let daemon = Daemon::start(cfg).await;
    let http = reqwest::Client::new();
    let hour = 3_600_000;
    let mut jobs = Vec::new();
    for (path, queued_ms, want) in [
        ("/videos/generations", hour, "queued"),
        ("/videos/generations", 0, "running"),
        ("/images/generations", 0, "processing"),
    ] {
        let body = json!({"sim": {"duration_ms": hour, "queued_ms": queued_ms}});
        let id = create(&http, &sim, path, body).await;
        register(&db, &id).await;
        jobs.push((id, want));
    }
    for (id, want) in &jobs {
        wait_for("a poll recorded the in-flight status", DEADLINE, || async {
            row(&db, id).await.1.as_deref() == Some(*want)
        })
        .await;
        let (state, _, closed_by) = row(&db, id).await;
        assert_eq!((state.as_str(), closed_by), ("open", None), "{id} {want}");
    }
    daemon.stop().await;
}

/// The receiver's side of a first attempt that failed: the first delivery is answered 503
/// after the simulator's signing clock is moved 40 minutes on (as if the retry came 40
/// minutes later); every later one is passed to the daemon as received.
#[derive(Clone)]
struct Outage {
    failed_once: Arc<AtomicBool>,
    sim_clock: String,
    daemon: String,
    http: reqwest::Client,
}

async fn outage(State(o): State<Outage>, headers: HeaderMap, body: Bytes) -> StatusCode {
    if !o.failed_once.swap(true, Ordering::SeqCst) {
        let moved = o
            .http
            .patch(&o.sim_clock)
            .json(&json!({"offset_secs": 0}))
            .send()
            .await
            .unwrap();
        assert!(moved.status().is_success());
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let mut forward = o.http.post(&o.daemon).body(body);
    for (name, value) in &headers {
        if name.as_str().starts_with("x-sume-") || name == "content-type" {
            forward = forward.header(name, value);
        }
    }
    let answer = forward.send().await.unwrap();
    StatusCode::from_u16(answer.status().as_u16()).unwrap()
}

/// One job whose first delivery attempt is signed 40 minutes ago and fails, retried now
/// under `mode`, against a daemon with `tolerance`: the retries' answers and the job's row.
async fn retried_40_minutes_later(
    mode: RetryTimestamp,
    tolerance: Duration,
) -> (Vec<u16>, (String, Option<String>, Option<String>)) {
    let db = TestDb::new().await;
    let mut sim_cfg: SimConfig = sim_config();
    sim_cfg.delivery.retry_timestamp = mode;
    let sim = RunningSim::start(sim_cfg).await.unwrap();
    let mut cfg = daemon_config(&db.url, &sim);
    cfg.webhook_tolerance = tolerance;
    let daemon = Daemon::start(cfg).await;
    let http = reqwest::Client::new();
    let state = Outage {
        failed_once: Arc::default(),
        sim_clock: sim.sim_url("clock"),
        daemon: daemon.url("/webhooks/sume"),
        http: http.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = format!("http://{}/webhooks/sume", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/webhooks/sume", post(outage))
        .with_state(state);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let moved = http
        .patch(sim.sim_url("clock"))
        .json(&json!({"offset_secs": -2400}))
        .send()
        .await
        .unwrap();
    assert!(moved.status().is_success());
    let body = json!({"webhook_url": front, "sim": {"duration_ms": 1}});
    let id = create(&http, &sim, "/videos/generations", body).await;
    register(&db, &id).await;
    wait_for("the delivery settled", DEADLINE, || async {
        matches!(
            truth(&http, &sim, &id).await.webhook.state,
            WebhookState::Delivered | WebhookState::GaveUp
        )
    })
    .await;
    let log: DeliveriesAnswer = http
        .get(sim.sim_url(&format!("deliveries?job_id={id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let answers: Vec<u16> = log
        .deliveries
        .iter()
        .filter_map(|d| d.http_status)
        .collect();
    if answers.last() == Some(&204) {
        wait_for("attach closed the job", DEADLINE, || async {
            row(&db, &id).await.0 != "open"
        })
        .await;
    }
    let job = row(&db, &id).await;
    server.abort();
    daemon.stop().await;
    (answers, job)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retry_40_minutes_later_is_accepted_only_when_signed_afresh_or_tolerated() {
    let five_minutes = Duration::from_secs(300); // WEBHOOK_TOLERANCE's default
                                                 // Re-signed with a fresh timestamp (the simulator's default, the README's assumption):
                                                 // the second attempt is stored and closes the job.
    let (answers, job) = retried_40_minutes_later(RetryTimestamp::Fresh, five_minutes).await;
    assert_eq!(answers, [503, 204]);
    assert_eq!(
        job,
        (
            "completed".into(),
            Some("completed".into()),
            Some("webhook".into())
        )
    );
    // Kept the first timestamp: every retry is 40 minutes stale, refused 401 until Sume gives
    // up; the event is never stored, only polling can close the job.
    let (answers, job) = retried_40_minutes_later(RetryTimestamp::First, five_minutes).await;
    assert_eq!(answers.len(), 10, "{answers:?}");
    assert_eq!(answers[0], 503);
    assert!(answers[1..].iter().all(|a| *a == 401), "{answers:?}");
    assert_eq!(job, ("open".into(), None, None));
    // The same with WEBHOOK_TOLERANCE longer than the retry horizon: accepted.
    let hour = Duration::from_secs(3600);
    let (answers, job) = retried_40_minutes_later(RetryTimestamp::First, hour).await;
    assert_eq!(answers, [503, 204]);
    assert_eq!(job.0, "completed");
}
