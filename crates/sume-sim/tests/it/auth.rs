//! Keys: who may read which job, and how a key is presented.

use axum::http::StatusCode;
use serde_json::json;
use sume_wire::ErrorEnvelope;

use crate::support::{config, Sim, ALICE, ALICE_2, BOB, CAROL};

#[tokio::test]
async fn a_key_reads_only_its_members_jobs() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim.create(ALICE, json!({"prompt": "x"})).await;
    let path = format!("/jobs/{id}/status");
    assert_eq!(sim.get(ALICE, &path).await.status(), StatusCode::OK);
    assert_eq!(
        sim.get(ALICE_2, &path).await.status(),
        StatusCode::OK,
        "another key of the same member"
    );
    for (key, who) in [(BOB, "another member"), (CAROL, "another workspace")] {
        let r = sim.get(key, &path).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{who}");
        let body: ErrorEnvelope = r.json().await.unwrap();
        assert_eq!(body.error.code, "not_found");
    }
    let nobody = sim.get(ALICE, "/jobs/job_doesnotexist/status").await;
    assert_eq!(nobody.status(), StatusCode::NOT_FOUND);

    let truth = sim.truth(&id).await;
    assert_eq!(
        (
            truth.key.as_str(),
            truth.member.as_str(),
            truth.workspace.as_str()
        ),
        ("alice", "mem_alice", "ws_acme")
    );
}

#[tokio::test]
async fn a_missing_or_unknown_key_answers_401() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim.create(ALICE, json!({})).await;
    let url = sim.api(&format!("/jobs/{id}"));

    let missing = sim.http.get(&url).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    let body: ErrorEnvelope = missing.json().await.unwrap();
    assert_eq!(body.error.code, "missing_api_key");
    assert!(body.request_id.unwrap().starts_with("req_"));

    let unknown = sim.get("sk_test_mallory", &format!("/jobs/{id}")).await;
    assert_eq!(unknown.status(), StatusCode::UNAUTHORIZED);
    let body: ErrorEnvelope = unknown.json().await.unwrap();
    assert_eq!(body.error.code, "invalid_api_key");

    let create = sim
        .post("sk_test_mallory", "/videos/generations", json!({}))
        .await;
    assert_eq!(create.status(), StatusCode::UNAUTHORIZED);
    let stats = sim.stats().await;
    assert_eq!(stats.unauthorized_requests, 3);
}

#[tokio::test]
async fn the_older_x_api_key_header_works_too() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim.create(ALICE, json!({})).await;
    let read = |key: &'static str| {
        sim.http
            .get(sim.api(&format!("/jobs/{id}/status")))
            .header("X-Api-Key", key)
            .send()
    };
    assert_eq!(read(ALICE).await.unwrap().status(), StatusCode::OK);
    assert_eq!(read(BOB).await.unwrap().status(), StatusCode::NOT_FOUND);
    assert_eq!(
        read("nope").await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let created = sim
        .http
        .post(sim.api("/images/generations"))
        .header("X-Api-Key", ALICE)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::ACCEPTED);
}

#[tokio::test]
async fn the_api_answers_under_the_real_base_path_too() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim.create(ALICE, json!({})).await;
    let url = format!("{}/api/v1/jobs/{id}", sim.running.base_url());
    let r = sim.http.get(url).bearer_auth(ALICE).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let nowhere = sim.get(ALICE, "/no/such/endpoint").await;
    assert_eq!(nowhere.status(), StatusCode::NOT_FOUND);
    let body: ErrorEnvelope = nowhere.json().await.unwrap();
    assert_eq!(body.error.code, "not_found");
}
