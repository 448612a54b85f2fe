//! The daemon's reading of Sume's docs, checked against what is fixed outside this crate: the
//! signature vectors of `fixtures/sume/vectors` (computed by `openssl dgst -sha256 -hmac`,
//! `scripts/sume-vectors`) and the fragments the docs give (`fixtures/sume/docs`, each with
//! the sentence it comes from in `index.json`).

use std::path::PathBuf;

use serde_json::Value;
use sume_wire::{
    parse_event, sign, verify, ErrorEnvelope, JobObject, JobState, SignedHeaders, Status,
    VerifyError,
};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sume")
}

/// `(name, timestamp, secret, body, expected hex)` of every vector.
fn vectors() -> Vec<(String, i64, String, Vec<u8>, String)> {
    let dir = fixtures().join("vectors");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect(f);
    let lines = |text: String| -> Vec<Vec<String>> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect()
    };
    let expected = lines(read("expected.txt"));
    let cases = lines(read("cases.txt"));
    assert_eq!(expected.len(), cases.len(), "run scripts/sume-vectors");
    cases
        .into_iter()
        .zip(expected)
        .map(|(case, exp)| {
            assert_eq!(case[0], exp[0], "cases.txt and expected.txt out of step");
            let body = std::fs::read(dir.join(format!("{}.body", case[0]))).unwrap();
            (
                case[0].clone(),
                case[1].parse().unwrap(),
                case[2].clone(),
                body,
                exp[2].clone(),
            )
        })
        .collect()
}

fn doc(name: &str) -> Value {
    let text = std::fs::read_to_string(fixtures().join("docs").join(name)).expect(name);
    serde_json::from_str(&text).expect(name)
}

#[test]
fn signatures_match_the_openssl_vectors() {
    let all = vectors();
    assert!(all.len() >= 4);
    for (name, ts, secret, body, hex) in all {
        let secret = sume_wire::Secret::new(secret);
        assert_eq!(sign(&secret, ts, &body), hex, "vector {name}");
        let header = format!("v1={hex}");
        let ts_text = ts.to_string();
        let headers = SignedHeaders {
            timestamp: Some(&ts_text),
            signature: Some(&header),
        };
        assert_eq!(
            verify(headers, &body, std::slice::from_ref(&secret), ts, 300),
            Ok(0),
            "{name}"
        );
        let mut forged = hex.clone().into_bytes();
        forged[0] = if forged[0] == b'0' { b'1' } else { b'0' };
        let forged = format!("v1={}", String::from_utf8(forged).unwrap());
        let headers = SignedHeaders {
            timestamp: Some(&ts_text),
            signature: Some(&forged),
        };
        assert_eq!(
            verify(headers, &body, &[secret], ts, 300),
            Err(VerifyError::Mismatch),
            "{name}"
        );
    }
}

#[test]
fn every_fixture_cites_its_sentence() {
    let index = doc("index.json");
    let listed: Vec<&str> = index["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let source = f["source"].as_str().unwrap_or("");
            assert!(source.len() > 20, "{f} cites no sentence");
            assert!(
                f.get("assumption").is_some(),
                "{f} says nothing of assumptions"
            );
            f["file"].as_str().unwrap()
        })
        .collect();
    for entry in std::fs::read_dir(fixtures().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            name == "index.json" || listed.contains(&name.as_str()),
            "{name} is not in index.json"
        );
    }
}

#[test]
fn both_documented_webhook_shapes_name_their_job() {
    let guide = serde_json::to_vec(&doc("webhook_guide.json")).unwrap();
    let parsed = parse_event(&guide).unwrap();
    assert_eq!(parsed.job_id, "job_early");
    assert_eq!(parsed.event_type.as_deref(), Some("job.completed"));
    assert_eq!(parsed.status.as_deref(), Some("completed"));
    let envelope = serde_json::to_vec(&doc("webhook_envelope.json")).unwrap();
    let parsed = parse_event(&envelope).unwrap();
    assert_eq!(parsed.job_id, "job_...");
    assert_eq!(parsed.body_event_id.as_deref(), Some("evt_..."));
    assert_eq!(parsed.status.as_deref(), Some("completed"));
}

#[test]
fn documented_answers_deserialize() {
    let job: JobObject = serde_json::from_value(doc("job_object.json")).unwrap();
    assert_eq!(Status::parse(&job.status), Status::InFlight);
    let listed = doc("list_answer.json");
    for item in listed["data"].as_array().unwrap() {
        serde_json::from_value::<JobObject>(item.clone()).unwrap();
    }
    let created = doc("create_answer.json");
    let job: JobObject = serde_json::from_value(created["job"].clone()).unwrap();
    assert_eq!(job.status, "queued");
    let error: ErrorEnvelope = serde_json::from_value(doc("error_envelope.json")).unwrap();
    assert_eq!(error.error.code, "rate_limit_exceeded");
    assert_eq!(error.request_id.as_deref(), Some("req_..."));
}

#[test]
fn every_documented_status_spelling_means_what_the_docs_say() {
    let statuses = doc("statuses.json");
    for s in statuses["in_flight"].as_array().unwrap() {
        assert_eq!(Status::parse(s.as_str().unwrap()), Status::InFlight, "{s}");
    }
    let terminal = statuses["terminal"].as_object().unwrap();
    let mut count = 0;
    for (state, spellings) in terminal {
        let want: JobState = state.parse().unwrap();
        for s in spellings.as_array().unwrap() {
            assert_eq!(
                Status::parse(s.as_str().unwrap()),
                Status::Terminal(want),
                "{s}"
            );
            count += 1;
        }
    }
    assert_eq!(count, 10, "the docs name ten terminal spellings");
}
