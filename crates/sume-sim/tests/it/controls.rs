//! The daily read cap, a key's 402 and 403, the signing clock and the retry timestamp.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};
use sume_sim::RetryTimestamp;
use sume_wire::{ErrorEnvelope, Secret};

use crate::support::{config, with_sim, Answer, Receiver, Sim, ALICE, ALICE_2, BOB};

fn header(r: &reqwest::Response, name: &str) -> u64 {
    r.headers()[name].to_str().unwrap().parse().unwrap()
}

async fn patch(sim: &Sim, path: &str, body: Value) -> reqwest::Response {
    sim.http
        .patch(sim.running.sim_url(path))
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn past_the_daily_cap_reads_get_429_until_the_day_ends() {
    let mut c = config("http://127.0.0.1:9/unused");
    c.limits.reads_per_day = 3;
    c.limits.read_day = Duration::from_secs(3600);
    let sim = Sim::start(c).await;
    for left in [2, 1, 0] {
        let read = sim.get(ALICE, "/jobs").await;
        assert_eq!(read.status(), StatusCode::OK);
        // The day is the tighter limit: its headers say so before it refuses.
        assert_eq!(header(&read, "ratelimit-limit"), 3);
        assert_eq!(header(&read, "ratelimit-remaining"), left);
    }
    let refused = sim.get(ALICE, "/jobs").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, "ratelimit-limit"), 3);
    assert_eq!(header(&refused, "ratelimit-remaining"), 0);
    let retry = header(&refused, "retry-after");
    assert!(
        retry > 3000 && retry <= 3600,
        "to the day's end, not the minute's: {retry}"
    );
    assert_eq!(header(&refused, "ratelimit-reset"), retry);
    let body: ErrorEnvelope = refused.json().await.unwrap();
    assert_eq!(body.error.code, "rate_limit_exceeded");
    assert!(body.request_id.is_some());
    assert_eq!(
        sim.get(BOB, "/jobs").await.status(),
        StatusCode::OK,
        "per key"
    );
    let created = sim.post(ALICE, "/videos/generations", json!({})).await;
    assert_eq!(
        created.status(),
        StatusCode::ACCEPTED,
        "creates have no daily cap here"
    );
}

#[tokio::test]
async fn a_key_out_of_credits_gets_402_and_one_without_the_scope_403() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim.create(ALICE, json!({})).await;
    let r = patch(&sim, "keys/alice", json!({"reads": "no_scope"})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let read = sim.get(ALICE, &format!("/jobs/{id}/status")).await;
    assert_eq!(read.status(), StatusCode::FORBIDDEN);
    assert!(read.headers().contains_key("ratelimit-remaining"));
    let body: ErrorEnvelope = read.json().await.unwrap();
    assert_eq!(body.error.code, "insufficient_scope");
    assert_eq!(
        sim.get(ALICE_2, &format!("/jobs/{id}/status"))
            .await
            .status(),
        StatusCode::OK,
        "another key of the member keeps its scope"
    );
    let created = sim.post(ALICE, "/videos/generations", json!({})).await;
    assert_eq!(
        created.status(),
        StatusCode::ACCEPTED,
        "creates keep theirs"
    );

    patch(
        &sim,
        "keys/alice",
        json!({"reads": "out_of_credits", "creates": "out_of_credits"}),
    )
    .await;
    let read = sim.get(ALICE, "/jobs").await;
    assert_eq!(read.status(), StatusCode::PAYMENT_REQUIRED);
    let body: ErrorEnvelope = read.json().await.unwrap();
    assert_eq!(body.error.code, "insufficient_credits");
    let created = sim.post(ALICE, "/videos/generations", json!({})).await;
    assert_eq!(created.status(), StatusCode::PAYMENT_REQUIRED);

    patch(&sim, "keys/alice", json!({})).await;
    assert_eq!(sim.get(ALICE, "/jobs").await.status(), StatusCode::OK);
    let unknown = patch(&sim, "keys/nobody", json!({})).await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let bad = patch(&sim, "keys/alice", json!({"reads": "maybe"})).await;
    assert!(bad.status().is_client_error());
}

/// Deliveries of one job whose first two attempts are answered 500: their timestamps.
async fn retried_timestamps(mode: RetryTimestamp, offset: i64) -> (i64, Vec<i64>) {
    let receiver = Receiver::scripted(
        vec![Secret::new(sume_sim::TEST_WEBHOOK_SECRET)],
        2,
        Answer::Status(500),
    )
    .await;
    let mut c = config(&receiver.url);
    c.delivery.retry_timestamp = mode;
    let sim = Sim::start(c).await;
    patch(&sim, "clock", json!({"offset_secs": offset})).await;
    let now = chrono::Utc::now().timestamp();
    let id = sim.create(ALICE, with_sim(json!({}))).await;
    let got = receiver.wait_for_job(&id, 3).await;
    (
        now,
        got.iter().map(|r| r.timestamp.parse().unwrap()).collect(),
    )
}

#[tokio::test]
async fn retries_carry_a_fresh_or_the_first_timestamp_from_the_moved_clock() {
    let (now, fresh) = retried_timestamps(RetryTimestamp::Fresh, -2400).await;
    for ts in &fresh {
        assert!(
            (now - 2400 - ts).abs() <= 5,
            "signed by the moved clock: {ts} vs {now}"
        );
    }
    let (_, first) = retried_timestamps(RetryTimestamp::First, 0).await;
    assert!(first.iter().all(|ts| *ts == first[0]), "{first:?}");
}

/// Values whose dates could not be written (a clock moved by centuries, a job of a billion
/// days) are refused 400, never taken and left to panic every later read of the clock or job.
#[tokio::test]
async fn a_clock_or_a_job_past_any_date_is_refused() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    for offset in [i64::MAX, i64::MIN, 3651 * 86_400] {
        let r = patch(&sim, "clock", json!({ "offset_secs": offset })).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{offset}");
    }
    let r = sim
        .http
        .get(sim.running.sim_url("clock"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "the clock still reads");
    let body = with_sim(json!({"duration_ms": 10_000_000_000_000_000u64}));
    let created = sim.post(ALICE, "/videos/generations", body).await;
    assert_eq!(created.status(), StatusCode::BAD_REQUEST);
    let jobs = sim
        .http
        .get(sim.running.sim_url("jobs"))
        .send()
        .await
        .unwrap();
    assert_eq!(jobs.status(), StatusCode::OK);
}

/// What the framework answers on its own (a repeated query field, a method no route takes, a
/// control body that does not read) comes in Sume's envelope too, with `Allow` on a 405.
#[tokio::test]
async fn the_frameworks_own_errors_come_in_the_envelope() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let repeated = sim.get(ALICE, "/jobs?limit=2&limit=3").await;
    assert_eq!(repeated.status(), StatusCode::BAD_REQUEST);
    let body: ErrorEnvelope = repeated.json().await.unwrap();
    assert_eq!(body.error.code, "invalid_request");
    assert!(
        body.error.message.contains("limit"),
        "{}",
        body.error.message
    );
    let deleted = sim
        .http
        .delete(sim.running.api_url() + "/jobs/x")
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(deleted.headers().contains_key("allow"));
    let body: ErrorEnvelope = deleted.json().await.unwrap();
    assert_eq!(body.error.code, "method_not_allowed");
    let torn = sim
        .http
        .patch(sim.running.sim_url("faults"))
        .header("content-type", "application/json")
        .body("{bad")
        .send()
        .await
        .unwrap();
    assert_eq!(torn.status(), StatusCode::BAD_REQUEST);
    let body: ErrorEnvelope = torn.json().await.unwrap();
    assert_eq!(body.error.code, "invalid_request");
}
