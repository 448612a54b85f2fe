//! Webhooks that hold the port while their body is read: MAX_BODY_MEMORY bounds the bytes held
//! (503 at once beyond), and at MAX_IN_FLIGHT the oldest request still reading its body is shed
//! for a newcomer, so stalled uploads cannot keep a genuine delivery out.

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

#[tokio::test(flavor = "multi_thread")]
async fn max_body_memory_answers_503_at_once_and_frees_what_a_closed_upload_held() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.max_body_bytes = 64 * 1024;
    c.port.max_body_memory = 100_000;
    c.port.body_timeout = Duration::from_secs(30);
    let daemon = Daemon::start(c).await;
    // Two declared uploads hold the whole budget before sending most of their bodies.
    let first = stalled_upload(daemon.webhook, Some(50_000), 10).await;
    let _second = stalled_upload(daemon.webhook, Some(50_000), 10).await;
    let (http, url) = (reqwest::Client::new(), daemon.url("/webhooks/sume"));
    wait_for("the budget is held", Duration::from_secs(10), || async {
        let r = Delivery::completed("job_over_budget")
            .send(&http, &url)
            .await;
        r.status() == 503
    })
    .await;
    let refused = Delivery::completed("job_over_budget")
        .send(&http, &url)
        .await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "5");
    assert!(metric(&daemon, "sume_inbox_port_body_memory_refused_total").await >= 2.0);
    assert!(!db.event_job_ids().await.contains("job_over_budget"));
    // A client that goes away gives its reservation back.
    drop(first);
    wait_for("the budget is freed", Duration::from_secs(10), || async {
        Delivery::completed("job_after_close")
            .send(&http, &url)
            .await
            .status()
            == 204
    })
    .await;
    assert!(db.event_job_ids().await.contains("job_after_close"));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chunked_body_is_refused_503_when_its_chunks_outgrow_max_body_memory() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.max_body_bytes = 64 * 1024;
    c.port.max_body_memory = 100_000;
    c.port.body_timeout = Duration::from_secs(30);
    let daemon = Daemon::start(c).await;
    // Two chunked uploads that together outgrow the budget: whichever crosses it first (the
    // server reads both as their chunks arrive, in no fixed order) is refused.
    wait_for(
        "one of two chunked bodies over the budget is refused",
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
    assert!(metric(&daemon, "sume_inbox_port_body_memory_refused_total").await >= 1.0);
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
