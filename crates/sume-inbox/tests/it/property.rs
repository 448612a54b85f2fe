//! Any bytes, as body or headers, against a running daemon: never a panic or a dead task, never
//! a 2xx without a stored row, and a 5xx only ever a 503 with `Retry-After`.

use std::time::Duration;

use proptest::prelude::*;
use sume_wire::{body_key, dedupe_key, parse_event, signature_header, Secret};

use crate::support::*;

/// One request as the strategy draws it.
#[derive(Debug, Clone)]
struct Attempt {
    body: Vec<u8>,
    /// Sign the body correctly (else `signature` as drawn).
    signed: bool,
    timestamp: Option<String>,
    signature: Option<String>,
    event_id: Option<String>,
}

fn json_body() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::option::of("[a-z_]{0,12}|\\PC{0,8}"),
        prop::option::of("completed|failed|running|queued|\\PC{0,6}"),
        prop::bool::ANY,
    )
        .prop_map(|(job_id, status, envelope)| {
            let v = if envelope {
                serde_json::json!({"id": job_id.clone().map(|j| format!("evt_{j}")),
                                   "type": "job.completed",
                                   "data": {"object": {"id": job_id, "status": status}}})
            } else {
                serde_json::json!({"event": "job.completed", "job_id": job_id, "status": status})
            };
            v.to_string().into_bytes()
        })
}

fn attempt() -> impl Strategy<Value = Attempt> {
    (
        prop_oneof![prop::collection::vec(any::<u8>(), 0..512), json_body()],
        prop::bool::weighted(0.6),
        prop::option::of(prop_oneof!["[0-9]{1,12}", "\\PC{0,20}"]),
        prop::option::of(prop_oneof![
            "v1=[0-9a-f]{64}",
            "(v1=[0-9a-f]{0,64},){0,8}",
            "\\PC{0,40}"
        ]),
        prop::option::of("[ -~]{0,40}"),
    )
        .prop_map(|(body, signed, timestamp, signature, event_id)| Attempt {
            body,
            signed,
            timestamp,
            signature,
            event_id,
        })
}

/// Whether what a 2xx promised is in the database.
async fn stored(db: &TestDb, body: &[u8]) -> bool {
    let c = db.client().await;
    let (sql, key) = match parse_event(body) {
        Ok(event) => (
            "select count(*) from sume.events where event_id = $1",
            dedupe_key(&event),
        ),
        Err(_) => (
            "select count(*) from sume.dead_letters where dead_letter_id = $1",
            body_key(body),
        ),
    };
    c.query_one(sql, &[&key]).await.unwrap().get::<_, i64>(0) == 1
}

#[test]
fn any_bytes_as_body_or_headers_keep_the_promise() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(TestDb::new());
    let daemon = rt.block_on(Daemon::start(config(&db.url)));
    let url = daemon.url("/webhooks/sume");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let cases = ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(cases, |(a in attempt())| {
        let (status, retry_after) = rt.block_on(async {
            let mut req = http.post(&url).body(a.body.clone());
            let now = unix_now();
            if a.signed {
                req = req
                    .header("x-sume-timestamp", now.to_string())
                    .header(
                        "x-sume-signature",
                        signature_header(&[Secret::new(SECRET)], now, &a.body),
                    );
            } else {
                if let Some(ts) = &a.timestamp {
                    req = req.header("x-sume-timestamp", ts.as_str());
                }
                if let Some(sig) = &a.signature {
                    req = req.header("x-sume-signature", sig.as_str());
                }
            }
            if let Some(id) = &a.event_id {
                req = req.header("x-sume-event-id", id.as_str());
            }
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.headers().contains_key("retry-after"))
        });
        prop_assert!(
            matches!(status, 204 | 400 | 401 | 408 | 413 | 503),
            "answered {}", status
        );
        if status >= 500 {
            prop_assert!(status == 503 && retry_after, "a 5xx is a 503 with Retry-After");
        }
        if status == 204 {
            prop_assert!(a.signed, "only a signed delivery is answered 2xx");
            prop_assert!(rt.block_on(stored(&db, &a.body)), "answered 204 but not stored");
        }
    });
    // The daemon is still whole: every task alive.
    let health = rt.block_on(async {
        http.get(daemon.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(health, 200);
    rt.block_on(daemon.stop());
}
