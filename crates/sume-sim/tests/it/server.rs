//! Starting and stopping: `run` on a given listener, refusal of a bad config, and a stop
//! that does not wait for pending deliveries.

use serde_json::{json, Value};
use sume_sim::{RunningSim, SimConfig, WebhookState};
use sume_wire::Secret;
use tokio_util::sync::CancellationToken;

use crate::support::{config, wait_for, Answer, Receiver, Sim, ALICE, DEADLINE};

#[tokio::test]
async fn run_serves_a_listener_until_cancelled() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(sume_sim::run(
        config("http://127.0.0.1:9/unused"),
        listener,
        shutdown.clone(),
    ));
    let health: Value = reqwest::get(format!("http://{addr}/sim/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    shutdown.cancel();
    let ended = tokio::time::timeout(DEADLINE, server).await;
    ended.expect("run returns after cancel").unwrap().unwrap();
}

#[tokio::test]
async fn a_bad_config_is_refused_naming_the_setting() {
    let err = RunningSim::start(SimConfig::for_tests()).await.unwrap_err();
    assert!(err.to_string().contains("--key"), "{err}");
    let mut c = config("http://127.0.0.1:9/unused");
    c.delivery.webhook_attempts = 0;
    let err = RunningSim::start(c).await.unwrap_err();
    assert!(err.to_string().contains("--webhook-attempts"), "{err}");
}

#[tokio::test]
async fn stop_abandons_pending_deliveries() {
    let receiver = Receiver::scripted(
        vec![Secret::new(sume_sim::TEST_WEBHOOK_SECRET)],
        usize::MAX,
        Answer::Status(500),
    )
    .await;
    let mut c = config(&receiver.url);
    c.delivery.webhook_backoff_base = std::time::Duration::from_secs(3600);
    c.delivery.webhook_backoff_cap = std::time::Duration::from_secs(3600);
    let sim = Sim::start(c).await;
    let id = sim.create(ALICE, json!({})).await;
    let waiting = sim
        .create(ALICE, json!({"sim": {"duration_ms": 3_600_000}}))
        .await;
    wait_for("the first attempt", || async {
        let t = sim.truth(&id).await;
        (t.webhook.attempts == 1).then_some(())
    })
    .await;
    assert_eq!(sim.truth(&id).await.webhook.state, WebhookState::Delivering);
    assert_eq!(
        sim.truth(&waiting).await.webhook.state,
        WebhookState::Waiting
    );
    let stopped = tokio::time::timeout(DEADLINE, sim.running.stop()).await;
    stopped.expect("stop does not wait for backoff").unwrap();
}
