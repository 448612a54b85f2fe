//! Create, read and list: the shapes Sume answers, idempotency, status progression.

use axum::http::StatusCode;
use serde_json::{json, Value};
use sume_sim::JobsAnswer;

use crate::support::{config, wait_for, with_sim, Receiver, Sim, ALICE, BOB};

#[tokio::test]
async fn every_create_endpoint_answers_202_with_the_job() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    for (path, object) in [
        ("/videos/generations", "video_generation"),
        ("/images/generations", "image_generation"),
        ("/ads/videos", "ad_video"),
        ("/face-swap", "face_swap"),
        ("/reference-analysis", "reference_analysis"),
        ("/avatars", "avatar"),
        ("/avatar-videos", "avatar_video"),
    ] {
        let response = sim.post(ALICE, path, json!({"prompt": "x"})).await;
        assert_eq!(response.status(), StatusCode::ACCEPTED, "{path}");
        for h in [
            "ratelimit-limit",
            "ratelimit-remaining",
            "ratelimit-reset",
            "x-request-id",
        ] {
            assert!(response.headers().contains_key(h), "{path} lacks {h}");
        }
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["object"], object);
        assert_eq!(body["job"]["status"], "queued");
        let id = body["job"]["id"].as_str().unwrap();
        assert_eq!(body["job_id"], id);
        assert!(id.starts_with("job_") && id[4..].chars().all(|c| c.is_ascii_alphanumeric()));
    }
    let jobs: JobsAnswer = sim.sim_get("jobs").await;
    assert_eq!(jobs.count, 7);
}

#[tokio::test]
async fn idempotency_key_returns_the_same_job_per_key() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let create = |key: &'static str, idem: &'static str| {
        sim.http
            .post(sim.api("/videos/generations"))
            .bearer_auth(key)
            .header("Idempotency-Key", idem)
            .json(&json!({"prompt": "a"}))
            .send()
    };
    let first: Value = create(ALICE, "order-7")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let again = create(ALICE, "order-7").await.unwrap();
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(first["job_id"], again["job_id"]);
    let other_key: Value = create(BOB, "order-7").await.unwrap().json().await.unwrap();
    assert_ne!(
        first["job_id"], other_key["job_id"],
        "idempotency is per key"
    );
    let other_idem: Value = create(ALICE, "order-8")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(first["job_id"], other_idem["job_id"]);

    // Racing creates with one key make one job.
    let racing = futures_join(
        (0..10)
            .map(|_| create(ALICE, "order-9"))
            .collect::<Vec<_>>(),
    )
    .await;
    let mut ids: Vec<String> = Vec::new();
    for r in racing {
        let body: Value = r.unwrap().json().await.unwrap();
        ids.push(body["job_id"].as_str().unwrap().to_owned());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 1, "racing creates made {ids:?}");
    let jobs: JobsAnswer = sim.sim_get("jobs").await;
    assert_eq!(jobs.count, 4);
    let truth = sim.truth(&ids[0]).await;
    assert_eq!(truth.idempotency_key.as_deref(), Some("order-9"));
}

/// Awaits every future concurrently (spawned, so they really overlap).
async fn futures_join<F>(futures: Vec<F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test]
async fn bad_create_bodies_answer_400_in_the_envelope() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let raw = sim
        .http
        .post(sim.api("/videos/generations"))
        .bearer_auth(ALICE)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), StatusCode::BAD_REQUEST);
    let body: sume_wire::ErrorEnvelope = raw.json().await.unwrap();
    assert_eq!(body.error.code, "invalid_request");
    assert!(body.request_id.unwrap().starts_with("req_"));
    for bad in [
        json!({"webhook_url": "not a url"}),
        json!({"sim": {"outcome": "exploded"}}),
        json!({"sim": {"unknown_fault": true}}),
        json!([1, 2]),
    ] {
        let r = sim.post(ALICE, "/videos/generations", bad.clone()).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn status_moves_from_queued_through_running_to_terminal() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim
        .create(ALICE, with_sim(json!({"duration_ms": 400})))
        .await;
    let seen = std::cell::RefCell::new(Vec::<String>::new());
    let last: Value = wait_for("the job to end", || async {
        let r = sim.get(ALICE, &format!("/jobs/{id}/status")).await;
        assert_eq!(r.status(), StatusCode::OK);
        let job: Value = r.json().await.unwrap();
        let status = job["status"].as_str().unwrap().to_owned();
        let mut seen = seen.borrow_mut();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        (status == "completed").then_some(job)
    })
    .await;
    let order = ["queued", "running", "completed"];
    let seen = seen.into_inner();
    let ranks: Vec<usize> = seen
        .iter()
        .map(|s| order.iter().position(|o| o == s).expect("a known status"))
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] < w[1]), "went {seen:?}");
    assert_eq!(last["object"], "job");
    assert_eq!(last["id"], id.as_str());
    assert!(last["result"]["video"]["url"].is_string());
    for field in ["created_at", "completed_at"] {
        let t = last[field].as_str().unwrap();
        chrono::DateTime::parse_from_rfc3339(t).expect("RFC 3339");
    }
    let same: Value = sim
        .get(ALICE, &format!("/jobs/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(same, last, "/jobs/{{id}} and /jobs/{{id}}/status agree");
    let result: Value = sim
        .get(ALICE, &format!("/jobs/{id}/result"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(result["result"], last["result"]);
}

#[tokio::test]
async fn each_outcome_reads_as_its_terminal_status() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let mut jobs = Vec::new();
    for (outcome, want) in [
        ("completed", "completed"),
        ("failed", "failed"),
        ("canceled", "canceled"),
        ("expired", "expired"),
    ] {
        let body = with_sim(json!({"outcome": outcome, "duration_ms": 0}));
        jobs.push((sim.create(ALICE, body).await, want));
    }
    let avatar = sim
        .post(ALICE, "/avatars", with_sim(json!({"duration_ms": 0})))
        .await;
    let avatar: Value = avatar.json().await.unwrap();
    jobs.push((avatar["job_id"].as_str().unwrap().to_owned(), "ready"));
    for (id, want) in jobs {
        let job: sume_wire::JobObject = sim
            .get(ALICE, &format!("/jobs/{id}/status"))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(job.status, want);
        let terminal = sume_wire::Status::parse(&job.status).terminal();
        assert!(terminal.is_some(), "{want} is terminal to the daemon");
        if want == "completed" || want == "ready" {
            assert!(job.result.is_some() && job.error.is_none());
        } else {
            assert!(job.error.is_some() && job.result.is_none(), "{want}");
        }
    }
}

#[tokio::test]
async fn list_pages_through_the_members_jobs() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let mut mine = Vec::new();
    for _ in 0..5 {
        mine.push(sim.create(ALICE, json!({})).await);
        sim.create(BOB, json!({})).await;
    }
    let first: Value = sim.get(ALICE, "/jobs?limit=3").await.json().await.unwrap();
    assert_eq!(first["object"], "list");
    assert_eq!(first["data"].as_array().unwrap().len(), 3);
    assert_eq!(first["has_more"], true);
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest: Value = sim
        .get(ALICE, &format!("/jobs?limit=3&cursor={cursor}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(rest["has_more"], false);
    let mut listed: Vec<String> = first["data"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest["data"].as_array().unwrap())
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    listed.reverse();
    assert_eq!(listed, mine, "newest first, only Alice's member's jobs");
    let bad = sim.get(ALICE, "/jobs?limit=0").await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_status_client_reads_the_job_and_the_request_id_of_an_error() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    let id = sim.create(ALICE, json!({"prompt": "x"})).await;
    let client =
        sume_wire::StatusClient::new(&sim.running.api_url(), std::time::Duration::from_secs(5))
            .unwrap();
    let alice = sume_wire::Secret::new(ALICE);
    let found = client.job_status(&alice, &id).await.unwrap();
    assert_eq!(found.http_status, 200);
    assert!(matches!(found.outcome, sume_wire::StatusOutcome::Found(_)));
    // A 200's request id is its X-Request-Id, as every answer's is.
    let read_id = found.request_id.as_deref().unwrap_or_default();
    assert!(read_id.starts_with("req_"), "{read_id:?}");
    // Another workspace's key: 404, with Sume's request id from the error envelope.
    let missing = client
        .job_status(&sume_wire::Secret::new(BOB), &id)
        .await
        .unwrap();
    assert_eq!(missing.outcome, sume_wire::StatusOutcome::NotFound);
    assert!(
        missing
            .request_id
            .as_deref()
            .is_some_and(|r| r.starts_with("req_")),
        "{missing:?}"
    );
}
