//! Injected faults: early, duplicate, dropped, late and wrongly signed webhooks; slow,
//! failing and rate-limited status reads, switched on mid-run.

use axum::http::StatusCode;
use serde_json::{json, Value};
use sume_sim::{DeliveryKind, Faults, WebhookState};
use sume_wire::ErrorEnvelope;

use crate::support::{config, wait_for, with_sim, Receiver, Sim, ALICE};

#[tokio::test]
async fn an_early_webhook_arrives_before_the_create_call_answers() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    let response = sim
        .post(
            ALICE,
            "/videos/generations",
            with_sim(json!({"early": true})),
        )
        .await;
    // Taken the moment the 202 is in hand: the delivery must already be there.
    let got_before_answer = receiver.received();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let body: Value = response.json().await.unwrap();
    let id = body["job_id"].as_str().unwrap();
    assert_eq!(body["job"]["status"], "queued");
    assert_eq!(got_before_answer.len(), 1, "the webhook beat the 202");
    assert_eq!(got_before_answer[0].parsed().job_id, id);
    assert!(got_before_answer[0].verified);
    let truth = sim.settled(id).await;
    assert!(truth.faults.early);
    assert!(truth.terminal);
    let log = sim.deliveries(id).await;
    assert!(log[0].early, "the log marks the early attempt");
}

#[tokio::test]
async fn a_duplicate_repeats_the_event_after_success() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    let id = sim.create(ALICE, with_sim(json!({"duplicate": 2}))).await;
    let truth = sim.settled(&id).await;
    let got = receiver.for_job(&id);
    assert_eq!(got.len(), 3);
    assert!(got
        .iter()
        .all(|r| r.event_id == truth.event_id && r.verified));
    let kinds: Vec<DeliveryKind> = sim.deliveries(&id).await.iter().map(|d| d.kind).collect();
    assert_eq!(
        kinds,
        [
            DeliveryKind::Primary,
            DeliveryKind::Duplicate,
            DeliveryKind::Duplicate
        ]
    );
    assert_eq!(truth.faults.duplicate, 2);
}

#[tokio::test]
async fn a_dropped_webhook_is_never_sent_but_the_job_still_ends() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    let id = sim.create(ALICE, with_sim(json!({"drop": true}))).await;
    let truth = sim.settled(&id).await;
    assert_eq!(truth.webhook.state, WebhookState::Dropped);
    assert!(truth.faults.drop);
    assert!(sim.deliveries(&id).await.is_empty());
    assert!(receiver.for_job(&id).is_empty());
    let job: Value = sim
        .get(ALICE, &format!("/jobs/{id}/status"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        job["status"], "completed",
        "polling still learns the outcome"
    );
}

#[tokio::test]
async fn a_late_running_event_follows_the_terminal_one() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    let id = sim
        .create(ALICE, with_sim(json!({"late_nonterminal": true})))
        .await;
    let got = receiver.wait_for_job(&id, 2).await;
    let statuses: Vec<String> = got.iter().map(|r| r.parsed().status.unwrap()).collect();
    assert_eq!(statuses, ["completed", "running"]);
    assert_ne!(
        got[0].event_id, got[1].event_id,
        "the late event has its own id"
    );
    assert_eq!(got[1].event_id, sume_sim::event_id(&id, "job.running"));
    assert_eq!(got[1].json()["type"], "job.running");
    sim.settled(&id).await;
    let log = sim.deliveries(&id).await;
    assert_eq!(log.last().unwrap().kind, DeliveryKind::Late);
}

#[tokio::test]
async fn a_wrong_secret_spends_every_attempt_on_401s() {
    let receiver = Receiver::start().await;
    let sim = Sim::start(config(&receiver.url)).await;
    let id = sim
        .create(ALICE, with_sim(json!({"wrong_secret": true})))
        .await;
    let truth = sim.settled(&id).await;
    assert_eq!(truth.webhook.state, WebhookState::GaveUp);
    let log = sim.deliveries(&id).await;
    assert_eq!(log.len(), 10);
    assert!(log.iter().all(|d| d.wrong_secret && d.answer == "401"));
    assert!(receiver
        .for_job(&id)
        .iter()
        .all(|r| !r.verified && r.answered == 401));
}

#[tokio::test]
async fn probabilities_apply_without_overrides() {
    let receiver = Receiver::start().await;
    let mut faults = Faults::none();
    faults.failed = 1.0;
    faults.duplicate = 1.0;
    let sim = Sim::start(config(&receiver.url).with_faults(faults)).await;
    let id = sim.create(ALICE, json!({})).await;
    let truth = sim.settled(&id).await;
    assert_eq!(truth.final_status, "failed");
    assert_eq!(truth.faults.duplicate, 1);
    assert_eq!(receiver.for_job(&id).len(), 2);
}

#[tokio::test]
async fn status_faults_switch_on_and_off_mid_run() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim.create(ALICE, json!({})).await;
    let path = format!("/jobs/{id}/status");
    assert_eq!(sim.get(ALICE, &path).await.status(), StatusCode::OK);

    let r = sim.patch_faults(json!({"status_5xx": 1.0})).await;
    assert_eq!(r.status(), StatusCode::OK);
    let failing = sim.get(ALICE, &path).await;
    assert!(failing.status().is_server_error());
    let body: ErrorEnvelope = failing.json().await.unwrap();
    assert_eq!(body.error.code, "internal_error");

    sim.patch_faults(json!({"status_5xx": 0.0, "status_429": 1.0, "status_429_retry_after": "3s"}))
        .await;
    let limited = sim.get(ALICE, &path).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.headers()["retry-after"], "3");
    assert_eq!(limited.headers()["ratelimit-remaining"], "0");
    let body: ErrorEnvelope = limited.json().await.unwrap();
    assert_eq!(body.error.code, "rate_limit_exceeded");

    sim.patch_faults(json!({"status_429": 0.0})).await;
    assert_eq!(sim.get(ALICE, &path).await.status(), StatusCode::OK);

    let log = sim.requests(&id).await;
    let faults: Vec<Option<&str>> = log
        .iter()
        .filter(|r| r.route.ends_with("/status"))
        .map(|r| r.fault.as_deref())
        .collect();
    assert_eq!(faults, [None, Some("status_5xx"), Some("status_429"), None]);
    let alice = &sim.stats().await.keys["alice"];
    assert_eq!(
        (
            alice.counts.fault_5xx,
            alice.counts.fault_429,
            alice.counts.rate_limited
        ),
        (1, 1, 0)
    );

    let bad = sim.patch_faults(json!({"status_429": 7})).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn slow_reads_overlap_and_the_overlap_is_counted() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim.create(ALICE, json!({})).await;
    sim.patch_faults(json!({"status_slow": 1.0, "status_slow_delay": "1s"}))
        .await;
    let reads: Vec<_> = (0..3)
        .map(|_| {
            let request = sim
                .http
                .get(sim.api(&format!("/jobs/{id}/status")))
                .bearer_auth(ALICE)
                .send();
            tokio::spawn(request)
        })
        .collect();
    wait_for("three reads in flight at once", || async {
        let stats = sim.stats().await;
        (stats.polls.get(&id).map(|p| p.in_flight) == Some(3)).then_some(())
    })
    .await;
    for read in reads {
        assert_eq!(read.await.unwrap().unwrap().status(), StatusCode::OK);
    }
    let truth = sim.truth(&id).await;
    assert_eq!(truth.max_concurrent_status_reads, 3);
    assert_eq!(truth.status_reads, 3);
    let stats = sim.stats().await;
    assert_eq!(stats.max_concurrent_status_reads, 3);
    assert_eq!(
        stats.max_concurrent_status_reads_job.as_deref(),
        Some(id.as_str())
    );
    assert_eq!(stats.polls[&id].in_flight, 0);
    let slow = sim.requests(&id).await;
    assert_eq!(
        slow.iter()
            .filter(|r| r.fault.as_deref() == Some("status_slow"))
            .count(),
        3
    );
}

/// The stuck list: a page read with a cursor answers that cursor again (with `has_more`), so a
/// client reading on meets the same page for ever; the first page, read without one, is as
/// usual. Off again, the list moves on.
#[tokio::test]
async fn a_stuck_list_answers_the_cursor_it_was_asked_with() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    for _ in 0..3 {
        sim.create(ALICE, json!({})).await;
    }
    sim.patch_faults(json!({"list_cursor_stuck": 1.0})).await;
    let (first, more) = page(&sim, "/jobs?limit=1".into()).await;
    let first = first.expect("a first page of one has a cursor");
    assert_eq!(more, json!(true));
    for _ in 0..2 {
        let again = page(&sim, format!("/jobs?limit=1&cursor={first}")).await;
        assert_eq!(again, (Some(first.clone()), json!(true)));
    }
    sim.patch_faults(json!({"list_cursor_stuck": 0.0})).await;
    let (next, _) = page(&sim, format!("/jobs?limit=1&cursor={first}")).await;
    assert_ne!(next.as_deref(), Some(first.as_str()));
}

/// The redirect fault: a read of a job answers 307 to the same path under `/moved`, on the
/// same host, where nothing serves it: a client that follows meets a 404 for a job that
/// exists. The answer is logged with its fault; off again, the read answers the job.
#[tokio::test]
async fn a_redirected_read_leads_to_a_404_that_is_not_about_the_job() {
    let sim = Sim::start(config("http://127.0.0.1:9/unused")).await;
    let id = sim.create(ALICE, json!({})).await;
    let path = format!("/jobs/{id}/status");
    sim.patch_faults(json!({"status_redirect": 1.0})).await;
    let raw = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let moved = raw
        .get(sim.api(&path))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(moved.headers()["location"], format!("/moved{path}"));
    let followed = sim.get(ALICE, &path).await;
    assert_eq!(followed.status(), StatusCode::NOT_FOUND);
    let body: ErrorEnvelope = followed.json().await.unwrap();
    assert_eq!(body.error.code, "not_found");
    let faults: Vec<Option<String>> = sim
        .requests(&id)
        .await
        .into_iter()
        .filter(|r| r.route.ends_with("/status"))
        .map(|r| r.fault)
        .collect();
    assert_eq!(faults, vec![Some("status_redirect".to_owned()); 2]);
    sim.patch_faults(json!({"status_redirect": 0.0})).await;
    assert_eq!(sim.get(ALICE, &path).await.status(), StatusCode::OK);
}

/// A list page's `next_cursor` and `has_more`.
async fn page(sim: &Sim, path: String) -> (Option<String>, Value) {
    let body: Value = sim.get(ALICE, &path).await.json().await.unwrap();
    let next = body["next_cursor"].as_str().map(str::to_owned);
    (next, body["has_more"].clone())
}
