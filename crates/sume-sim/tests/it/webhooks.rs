//! Webhook delivery: signatures, event ids, body shapes, retries and giving up.

use std::time::Duration;

use serde_json::json;
use sume_sim::{BodyShape, DeliveryKind, WebhookState, TEST_WEBHOOK_SECRET};
use sume_wire::Secret;

use crate::support::{config, with_sim, Answer, Receiver, Sim, ALICE};

#[tokio::test]
async fn a_finished_job_is_delivered_signed_with_its_event_id() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    let id = sim.create(ALICE, json!({"prompt": "x"})).await;
    let got = receiver.wait_for_job(&id, 1).await;
    let delivery = &got[0];
    assert!(delivery.verified, "signed with the configured secret");
    assert!(delivery.signature.starts_with("v1="));
    let ts: i64 = delivery.timestamp.parse().expect("unix seconds");
    assert!((chrono::Utc::now().timestamp() - ts).abs() < 300);
    let truth = sim.settled(&id).await;
    assert_eq!(truth.webhook.state, WebhookState::Delivered);
    assert_eq!(truth.webhook.attempts, 1);
    assert_eq!(delivery.event_id, truth.event_id);
    assert_eq!(delivery.event_id, sume_sim::event_id(&id, "job.completed"));

    let parsed = delivery.parsed();
    assert_eq!(parsed.status.as_deref(), Some("completed"));
    assert_eq!(
        parsed.body_event_id.as_deref(),
        Some(truth.event_id.as_str())
    );
    assert!(parsed.result.is_some());
    let body = delivery.json();
    assert_eq!(body["type"], "job.completed");
    assert_eq!(body["data"]["object"]["id"], id.as_str());
    assert!(delivery.body.len() > 200, "a realistic body");

    let log = sim.deliveries(&id).await;
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].answer, "204");
    assert_eq!(log[0].kind, DeliveryKind::Primary);
    assert!(!log[0].early && !log[0].wrong_secret);
}

#[tokio::test]
async fn the_guide_shape_carries_event_job_id_and_status() {
    let receiver = Receiver::start().await;
    let mut c = config(&receiver.url);
    c.body_shape = BodyShape::Guide;
    let sim = Sim::start(c).await;
    let id = sim
        .create(ALICE, with_sim(json!({"outcome": "failed"})))
        .await;
    let got = receiver.wait_for_job(&id, 1).await;
    let body = got[0].json();
    assert_eq!(body["event"], "job.failed");
    assert_eq!(body["job_id"], id.as_str());
    assert_eq!(body["status"], "failed");
    assert!(body["error"]["code"].is_string());
    let parsed = got[0].parsed();
    assert_eq!(parsed.event_type.as_deref(), Some("job.failed"));
    let result: serde_json::Value = serde_json::from_str(&parsed.result.unwrap()).unwrap();
    assert!(result["error"].is_object());
}

#[tokio::test]
async fn every_secret_signs_so_a_rotating_receiver_verifies() {
    let receiver =
        Receiver::scripted(vec![Secret::new("whsec_next")], 0, Answer::Status(500)).await;
    let mut c = config(&receiver.url);
    c.webhook_secrets = vec![
        sume_sim::Secret::new(TEST_WEBHOOK_SECRET),
        sume_sim::Secret::new("whsec_next"),
    ];
    let sim = Sim::start(c).await;
    let id = sim.create(ALICE, json!({})).await;
    let got = receiver.wait_for_job(&id, 1).await;
    assert!(got[0].verified);
    assert_eq!(got[0].signature.matches("v1=").count(), 2);
}

#[tokio::test]
async fn retries_repeat_the_event_id_and_re_sign_each_attempt() {
    let receiver = Receiver::scripted(
        vec![Secret::new(TEST_WEBHOOK_SECRET)],
        3,
        Answer::Status(500),
    )
    .await;
    let sim = Sim::start(config(&receiver.url)).await;
    let id = sim.create(ALICE, json!({})).await;
    let truth = sim.settled(&id).await;
    assert_eq!(truth.webhook.state, WebhookState::Delivered);
    assert_eq!(truth.webhook.attempts, 4);
    let got = receiver.for_job(&id);
    assert_eq!(got.len(), 4);
    assert!(got
        .iter()
        .all(|r| r.event_id == truth.event_id && r.verified));
    assert!(
        got.iter().all(|r| r.body == got[0].body),
        "the same bytes each time"
    );
    let log = sim.deliveries(&id).await;
    let answers: Vec<&str> = log.iter().map(|d| d.answer.as_str()).collect();
    assert_eq!(answers, ["500", "500", "500", "204"]);
    let attempts: Vec<u32> = log.iter().map(|d| d.attempt).collect();
    assert_eq!(attempts, [1, 2, 3, 4]);
}

#[tokio::test]
async fn ten_failed_attempts_and_the_event_is_given_up() {
    let receiver = Receiver::scripted(
        vec![Secret::new(TEST_WEBHOOK_SECRET)],
        usize::MAX,
        Answer::Status(503),
    )
    .await;
    let sim = Sim::start(config(&receiver.url)).await;
    let id = sim.create(ALICE, json!({})).await;
    let truth = sim.settled(&id).await;
    assert_eq!(truth.webhook.state, WebhookState::GaveUp);
    assert_eq!(truth.webhook.attempts, 10);
    let log = sim.deliveries(&id).await;
    assert_eq!(log.len(), 10);
    assert!(log.iter().all(|d| d.answer == "503" && !d.ok));
    assert_eq!(log.last().unwrap().attempt, 10);
    assert_eq!(receiver.for_job(&id).len(), 10);
}

#[tokio::test]
async fn a_timeout_spends_an_attempt() {
    let receiver = Receiver::scripted(
        vec![Secret::new(TEST_WEBHOOK_SECRET)],
        1,
        Answer::Hang(Duration::from_secs(5)),
    )
    .await;
    let mut c = config(&receiver.url);
    c.delivery.webhook_timeout = Duration::from_millis(200);
    let sim = Sim::start(c).await;
    let id = sim.create(ALICE, json!({})).await;
    let truth = sim.settled(&id).await;
    assert_eq!(truth.webhook.state, WebhookState::Delivered);
    let log = sim.deliveries(&id).await;
    let answers: Vec<&str> = log.iter().map(|d| d.answer.as_str()).collect();
    assert_eq!(answers, ["timeout", "204"]);
}

#[tokio::test]
async fn an_unreachable_receiver_is_logged_as_an_error() {
    let mut c = config("http://127.0.0.1:9/webhooks/sume");
    c.delivery.webhook_attempts = 2;
    let sim = Sim::start(c).await;
    let id = sim.create(ALICE, json!({})).await;
    let truth = sim.settled(&id).await;
    assert_eq!(truth.webhook.state, WebhookState::GaveUp);
    let log = sim.deliveries(&id).await;
    assert_eq!(log.len(), 2);
    assert!(log[0].answer.starts_with("error: "), "{}", log[0].answer);
    assert_eq!(log[0].http_status, None);
}

#[tokio::test]
async fn a_job_without_a_webhook_url_is_only_polled() {
    let mut c = config("http://127.0.0.1:9/unused");
    c.webhook_url = None;
    let sim = Sim::start(c).await;
    let id = sim.create(ALICE, json!({})).await;
    let truth = sim.settled(&id).await;
    assert_eq!(truth.webhook.state, WebhookState::NoWebhookUrl);
    assert!(truth.terminal);
    assert!(sim.deliveries(&id).await.is_empty());
}

#[tokio::test]
async fn the_body_webhook_url_beats_the_default() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim
        .create(ALICE, json!({"webhook_url": receiver.url}))
        .await;
    receiver.wait_for_job(&id, 1).await;
    assert_eq!(
        sim.truth(&id).await.webhook_url.as_deref(),
        Some(receiver.url.as_str())
    );
}
