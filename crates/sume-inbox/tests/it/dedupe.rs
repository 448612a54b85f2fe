//! The dedupe key comes from what the signature covers (the body), never from the unsigned
//! `X-Sume-Event-Id`: a signed delivery replayed under fresh ids is stored and applied once, a
//! claimed future id hides nothing, and events stored before the key changed still catch their
//! redeliveries, and only their own job's. A key met again is a redelivery only for the same
//! job and status: another event under it is kept as a dead letter, never dropped.

use std::time::Duration;

use crate::support::*;

async fn rows_for(db: &TestDb, job_id: &str) -> i64 {
    db.client()
        .await
        .query_one(
            "select count(*) from sume.events where job_id = $1",
            &[&job_id],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signed_delivery_replayed_under_fresh_ids_is_stored_and_applied_once() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let mut d = Delivery::completed("job_replayed");
    for i in 0..5 {
        d.event_id = Some(format!("evt_fresh_{i}"));
        assert_eq!(d.send(&http, &url).await.status(), 204);
    }
    assert_eq!(rows_for(&db, "job_replayed").await, 1);
    let c = db.client().await;
    let row = c
        .query_one(
            "select event_id, header_event_id from sume.events where job_id = 'job_replayed'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "job_replayed/job.completed");
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("evt_fresh_0"),
        "the first delivery's header id is kept as a hint"
    );
    // Once the job is registered, the one event is applied once.
    assert_eq!(
        api_register(&http, &daemon, "job_replayed", "order_r")
            .await
            .status(),
        201
    );
    wait_for("job closed", Duration::from_secs(10), || async {
        job_state(&db, "job_replayed").await.as_deref() == Some("completed")
    })
    .await;
    assert_eq!(
        db.scalar("select count(*) from sume.events where applied_at is not null")
            .await,
        1
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claimed_future_id_does_not_hide_the_genuine_event() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    // Someone holding job A's signed delivery sends it under job B's future event id.
    let mut a = Delivery::completed("job_a");
    a.event_id = Some("evt_job_b_completed".into());
    assert_eq!(a.send(&http, &url).await.status(), 204);
    // B's genuine delivery, with that id, is stored all the same.
    let b = Delivery::completed("job_b");
    assert_eq!(b.event_id.as_deref(), Some("evt_job_b_completed"));
    assert_eq!(b.send(&http, &url).await.status(), 204);
    assert_eq!(rows_for(&db, "job_a").await, 1);
    assert_eq!(rows_for(&db, "job_b").await, 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn events_stored_under_the_old_key_still_catch_their_redeliveries() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    // Rows as the previous version stored them: keyed by the header's id, before the upgrade.
    db.client()
        .await
        .batch_execute(
            "insert into sume.events (event_id, job_id, event_type, status, body, signed_at,
                                      signature, received_at)
             values ('evt_legacy', 'job_legacy', 'job.completed', 'completed', '\\x7b7d', 0,
                     'v1=00', now() - interval '1 day');
             insert into sume.dead_letters (dead_letter_id, reason, body, header_event_id,
                                            signed_at, signature, received_at)
             values ('evt_legacy_dead', 'no job id', '\\x7b7d', 'evt_legacy_dead', 0, 'v1=00',
                     now() - interval '1 day');",
        )
        .await
        .unwrap();
    let mut again = Delivery::completed("job_legacy");
    again.event_id = Some("evt_legacy".into());
    assert_eq!(again.send(&http, &url).await.status(), 204);
    assert_eq!(
        rows_for(&db, "job_legacy").await,
        1,
        "a redelivery, not stored again"
    );
    let mut dead = Delivery::completed("x");
    dead.body = r#"{"event":"job.completed"}"#.into();
    dead.event_id = Some("evt_legacy_dead".into());
    assert_eq!(dead.send(&http, &url).await.status(), 204);
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 1);

    // A header naming a row stored since the upgrade is only a hint: the delivery is stored.
    let first = Delivery::completed("job_new");
    assert_eq!(first.send(&http, &url).await.status(), 204);
    let mut other = Delivery::completed("job_other");
    other.event_id = Some("job_new/job.completed".into());
    assert_eq!(other.send(&http, &url).await.status(), 204);
    assert_eq!(rows_for(&db, "job_other").await, 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_row_of_another_job_hides_no_genuine_delivery() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    // Before the upgrade, someone holding job A's signed delivery sent it under the id job B's
    // event would later carry: the previous version stored it under that header id.
    db.client()
        .await
        .batch_execute(
            "insert into sume.events (event_id, job_id, event_type, status, body, signed_at,
                                      signature, received_at)
             values ('evt_job_b_completed', 'job_a', 'job.completed', 'completed', '\\x7b7d',
                     0, 'v1=00', now() - interval '1 day');",
        )
        .await
        .unwrap();
    // B's genuine delivery carries that id in its header: it is stored all the same.
    let b = Delivery::completed("job_b");
    assert_eq!(b.event_id.as_deref(), Some("evt_job_b_completed"));
    assert_eq!(b.send(&http, &url).await.status(), 204);
    assert_eq!(
        rows_for(&db, "job_b").await,
        1,
        "the genuine event is stored"
    );
    assert_eq!(
        api_register(&http, &daemon, "job_b", "order_b")
            .await
            .status(),
        201
    );
    wait_for("job_b closed", Duration::from_secs(10), || async {
        job_state(&db, "job_b").await.as_deref() == Some("completed")
    })
    .await;
    // A's own redelivery under that id is still recognised as the legacy row's.
    let mut a = Delivery::completed("job_a");
    a.event_id = Some("evt_job_b_completed".into());
    assert_eq!(a.send(&http, &url).await.status(), 204);
    assert_eq!(
        rows_for(&db, "job_a").await,
        1,
        "a redelivery, not stored again"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_row_of_the_same_job_with_another_status_hides_no_terminal_event() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    // Stored before the upgrade under the header's id: the job's `running` event.
    db.client()
        .await
        .batch_execute(
            "insert into sume.events (event_id, job_id, event_type, status, body, signed_at,
                                      signature, received_at)
             values ('evt_reused', 'job_l', 'job.running', 'running', '\\x7b7d', 0, 'v1=00',
                     now() - interval '1 day');",
        )
        .await
        .unwrap();
    // Its terminal event under the same header id is no redelivery of it: stored, and it
    // closes the job.
    let mut done = Delivery::completed("job_l");
    done.event_id = Some("evt_reused".into());
    assert_eq!(done.send(&http, &url).await.status(), 204);
    assert_eq!(
        rows_for(&db, "job_l").await,
        2,
        "the terminal event is stored"
    );
    assert_eq!(
        api_register(&http, &daemon, "job_l", "order_l")
            .await
            .status(),
        201
    );
    wait_for("job_l closed", Duration::from_secs(10), || async {
        job_state(&db, "job_l").await.as_deref() == Some("completed")
    })
    .await;
    // The running event's own redelivery under that id is still the legacy row's.
    let mut again = Delivery::status("job_l", "running");
    again.event_id = Some("evt_reused".into());
    assert_eq!(again.send(&http, &url).await.status(), 204);
    assert_eq!(
        rows_for(&db, "job_l").await,
        2,
        "a redelivery, not stored again"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_header_id_that_contradicts_the_body_is_counted_and_kept() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let mut d = Delivery::completed("job_env");
    d.body = serde_json::json!({
        "id": "evt_body",
        "type": "job.completed",
        "data": {"object": {"id": "job_env", "status": "completed"}},
    })
    .to_string();
    d.event_id = Some("evt_header".into());
    assert_eq!(
        d.send(&http, &daemon.url("/webhooks/sume")).await.status(),
        204
    );
    let row = db
        .client()
        .await
        .query_one(
            "select event_id, header_event_id from sume.events where job_id = 'job_env'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "evt_body");
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("evt_header")
    );
    assert_eq!(
        crate::port::metric(&daemon, "sume_inbox_webhook_event_id_mismatch_total").await,
        1.0
    );
    daemon.stop().await;
}

/// A signed delivery of the docs' envelope shape: event `id`, for `job`, saying `status`.
fn envelope(id: &str, job: &str, status: &str) -> Delivery {
    let mut d = Delivery::status(job, status);
    d.body = serde_json::json!({
        "id": id,
        "type": format!("job.{status}"),
        "data": {"object": {"id": job, "status": status}},
    })
    .to_string();
    d.event_id = Some(id.into());
    d
}

async fn dead_letter_reasons(db: &TestDb) -> Vec<String> {
    db.client()
        .await
        .query(
            "select reason from sume.dead_letters where replayed_at is null",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Two signed deliveries under one event id for two jobs (Sume reusing an id): the second was
/// answered 204 as a "duplicate" and dropped without a trace. It is kept as a dead letter that
/// names the job the id holds, counted and logged; a true redelivery is still a duplicate, and
/// a replay of the letter applies nothing and says why, leaving it for an operator.
#[tokio::test(flavor = "multi_thread")]
async fn another_jobs_event_under_a_stored_id_is_kept_as_a_dead_letter_not_dropped() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let a = envelope("evt_collide", "job_colA", "completed");
    let b = envelope("evt_collide", "job_colB", "completed");
    for d in [&a, &b, &a, &b] {
        assert_eq!(d.send(&http, &url).await.status(), 204);
    }
    let rows = db
        .client()
        .await
        .query("select event_id || '|' || job_id from sume.events", &[])
        .await
        .unwrap();
    let rows: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(rows, ["evt_collide|job_colA"]);
    let reasons = dead_letter_reasons(&db).await;
    assert_eq!(
        reasons.len(),
        1,
        "one letter for the body sent twice: {reasons:?}"
    );
    assert_eq!(
        reasons[0],
        "its event id is already stored for job job_colA, with status completed; this delivery \
         is for job job_colB, with status completed: another event under the same id, not applied"
    );
    let count = |outcome: &str| {
        let name = format!("sume_inbox_webhooks_total{{outcome=\"{outcome}\"}}");
        let daemon = &daemon;
        async move { crate::port::metric(daemon, &name).await }
    };
    assert_eq!(count("stored").await, 1.0);
    assert_eq!(count("duplicate").await, 1.0, "job_colA's redelivery");
    assert_eq!(count("id_reused").await, 2.0);

    let store = sume_inbox::db::Store::new(&db.url, 1).unwrap();
    let secrets = [sume_wire::Secret::new(SECRET)];
    let replayed = sume_inbox::operations::replay::replay_dead_letters(&store, &secrets, 10)
        .await
        .unwrap();
    assert_eq!(replayed.len(), 1);
    assert!(!replayed[0].ok, "{replayed:?}");
    assert_eq!(replayed[0].job_id.as_deref(), Some("job_colB"));
    assert_eq!(
        replayed[0].result,
        "its event id evt_collide is still stored for job job_colA (completed), so it is \
         another event under that id: not applied; left as a dead letter"
    );
    assert_eq!(
        dead_letter_reasons(&db).await,
        reasons,
        "still there, unreplayed"
    );
    assert_eq!(rows_for(&db, "job_colB").await, 0);
    daemon.stop().await;
}

/// 50 concurrent deliveries of one event id for one job, half `completed`, half `failed`: the
/// contradicting status was answered "duplicate" and recorded nowhere. One is stored and
/// closes the job; its own repeats are duplicates; the other status is kept as a dead letter
/// (one per body) saying what the id holds, and every one of its deliveries is counted.
#[tokio::test(flavor = "multi_thread")]
async fn fifty_concurrent_deliveries_of_one_id_saying_two_statuses_keep_the_other_one() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    assert_eq!(
        api_register(&http, &daemon, "job_split", "o1")
            .await
            .status(),
        201
    );
    let url = daemon.url("/webhooks/sume");
    let sends = (0..50).map(|i| {
        let (http, url) = (http.clone(), url.clone());
        let status = if i % 2 == 0 { "completed" } else { "failed" };
        let d = envelope("evt_split", "job_split", status);
        tokio::spawn(async move { d.send(&http, &url).await.status() })
    });
    for s in futures_util::future::join_all(sends).await {
        assert_eq!(s.unwrap(), 204);
    }
    let kept: String = db
        .client()
        .await
        .query_one(
            "select status from sume.events where event_id = 'evt_split'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let other = if kept == "completed" {
        "failed"
    } else {
        "completed"
    };
    wait_for("job_split closed", Duration::from_secs(10), || async {
        job_state(&db, "job_split").await.as_deref() == Some(kept.as_str())
    })
    .await;
    assert_eq!(
        dead_letter_reasons(&db).await,
        [format!(
            "its event id is already stored for job job_split, with status {kept}; this \
             delivery is for the same job, with status {other}: another event under the same \
             id, not applied"
        )]
    );
    for (outcome, n) in [("stored", 1.0), ("duplicate", 24.0), ("id_reused", 25.0)] {
        let name = format!("sume_inbox_webhooks_total{{outcome=\"{outcome}\"}}");
        assert_eq!(crate::port::metric(&daemon, &name).await, n, "{outcome}");
    }
    daemon.stop().await;
}
