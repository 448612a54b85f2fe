//! Rate limits: per key, reads and creates apart, with Sume's headers and 429s.

use axum::http::StatusCode;
use serde_json::json;
use sume_wire::{ErrorEnvelope, RateLimit};

use crate::support::{config, Sim, ALICE, BOB};

fn header(r: &reqwest::Response, name: &str) -> u64 {
    r.headers()[name].to_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn past_the_limit_a_key_gets_429_with_retry_after() {
    let mut c = config("http://127.0.0.1:9/unused");
    c.limits.reads_per_window = 3;
    c.limits.creates_per_window = 2;
    c.limits.rate_window = std::time::Duration::from_secs(60);
    let sim = Sim::start(c).await;

    let id = sim.create(ALICE, json!({})).await;
    let second = sim.post(ALICE, "/videos/generations", json!({})).await;
    assert_eq!(second.status(), StatusCode::ACCEPTED);
    assert_eq!(header(&second, "ratelimit-limit"), 2);
    assert_eq!(header(&second, "ratelimit-remaining"), 0);
    let third = sim.post(ALICE, "/videos/generations", json!({})).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(header(&third, "retry-after") >= 1);
    let body: ErrorEnvelope = third.json().await.unwrap();
    assert_eq!(body.error.code, "rate_limit_exceeded");

    // Reads have their own budget, untouched by the creates.
    for remaining in [2, 1, 0] {
        let r = sim.get(ALICE, &format!("/jobs/{id}/status")).await;
        assert_eq!(r.status(), StatusCode::OK);
        let rate = RateLimit::from_headers(r.headers());
        assert_eq!(rate.limit, Some(3));
        assert_eq!(rate.remaining, Some(remaining));
        assert!(rate.reset.is_some());
    }
    let limited = sim.get(ALICE, &format!("/jobs/{id}/status")).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    let rate = RateLimit::from_headers(limited.headers());
    assert!(rate.retry_after.unwrap().as_secs() >= 1);
    assert_eq!(rate.remaining, Some(0));

    // Another key has its own budget.
    let other = sim.get(BOB, &format!("/jobs/{id}/status")).await;
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    assert_eq!(header(&other, "ratelimit-remaining"), 2);

    let stats = sim.stats().await;
    let alice = &stats.keys["alice"];
    assert_eq!(alice.counts.rate_limited, 2);
    assert_eq!(alice.max_reads_per_window, 3);
    assert_eq!(alice.max_creates_per_window, 2);
    let window = &alice.windows[0];
    assert_eq!((window.reads, window.reads_refused), (3, 1));
    assert_eq!((window.creates, window.creates_refused), (2, 1));
}

#[tokio::test]
async fn the_budget_comes_back_in_the_next_window() {
    let mut c = config("http://127.0.0.1:9/unused");
    c.limits.reads_per_window = 1;
    c.limits.rate_window = std::time::Duration::from_millis(200);
    let sim = Sim::start(c).await;
    let id = sim.create(ALICE, json!({})).await;
    let path = format!("/jobs/{id}");
    crate::support::wait_for("a 429", || async {
        (sim.get(ALICE, &path).await.status() == StatusCode::TOO_MANY_REQUESTS).then_some(())
    })
    .await;
    crate::support::wait_for("the next window", || async {
        (sim.get(ALICE, &path).await.status() == StatusCode::OK).then_some(())
    })
    .await;
    let stats = sim.stats().await;
    assert!(stats.keys["alice"].windows.len() >= 2);
    assert_eq!(stats.keys["alice"].max_reads_per_window, 1);
}
