//! The `/sim/` endpoints, and a run of a few thousand jobs that they account for in full.

use std::collections::HashSet;

use axum::http::StatusCode;
use serde_json::{json, Value};
use sume_sim::{DeliveriesAnswer, JobsAnswer, RequestsAnswer, SimStats};

use crate::support::{config, wait_for, Receiver, Sim, ALICE, BOB};

#[tokio::test]
async fn inspection_endpoints_tell_the_truth() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    let health: Value = sim.sim_get("healthz").await;
    assert_eq!(health["status"], "ok");

    let id = sim.create(ALICE, json!({"prompt": "x"})).await;
    sim.create(BOB, json!({})).await;
    sim.settled(&id).await;
    let read = sim.get(ALICE, &format!("/jobs/{id}/status")).await;
    assert_eq!(read.status(), StatusCode::OK);

    let jobs: JobsAnswer = sim.sim_get("jobs").await;
    assert_eq!(jobs.count, 2);
    let alices: JobsAnswer = sim.sim_get("jobs?key=alice").await;
    assert_eq!(alices.count, 1);
    let truth = &alices.jobs[0];
    assert_eq!(truth.id, id);
    assert_eq!(truth.kind, "video_generation");
    assert_eq!(truth.webhook_url.as_deref(), Some(receiver.url.as_str()));
    assert_eq!(truth.final_status, "completed");
    assert!(truth.terminal);
    assert_eq!(truth.body_shape, "envelope");
    assert_eq!(truth.status_reads, 1);

    let unknown = sim
        .http
        .get(sim.running.sim_url("jobs/job_nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);

    let deliveries: DeliveriesAnswer = sim.sim_get(&format!("deliveries?job_id={id}")).await;
    assert_eq!((deliveries.count, deliveries.dropped), (1, 0));
    let d = &deliveries.deliveries[0];
    assert_eq!((d.event_type.as_str(), d.attempt), ("job.completed", 1));
    chrono::DateTime::parse_from_rfc3339(&d.sent_at).unwrap();

    let requests: RequestsAnswer = sim.sim_get("requests?key=alice").await;
    let routes: Vec<(&str, &str, u16)> = requests
        .requests
        .iter()
        .map(|r| (r.method.as_str(), r.route.as_str(), r.status))
        .collect();
    assert_eq!(
        routes,
        [
            ("POST", "/v1/videos/generations", 202),
            ("GET", "/v1/jobs/{id}/status", 200)
        ]
    );
    assert!(requests
        .requests
        .iter()
        .all(|r| r.job_id.as_deref() == Some(id.as_str())));

    let stats: SimStats = sim.sim_get("stats").await;
    assert_eq!(stats.jobs, 2);
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.keys["alice"].counts.reads, 1);
    assert_eq!(stats.keys["alice"].counts.creates, 1);
    assert_eq!(stats.keys["bob"].member, "mem_bob");
    assert_eq!(stats.keys["carol"].counts.requests, 0);

    let faults: Value = sim.sim_get("faults").await;
    assert_eq!(faults["status_429"], 0.0);
}

#[tokio::test]
async fn two_thousand_jobs_are_all_delivered_and_accounted_for() {
    const JOBS: usize = 2000;
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..16 {
        let http = sim.http.clone();
        let url = sim.api("/videos/generations");
        tasks.spawn(async move {
            let mut ids = Vec::new();
            for n in (worker..JOBS).step_by(16) {
                let r = http
                    .post(&url)
                    .bearer_auth(ALICE)
                    .json(&json!({"prompt": format!("clip {n}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::ACCEPTED);
                let body: Value = r.json().await.unwrap();
                ids.push(body["job_id"].as_str().unwrap().to_owned());
            }
            ids
        });
    }
    let mut ids = HashSet::new();
    while let Some(batch) = tasks.join_next().await {
        ids.extend(batch.unwrap());
    }
    assert_eq!(ids.len(), JOBS);
    let stats = wait_for("every job to settle", || async {
        let stats = sim.stats().await;
        (stats.jobs == JOBS && stats.unsettled_jobs == 0).then_some(stats)
    })
    .await;
    assert_eq!(stats.webhooks_by_state["delivered"], JOBS as u64);
    assert_eq!(stats.delivery_attempts, JOBS as u64);
    let deliveries: DeliveriesAnswer = sim.sim_get("deliveries").await;
    assert_eq!((deliveries.count, deliveries.dropped), (JOBS, 0));
    let got = receiver.received();
    let delivered: HashSet<String> = got.iter().map(|r| r.parsed().job_id).collect();
    assert_eq!(delivered, ids);
    assert!(got.iter().all(|r| r.verified));
    let requests: RequestsAnswer = sim.sim_get("requests").await;
    assert_eq!(requests.count, JOBS);
}
