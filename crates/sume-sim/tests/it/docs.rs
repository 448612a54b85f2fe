//! The simulator against what is fixed outside Rust and outside `sume-wire`: its own signing
//! against the openssl vectors of `fixtures/sume/vectors`, and its answers and webhook bodies
//! against the fragments the docs give (`fixtures/sume/docs`, each citing its sentence).

use std::path::PathBuf;

use serde_json::{json, Value};
use sume_sim::wire::{hmac_hex, signature_value, Secret};
use sume_sim::BodyShape;

use crate::support::{config, with_sim, Receiver, Sim, ALICE};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sume")
}

fn doc(name: &str) -> Value {
    let text = std::fs::read_to_string(fixtures().join("docs").join(name)).expect(name);
    serde_json::from_str(&text).expect(name)
}

fn lines(name: &str) -> Vec<Vec<String>> {
    std::fs::read_to_string(fixtures().join("vectors").join(name))
        .expect(name)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// Every status spelling the docs name.
fn documented_statuses() -> Vec<String> {
    let s = doc("statuses.json");
    let mut all: Vec<Value> = s["in_flight"].as_array().unwrap().clone();
    for spellings in s["terminal"].as_object().unwrap().values() {
        all.extend(spellings.as_array().unwrap().iter().cloned());
    }
    all.iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

/// Whether `actual` has everything the documented `fragment` shows: each key (recursively),
/// with a value of the same JSON type; `object`, `event` and `code` with the same value
/// (a value ending in `...` as a prefix); `status` one of the documented spellings.
fn conforms(fragment: &Value, actual: &Value, at: &str, statuses: &[String]) {
    match (fragment, actual) {
        (Value::Object(f), Value::Object(a)) => {
            for (k, fv) in f {
                let path = format!("{at}.{k}");
                let av = a
                    .get(k)
                    .unwrap_or_else(|| panic!("{path} missing in {actual}"));
                if k == "status" {
                    let s = av.as_str().unwrap_or_default();
                    assert!(
                        statuses.iter().any(|d| d == s),
                        "{path}: {s} is not documented"
                    );
                    continue;
                }
                if let (true, Some(fs), Some(s)) = (
                    ["object", "event", "code"].contains(&k.as_str()),
                    fv.as_str(),
                    av.as_str(),
                ) {
                    match fs.strip_suffix("...") {
                        Some(prefix) => assert!(s.starts_with(prefix), "{path}: {s}"),
                        None => assert_eq!(fs, s, "{path}"),
                    }
                }
                conforms(fv, av, &path, statuses);
            }
        }
        (Value::Array(f), Value::Array(a)) => {
            if let Some(first) = f.first() {
                assert!(!a.is_empty(), "{at}: empty list");
                for item in a {
                    conforms(first, item, at, statuses);
                }
            }
        }
        (Value::String(f), Value::String(a)) => {
            if let Some(prefix) = f.strip_suffix("...") {
                assert!(
                    a.starts_with(prefix),
                    "{at}: {a} does not start with {prefix}"
                );
            }
        }
        (f, a) => assert_eq!(
            std::mem::discriminant(f),
            std::mem::discriminant(a),
            "{at}: {a} is not shaped like {f}"
        ),
    }
}

#[test]
fn own_signing_matches_the_openssl_vectors() {
    let cases = lines("cases.txt");
    let expected = lines("expected.txt");
    assert_eq!(cases.len(), expected.len(), "run scripts/sume-vectors");
    assert!(cases.len() >= 4);
    for (case, exp) in cases.iter().zip(&expected) {
        assert_eq!(case[0], exp[0]);
        let body =
            std::fs::read(fixtures().join("vectors").join(format!("{}.body", case[0]))).unwrap();
        let ts: i64 = case[1].parse().unwrap();
        let secret = Secret::new(case[2].clone());
        assert_eq!(hmac_hex(&secret, ts, &body), exp[2], "vector {}", case[0]);
        let two = signature_value(&[Secret::new("other"), secret], ts, &body);
        assert!(two.ends_with(&format!(",v1={}", exp[2])), "{two}");
    }
}

#[tokio::test]
async fn answers_have_every_documented_field() {
    let statuses = documented_statuses();
    let mut c = config("http://127.0.0.1:9/unused");
    c.limits.reads_per_window = 3;
    c.limits.rate_window = std::time::Duration::from_secs(3600);
    let sim = Sim::start(c).await;
    let created = sim.post(ALICE, "/videos/generations", json!({})).await;
    assert_eq!(created.status(), 202);
    let created: Value = created.json().await.unwrap();
    conforms(&doc("create_answer.json"), &created, "create", &statuses);
    let id = created["job"]["id"].as_str().unwrap();
    let job: Value = sim
        .get(ALICE, &format!("/jobs/{id}"))
        .await
        .json()
        .await
        .unwrap();
    conforms(&doc("job_object.json"), &job, "job", &statuses);
    sim.create(ALICE, json!({})).await;
    let list: Value = sim.get(ALICE, "/jobs?limit=1").await.json().await.unwrap();
    conforms(&doc("list_answer.json"), &list, "list", &statuses);
    sim.get(ALICE, "/jobs").await;
    let refused = sim.get(ALICE, "/jobs").await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let refused: Value = refused.json().await.unwrap();
    conforms(&doc("error_envelope.json"), &refused, "429", &statuses);
}

#[tokio::test]
async fn webhook_bodies_of_both_shapes_have_every_documented_field() {
    let statuses = documented_statuses();
    for (shape, fragment) in [
        (BodyShape::Guide, "webhook_guide.json"),
        (BodyShape::Envelope, "webhook_envelope.json"),
    ] {
        let receiver = Receiver::start().await;
        let mut c = config(&receiver.url);
        c.body_shape = shape;
        let sim = Sim::start(c).await;
        let id = sim
            .create(ALICE, with_sim(json!({"outcome": "completed"})))
            .await;
        let got = receiver.wait_for_job(&id, 1).await;
        assert!(
            got[0].verified,
            "the daemon's verify accepts the simulator's own signature"
        );
        let body: Value = serde_json::from_slice(&got[0].body).unwrap();
        conforms(&doc(fragment), &body, fragment, &statuses);
    }
}
