//! The daemon's public port against the signature vectors of `fixtures/sume/vectors`, computed
//! by `openssl dgst -sha256 -hmac` (`scripts/sume-vectors`): each vector's body, timestamp and
//! signature, sent as they are, is stored; the same with one hex digit changed is refused 401.

use std::path::PathBuf;
use std::time::Duration;

use sume_wire::Secret;

use crate::support::*;

/// `(name, timestamp, secret, body, hex)` of every vector.
fn vectors() -> Vec<(String, String, String, Vec<u8>, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sume/vectors");
    let lines = |f: &str| -> Vec<Vec<String>> {
        std::fs::read_to_string(dir.join(f))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect()
    };
    lines("cases.txt")
        .into_iter()
        .zip(lines("expected.txt"))
        .map(|(c, e)| {
            let body = std::fs::read(dir.join(format!("{}.body", c[0]))).unwrap();
            (c[0].clone(), c[1].clone(), c[2].clone(), body, e[2].clone())
        })
        .collect()
}

async fn post(http: &reqwest::Client, url: &str, ts: &str, sig: &str, body: &[u8]) -> u16 {
    http.post(url)
        .header("content-type", "application/json")
        .header("x-sume-timestamp", ts)
        .header("x-sume-signature", sig)
        .body(body.to_vec())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn deliveries_signed_as_openssl_signs_them_are_stored_and_altered_ones_refused() {
    let db = TestDb::new().await;
    let all = vectors();
    let mut cfg = config(&db.url);
    cfg.webhook_secrets = all.iter().map(|v| Secret::new(v.2.as_str())).collect();
    // The vectors' timestamps are fixed (one is 0): a tolerance of a century admits them.
    cfg.webhook_tolerance = Duration::from_secs(100 * 365 * 86_400);
    let daemon = Daemon::start(cfg).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    for (name, ts, _, body, hex) in &all {
        let mut altered = hex.clone().into_bytes();
        altered[63] = if altered[63] == b'0' { b'1' } else { b'0' };
        let altered = format!("v1={}", String::from_utf8(altered).unwrap());
        assert_eq!(
            post(&http, &url, ts, &altered, body).await,
            401,
            "{name} altered"
        );
        assert_eq!(
            post(&http, &url, ts, &format!("v1={hex}"), body).await,
            204,
            "{name}"
        );
    }
    let jobs = db.event_job_ids().await;
    for job in ["job_early", "job_1", "job_été"] {
        assert!(jobs.contains(job), "{job} not stored: {jobs:?}");
    }
    assert_eq!(
        db.scalar("select count(*) from sume.dead_letters").await,
        1,
        "the empty body, verified, names no job"
    );
    daemon.stop().await;
}
