//! The dedupe key comes from what the signature covers (the body), never from the unsigned
//! `X-Sume-Event-Id`: a signed delivery replayed under fresh ids is stored and applied once, a
//! claimed future id hides nothing, and events stored before the key changed still catch their
//! redeliveries, and only their own job's.

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
