//! Webhooks that hold the port while their body is read: MAX_BODY_MEMORY bounds the bytes held,
//! claimed as they arrive (never the declared length); a newcomer that finds it full, or finds
//! MAX_IN_FLIGHT taken, sheds the oldest request still reading its body, so stalled uploads
//! cannot keep a genuine delivery out; bodies already verified are never shed.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::port::{genuine_gets_through, metric, open_with, read_head, signature, webhook_head};
use crate::support::*;

/// A signed upload whose body (declared `length` bytes, or chunked when `None`) has sent
/// `sent` bytes and stalls; its headers pass every check made before the body.
async fn stalled_upload(addr: SocketAddr, length: Option<usize>, sent: usize) -> TcpStream {
    let ts = unix_now();
    let sig = signature(ts, b"{}");
    let data = "x".repeat(sent);
    let request = match length {
        Some(n) => webhook_head(Some(ts), Some(&sig), n) + &data,
        None => format!(
            "POST /webhooks/sume HTTP/1.1\r\nhost: inbox\r\ntransfer-encoding: chunked\r\n\
             x-sume-timestamp: {ts}\r\nx-sume-signature: {sig}\r\n\r\n{sent:x}\r\n{data}\r\n"
        ),
    };
    open_with(addr, &request).await
}

/// A genuine delivery whose result carries `padding` bytes more, so its body is that large.
fn padded(job: &str, padding: usize) -> Delivery {
    let mut d = Delivery::completed(job);
    let mut body: serde_json::Value = serde_json::from_str(&d.body).unwrap();
    body["result"]["padding"] = "p".repeat(padding).into();
    d.body = body.to_string();
    d
}

/// A daemon whose bodies may hold 100,000 bytes at once, 64 KiB each.
async fn small_budget(db: &TestDb) -> Daemon {
    let mut c = config(&db.url);
    c.max_body_bytes = 64 * 1024;
    c.port.max_body_memory = 100_000;
    c.port.body_timeout = Duration::from_secs(30);
    c.ingest.timeout = Duration::from_secs(30);
    Daemon::start(c).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_holds_what_it_sent_and_a_newcomer_sheds_the_oldest_body_when_the_budget_is_held() {
    let db = TestDb::new().await;
    let daemon = small_budget(&db).await;
    // Two uploads declare 60,000 bytes each (more than the budget together) and send 50,000:
    // what they declare reserves nothing, so neither is refused for it.
    // The oldest is the one whose reading began first: the second is opened once the first
    // has surely begun (on a busy machine the server could otherwise start the second first).
    let mut first = stalled_upload(daemon.webhook, Some(60_000), 50_000).await;
    assert!(
        read_head(&mut first, Duration::from_millis(500))
            .await
            .is_none(),
        "an upload was refused for the length it declared"
    );
    let mut second = stalled_upload(daemon.webhook, Some(60_000), 50_000).await;
    assert!(
        read_head(&mut second, Duration::from_millis(500))
            .await
            .is_none(),
        "an upload was refused for the length it declared"
    );
    // Once their bytes fill the budget, a genuine delivery sheds the oldest of them (503,
    // closed) and is stored; until then it simply fits.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    let oldest = loop {
        n += 1;
        genuine_gets_through(&daemon, &db, &format!("job_beside_full_budget_{n}")).await;
        if let Some(head) = read_head(&mut first, Duration::from_millis(100)).await {
            break head;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the oldest upload was never shed for a genuine delivery"
        );
    };
    assert!(oldest.starts_with("HTTP/1.1 503"), "{oldest}");
    assert!(oldest.contains("retry-after: 5"), "{oldest}");
    assert!(
        read_head(&mut second, Duration::from_millis(300))
            .await
            .is_none(),
        "the newer upload was shed too"
    );
    assert_eq!(
        metric(&daemon, "sume_inbox_port_bodies_shed_total").await,
        1.0
    );
    assert_eq!(
        metric(&daemon, "sume_inbox_port_body_memory_refused_total").await,
        0.0
    );
    drop((first, second));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bytes_of_verified_deliveries_awaiting_their_commit_are_never_shed() {
    let db = TestDb::new().await;
    let daemon = small_budget(&db).await;
    // Hold the ingest: verified deliveries wait for their commit, holding their bodies.
    let mut locker = db.client().await;
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute("lock table sume.events in access exclusive mode")
        .await
        .unwrap();
    let (http, url) = (reqwest::Client::new(), daemon.url("/webhooks/sume"));
    let waiting: Vec<_> = ["job_held_1", "job_held_2"]
        .into_iter()
        .map(|job| {
            let (http, url) = (http.clone(), url.clone());
            tokio::spawn(async move { padded(job, 45_000).send(&http, &url).await.status() })
        })
        .collect();
    wait_for("both are verified", Duration::from_secs(10), || async {
        metric(
            &daemon,
            "sume_inbox_webhooks_verified_by_secret_total{secret=\"0\"}",
        )
        .await
            >= 2.0
    })
    .await;
    // A third does not fit beside them, and no body still being read can make room.
    let refused = padded("job_over_budget", 45_000).send(&http, &url).await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "5");
    assert!(metric(&daemon, "sume_inbox_port_body_memory_refused_total").await >= 1.0);
    assert_eq!(
        metric(&daemon, "sume_inbox_port_bodies_shed_total").await,
        0.0
    );
    lock.rollback().await.unwrap();
    for w in waiting {
        assert_eq!(w.await.unwrap(), 204, "a verified delivery was shed");
    }
    let stored = db.event_job_ids().await;
    assert!(stored.contains("job_held_1") && stored.contains("job_held_2"));
    assert!(!stored.contains("job_over_budget"));
    // Their bytes are given back with their answers.
    assert_eq!(
        padded("job_after_commit", 45_000)
            .send(&http, &url)
            .await
            .status(),
        204
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chunked_body_claims_its_chunks_as_they_arrive_and_sheds_an_older_one_for_room() {
    let db = TestDb::new().await;
    let daemon = small_budget(&db).await;
    // Two chunked uploads that together outgrow the budget: whichever finds it full sheds
    // the other (the server reads both as their chunks arrive, in no fixed order).
    wait_for(
        "one of two chunked bodies over the budget is shed",
        Duration::from_secs(10),
        || async {
            let mut a = stalled_upload(daemon.webhook, None, 60_000).await;
            let mut b = stalled_upload(daemon.webhook, None, 60_000).await;
            let wait = Duration::from_secs(2);
            let (a, b) = tokio::join!(read_head(&mut a, wait), read_head(&mut b, wait));
            [a, b]
                .into_iter()
                .flatten()
                .any(|h| h.starts_with("HTTP/1.1 503") && h.contains("retry-after: 5"))
        },
    )
    .await;
    assert!(metric(&daemon, "sume_inbox_port_bodies_shed_total").await >= 1.0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn at_max_in_flight_the_oldest_stalled_body_is_shed_for_a_genuine_delivery() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.port.max_in_flight = 4;
    c.port.body_timeout = Duration::from_secs(60);
    let daemon = Daemon::start(c).await;
    let mut uploads = Vec::new();
    for _ in 0..4 {
        uploads.push(stalled_upload(daemon.webhook, Some(100), 10).await);
        // In order, so that the first is the oldest reader.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    genuine_gets_through(&daemon, &db, "job_beside_stalled_bodies").await;
    let oldest = read_head(&mut uploads[0], Duration::from_secs(5))
        .await
        .expect("the oldest stalled body is answered");
    assert!(oldest.starts_with("HTTP/1.1 503"), "{oldest}");
    assert!(oldest.contains("retry-after: 5"), "{oldest}");
    assert!(
        read_head(&mut uploads[3], Duration::from_millis(300))
            .await
            .is_none(),
        "the newest stalled body was shed before the oldest"
    );
    assert_eq!(
        metric(&daemon, "sume_inbox_port_bodies_shed_total").await,
        1.0
    );
    assert_eq!(
        metric(&daemon, "sume_inbox_port_in_flight_refused_total").await,
        0.0
    );
    drop(uploads);
    daemon.stop().await;
}

/// MAX_CONNECTIONS at or below MAX_IN_FLIGHT (a configuration built in code: the settings
/// refuse it), every connection held by a forged upload that stalls its body: a newcomer finds
/// no connection sending its head to close, and no request slot taken, so before it was closed
/// at once (`connections_refused`) until BODY_TIMEOUT freed one. Now the connection cap sheds
/// the oldest connection still reading a body, as MAX_IN_FLIGHT does (503, `Retry-After`,
/// closed, counted as a body shed), and the delivery gets in, again and again.
#[tokio::test(flavor = "multi_thread")]
async fn at_max_connections_held_by_stalled_bodies_the_oldest_is_shed_for_a_genuine_delivery() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.port.max_connections = 20;
    c.port.body_timeout = Duration::from_secs(60);
    let daemon = Daemon::start(c).await;
    let mut uploads = std::collections::VecDeque::new();
    for _ in 0..20 {
        uploads.push_back(stalled_upload(daemon.webhook, Some(1000), 1).await);
        // In order, so that the first is the oldest reader.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for n in 0..3 {
        wait_for("20 connections open", Duration::from_secs(10), || async {
            metric(&daemon, "sume_inbox_port_connections_open").await == 20.0
        })
        .await;
        // Every one of them past its head, reading its body.
        tokio::time::sleep(Duration::from_millis(300)).await;
        genuine_gets_through(&daemon, &db, &format!("job_beside_full_port_{n}")).await;
        let mut oldest = uploads.pop_front().unwrap();
        let shed = read_head(&mut oldest, Duration::from_secs(5))
            .await
            .expect("the oldest stalled body is answered");
        assert!(shed.starts_with("HTTP/1.1 503"), "{shed}");
        assert!(shed.contains("retry-after: 5"), "{shed}");
        // The attacker opens another in its place.
        uploads.push_back(stalled_upload(daemon.webhook, Some(1000), 1).await);
    }
    assert!(
        read_head(uploads.back_mut().unwrap(), Duration::from_millis(300))
            .await
            .is_none(),
        "the newest stalled body was shed before the oldest"
    );
    assert_eq!(
        metric(&daemon, "sume_inbox_port_bodies_shed_total").await,
        3.0
    );
    assert_eq!(
        metric(&daemon, "sume_inbox_port_connections_refused_total").await,
        0.0
    );
    drop(uploads);
    daemon.stop().await;
}

/// At MAX_CONNECTIONS with every connection holding a delivery verified and waiting for its
/// commit (and MAX_IN_FLIGHT above it, so nothing answers 503 first), a newcomer is closed at
/// once: none of them is shed for it.
#[tokio::test(flavor = "multi_thread")]
async fn at_max_connections_a_verified_delivery_awaiting_its_commit_is_never_shed() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.port.max_connections = 2;
    c.ingest.timeout = Duration::from_secs(30);
    let daemon = Daemon::start(c).await;
    let mut locker = db.client().await;
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute("lock table sume.events in access exclusive mode")
        .await
        .unwrap();
    let url = daemon.url("/webhooks/sume");
    let waiting: Vec<_> = ["job_held_a", "job_held_b"]
        .into_iter()
        .map(|job| {
            let (http, url) = (reqwest::Client::new(), url.clone());
            tokio::spawn(async move { Delivery::completed(job).send(&http, &url).await.status() })
        })
        .collect();
    wait_for("both are verified", Duration::from_secs(10), || async {
        metric(
            &daemon,
            "sume_inbox_webhooks_verified_by_secret_total{secret=\"0\"}",
        )
        .await
            >= 2.0
    })
    .await;
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let newcomer = Delivery::completed("job_newcomer")
        .send_raw(&quick, &url)
        .await;
    assert!(newcomer.is_err(), "{newcomer:?}");
    assert_eq!(
        metric(&daemon, "sume_inbox_port_connections_refused_total").await,
        1.0
    );
    assert_eq!(
        metric(&daemon, "sume_inbox_port_bodies_shed_total").await,
        0.0
    );
    lock.rollback().await.unwrap();
    for w in waiting {
        assert_eq!(w.await.unwrap(), 204, "a verified delivery was shed");
    }
    daemon.stop().await;
}
