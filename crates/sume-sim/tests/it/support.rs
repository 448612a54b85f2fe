//! What every test shares: a simulator with four keys, a client for its API and `/sim/`
//! endpoints, a webhook receiver that verifies signatures, and waiting with a deadline.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use sume_sim::{
    DeliveriesAnswer, DeliveryRecord, JobTruth, RequestRecord, RunningSim, SimConfig, SimStats,
    TEST_WEBHOOK_SECRET,
};
use sume_wire::{headers, verify, Secret, SignedHeaders};
use tokio_util::sync::CancellationToken;

pub const ALICE: &str = "sk_test_alice";
/// A second key of Alice's member: sees Alice's jobs.
pub const ALICE_2: &str = "sk_test_alice_2";
/// Another member of Alice's workspace.
pub const BOB: &str = "sk_test_bob";
/// A member of another workspace.
pub const CAROL: &str = "sk_test_carol";

/// How long any awaited condition may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(15);

/// The test configuration: four keys, webhooks to `webhook_url`.
pub fn config(webhook_url: &str) -> SimConfig {
    SimConfig::for_tests()
        .with_key("alice", ALICE, "mem_alice", "ws_acme")
        .with_key("alice-2", ALICE_2, "mem_alice", "ws_acme")
        .with_key("bob", BOB, "mem_bob", "ws_acme")
        .with_key("carol", CAROL, "mem_carol", "ws_other")
        .with_webhook_url(webhook_url)
}

/// Polls `probe` until it answers `Some`, failing the test after [`DEADLINE`].
pub async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A client of one running simulator.
pub struct Sim {
    pub running: RunningSim,
    pub http: reqwest::Client,
}

impl Sim {
    pub async fn start(config: SimConfig) -> Sim {
        Sim {
            running: RunningSim::start(config).await.expect("simulator starts"),
            http: reqwest::Client::new(),
        }
    }

    pub fn api(&self, path: &str) -> String {
        format!("{}{path}", self.running.api_url())
    }

    /// `POST /v1{path}` with `key` as bearer.
    pub async fn post(&self, key: &str, path: &str, body: Value) -> reqwest::Response {
        self.http
            .post(self.api(path))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .expect("create call")
    }

    /// Creates a video job for `key` and answers its id.
    pub async fn create(&self, key: &str, body: Value) -> String {
        let response = self.post(key, "/videos/generations", body).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        let body: Value = response.json().await.unwrap();
        body["job_id"].as_str().expect("job_id").to_owned()
    }

    pub async fn get(&self, key: &str, path: &str) -> reqwest::Response {
        self.http
            .get(self.api(path))
            .bearer_auth(key)
            .send()
            .await
            .expect("read call")
    }

    pub async fn sim_get<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let response = self
            .http
            .get(self.running.sim_url(path))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        response.json().await.expect("inspection JSON")
    }

    pub async fn truth(&self, job_id: &str) -> JobTruth {
        self.sim_get(&format!("jobs/{job_id}")).await
    }

    pub async fn deliveries(&self, job_id: &str) -> Vec<DeliveryRecord> {
        let answer: DeliveriesAnswer = self.sim_get(&format!("deliveries?job_id={job_id}")).await;
        answer.deliveries
    }

    pub async fn requests(&self, job_id: &str) -> Vec<RequestRecord> {
        let answer: sume_sim::RequestsAnswer =
            self.sim_get(&format!("requests?job_id={job_id}")).await;
        answer.requests
    }

    pub async fn stats(&self) -> SimStats {
        self.sim_get("stats").await
    }

    pub async fn patch_faults(&self, patch: Value) -> reqwest::Response {
        self.http
            .patch(self.running.sim_url("faults"))
            .json(&patch)
            .send()
            .await
            .unwrap()
    }

    /// Waits until the job's every delivery is done, and answers its truth.
    pub async fn settled(&self, job_id: &str) -> JobTruth {
        wait_for("the job's deliveries to settle", || async {
            let t = self.truth(job_id).await;
            t.webhook.settled.then_some(t)
        })
        .await
    }
}

/// How the receiver answers.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    Status(u16),
    /// Answers 204 only after this long (past the simulator's timeout, it is a timeout).
    Hang(Duration),
}

/// One delivery the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub event_id: String,
    pub timestamp: String,
    pub signature: String,
    pub body: Vec<u8>,
    /// Whether the signature verified under the receiver's secrets.
    pub verified: bool,
    pub answered: u16,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }

    pub fn parsed(&self) -> sume_wire::ParsedEvent {
        sume_wire::parse_event(&self.body).expect("body parses")
    }
}

struct ReceiverState {
    secrets: Vec<Secret>,
    /// The first `fail_first` deliveries of each event id get `failure`.
    fail_first: usize,
    failure: Answer,
    got: Mutex<Vec<Received>>,
}

/// A webhook consumer: verifies each delivery with `sume_wire::verify` (401 when it fails)
/// and otherwise answers 204, or the scripted failure for each event's first deliveries.
pub struct Receiver {
    pub url: String,
    state: Arc<ReceiverState>,
    stop: CancellationToken,
}

impl Receiver {
    pub async fn start() -> Receiver {
        Receiver::scripted(
            vec![Secret::new(TEST_WEBHOOK_SECRET)],
            0,
            Answer::Status(500),
        )
        .await
    }

    pub async fn scripted(secrets: Vec<Secret>, fail_first: usize, failure: Answer) -> Receiver {
        let state = Arc::new(ReceiverState {
            secrets,
            fail_first,
            failure,
            got: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/webhooks/sume", post(receive))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let url = format!("http://{}/webhooks/sume", listener.local_addr().unwrap());
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(until.cancelled_owned())
                .await
                .unwrap();
        });
        Receiver { url, state, stop }
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.got.lock().unwrap().clone()
    }

    /// Deliveries of `job_id`'s events, in arrival order.
    pub fn for_job(&self, job_id: &str) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.parsed().job_id == job_id)
            .collect()
    }

    /// Waits until `n` deliveries of `job_id` have arrived.
    pub async fn wait_for_job(&self, job_id: &str, n: usize) -> Vec<Received> {
        wait_for(&format!("{n} deliveries of {job_id}"), || async {
            let got = self.for_job(job_id);
            (got.len() >= n).then_some(got)
        })
        .await
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signed = SignedHeaders {
        timestamp: header(headers::TIMESTAMP),
        signature: header(headers::SIGNATURE),
    };
    let now = chrono::Utc::now().timestamp();
    let verified = verify(signed, &body, &state.secrets, now, 300).is_ok();
    let event_id = header(headers::EVENT_ID).unwrap_or_default().to_owned();
    let seen_before = {
        let got = state.got.lock().unwrap();
        got.iter().filter(|r| r.event_id == event_id).count()
    };
    let answer = if !verified {
        Answer::Status(401)
    } else if seen_before < state.fail_first {
        state.failure
    } else {
        Answer::Status(204)
    };
    let code = match answer {
        Answer::Status(code) => code,
        Answer::Hang(_) => 204,
    };
    state.got.lock().unwrap().push(Received {
        event_id,
        timestamp: header(headers::TIMESTAMP).unwrap_or_default().to_owned(),
        signature: header(headers::SIGNATURE).unwrap_or_default().to_owned(),
        body: body.to_vec(),
        verified,
        answered: code,
    });
    if let Answer::Hang(d) = answer {
        tokio::time::sleep(d).await;
    }
    StatusCode::from_u16(code).unwrap()
}

/// A create body forcing faults for one job.
pub fn with_sim(sim: Value) -> Value {
    json!({ "prompt": "a lighthouse at dusk, slow pan", "sim": sim })
}
