//! The public port against slow and hostile clients, over raw sockets on loopback: stalled
//! headers, stalled bodies and idle connections are closed by their timeouts, thousands of
//! stalled connections do not keep a genuine delivery out, MAX_IN_FLIGHT answers 503 at once,
//! and a request that cannot verify is refused from its headers without its body.

use std::net::SocketAddr;
use std::time::Duration;

use sume_inbox::config::Config;
use sume_wire::{signature_header, Secret};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// Short timeouts, so each test waits seconds.
fn short(db: &TestDb) -> Config {
    let mut c = config(&db.url);
    c.port.header_timeout = Duration::from_secs(1);
    c.port.body_timeout = Duration::from_secs(2);
    c.port.idle_timeout = Duration::from_secs(3);
    c
}

/// A connection that has sent `head` (often an unfinished one).
pub(super) async fn open_with(addr: SocketAddr, head: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("send head");
    s
}

/// Reads until the server closes the connection; answers everything read, or `None` if it
/// was still open after `within`.
pub(super) async fn read_until_closed(s: &mut TcpStream, within: Duration) -> Option<String> {
    let mut all = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok()?;
    Some(String::from_utf8_lossy(&all).into_owned())
}

/// Reads one response head (up to the blank line), or `None` if none came within `within`.
pub(super) async fn read_head(s: &mut TcpStream, within: Duration) -> Option<String> {
    let mut all = Vec::new();
    let read = async {
        let mut buf = [0u8; 1024];
        while !all.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok()?;
    Some(String::from_utf8_lossy(&all).into_owned())
}

/// A webhook request head with the given signature headers and Content-Length.
pub(super) fn webhook_head(
    timestamp: Option<i64>,
    signature: Option<&str>,
    length: usize,
) -> String {
    let mut head = format!(
        "POST /webhooks/sume HTTP/1.1\r\nhost: inbox\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n"
    );
    if let Some(ts) = timestamp {
        head.push_str(&format!("x-sume-timestamp: {ts}\r\n"));
    }
    if let Some(sig) = signature {
        head.push_str(&format!("x-sume-signature: {sig}\r\n"));
    }
    head + "\r\n"
}

/// A well-formed signature over `body` (right or not depends on the body sent).
pub(super) fn signature(ts: i64, body: &[u8]) -> String {
    signature_header(&[Secret::new(SECRET)], ts, body)
}

/// A metric's value from the admin port, 0 when absent (`name` with its labels, if any).
pub(super) async fn metric(daemon: &Daemon, name: &str) -> f64 {
    let text = reqwest::get(daemon.admin_url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn stalled_headers_are_closed_after_header_timeout() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(short(&db)).await;
    let mut half = open_with(
        daemon.webhook,
        "POST /webhooks/sume HTTP/1.1\r\nhost: x\r\n",
    )
    .await;
    let mut silent = open_with(daemon.webhook, "").await;
    for s in [&mut half, &mut silent] {
        assert!(
            read_until_closed(s, Duration::from_secs(5)).await.is_some(),
            "a connection stalled in its headers stays open"
        );
    }
    let timeouts = metric(&daemon, "sume_inbox_port_timeouts_total{kind=\"header\"}").await;
    assert!(timeouts >= 2.0, "header timeouts counted: {timeouts}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_body_is_answered_408_after_body_timeout() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(short(&db)).await;
    let ts = unix_now();
    let head = webhook_head(Some(ts), Some(&signature(ts, b"{}")), 100);
    let mut s = open_with(daemon.webhook, &(head + "{\"job_id\":")).await;
    let answer = read_until_closed(&mut s, Duration::from_secs(8))
        .await
        .expect("a stalled body keeps the connection open");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(metric(&daemon, "sume_inbox_port_timeouts_total{kind=\"body\"}").await >= 1.0);
    daemon.stop().await;
}

/// A body its sender stops sending by closing the connection (`Content-Length: 1000`, 100 bytes
/// sent) is counted `aborted`, not `malformed` (it was, and logged as a broken chunked
/// framing), and nothing is stored; a sender that closed only its side reads a 400 saying so.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_cut_short_by_its_sender_is_counted_aborted_not_malformed() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(short(&db)).await;
    let ts = unix_now();
    let sent = webhook_head(Some(ts), Some(&signature(ts, b"{}")), 1000) + &"x".repeat(100);
    let mut half_closed = open_with(daemon.webhook, &sent).await;
    half_closed.shutdown().await.unwrap();
    let answer = read_until_closed(&mut half_closed, Duration::from_secs(5))
        .await
        .expect("the connection is closed");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("closed before the request body was whole"),
        "{answer}"
    );
    drop(open_with(daemon.webhook, &sent).await);
    let aborted = r#"sume_inbox_webhooks_total{outcome="aborted"}"#;
    wait_for(
        "two bodies counted aborted",
        Duration::from_secs(5),
        || async { metric(&daemon, aborted).await == 2.0 },
    )
    .await;
    let malformed = r#"sume_inbox_webhooks_total{outcome="malformed"}"#;
    assert_eq!(metric(&daemon, malformed).await, 0.0);
    assert!(db.event_job_ids().await.is_empty());
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 0);
    daemon.stop().await;
}

/// A chunked body whose framing breaks is answered 400 and its connection closed, saying so:
/// a request pipelined behind it is never read as if it were the next (before, the 400 did
/// not say the connection would close).
#[tokio::test(flavor = "multi_thread")]
async fn a_broken_chunked_body_is_answered_400_and_its_connection_closed() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(short(&db)).await;
    let ts = unix_now();
    let head = format!(
        "POST /webhooks/sume HTTP/1.1\r\nhost: inbox\r\ntransfer-encoding: chunked\r\n\
         x-sume-timestamp: {ts}\r\nx-sume-signature: {}\r\n\r\n",
        signature(ts, b"{}")
    );
    let next = webhook_head(Some(ts), Some(&signature(ts, b"{}")), 2) + "{}";
    let sent = format!("{head}ffffffffffffffffff\r\nx\r\n0\r\n\r\n{next}");
    let mut s = open_with(daemon.webhook, &sent).await;
    let answer = read_until_closed(&mut s, Duration::from_secs(8))
        .await
        .expect("the connection is closed");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert_eq!(answer.matches("HTTP/1.1").count(), 1, "{answer}");
    daemon.stop().await;
}

/// A webhook request head for a chunked body, with a fresh timestamp and `signature`.
fn chunked_head(ts: i64, signature: &str) -> String {
    format!(
        "POST /webhooks/sume HTTP/1.1\r\nhost: inbox\r\ntransfer-encoding: chunked\r\n\
         connection: close\r\nx-sume-timestamp: {ts}\r\nx-sume-signature: {signature}\r\n\r\n"
    )
}

/// Sends `request` while reading the answer, until the server closes the connection (the
/// sending may be cut short by the close).
async fn answered(addr: SocketAddr, request: String) -> String {
    let (mut reader, mut writer) = TcpStream::connect(addr).await.unwrap().into_split();
    let sending = tokio::spawn(async move {
        let _ = writer.write_all(request.as_bytes()).await;
        writer
    });
    let mut all = Vec::new();
    let read = reader.read_to_end(&mut all);
    let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
    drop(sending.await);
    String::from_utf8_lossy(&all).into_owned()
}

/// A body sent in more frames than the port reads for one (16,384 by default; each costs its
/// own work, so a byte a chunk cost some 250 times the CPU of the same body sent whole, before
/// the signature could be checked) is answered 400 once it passes that many, its connection
/// closed, and counted; a genuine delivery sent in hundreds of chunks is stored as ever.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_in_too_many_frames_is_answered_400_and_its_connection_closed() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let ts = unix_now();
    let forged = format!("v1={}", "0".repeat(64));
    let chunks = "1\r\nx\r\n".repeat(20_000);
    let request = format!("{}{chunks}0\r\n\r\n", chunked_head(ts, &forged));
    let answer = answered(daemon.webhook, request).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(answer.contains("more than 16384 pieces"), "{answer}");
    let malformed = r#"sume_inbox_webhooks_total{outcome="malformed"}"#;
    assert_eq!(metric(&daemon, malformed).await, 1.0);

    let mut genuine = Delivery::completed("job_in_chunks");
    let mut body: serde_json::Value = serde_json::from_str(&genuine.body).unwrap();
    body["result"]["padding"] = "p".repeat(600).into();
    genuine.body = body.to_string();
    let chunks: String = genuine
        .body
        .as_bytes()
        .chunks(2)
        .map(|c| format!("{:x}\r\n{}\r\n", c.len(), String::from_utf8_lossy(c)))
        .collect();
    assert!(genuine.body.len() / 2 >= 300, "a few hundred frames");
    let head = chunked_head(ts, &signature(ts, genuine.body.as_bytes()));
    let answer = answered(daemon.webhook, format!("{head}{chunks}0\r\n\r\n")).await;
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
    assert!(db.event_job_ids().await.contains("job_in_chunks"));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_kept_alive_connection_is_closed_after_idle_timeout() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(short(&db)).await;
    let delivery = Delivery::completed("job_idle");
    let head = webhook_head(
        Some(delivery.timestamp),
        Some(&signature(delivery.timestamp, delivery.body.as_bytes())),
        delivery.body.len(),
    );
    let mut s = open_with(daemon.webhook, &(head + &delivery.body)).await;
    let answer = read_head(&mut s, Duration::from_secs(10)).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
    // Past HEADER_TIMEOUT (1s) the idle connection is still open: idle is IDLE_TIMEOUT's (3s).
    assert!(
        read_until_closed(&mut s, Duration::from_millis(1800))
            .await
            .is_none(),
        "an idle connection was closed by the header timeout"
    );
    assert!(
        read_until_closed(&mut s, Duration::from_secs(5))
            .await
            .is_some(),
        "an idle connection stays open past IDLE_TIMEOUT"
    );
    assert!(metric(&daemon, "sume_inbox_port_timeouts_total{kind=\"idle\"}").await >= 1.0);
    daemon.stop().await;
}

/// A kept-alive connection whose next request head is begun after the answer and left
/// unfinished is closed by HEADER_TIMEOUT from that head's first byte, not kept to
/// IDLE_TIMEOUT.
#[tokio::test(flavor = "multi_thread")]
async fn a_later_head_left_unfinished_is_closed_after_header_timeout() {
    let db = TestDb::new().await;
    let mut config = short(&db);
    config.port.idle_timeout = Duration::from_secs(30);
    let daemon = Daemon::start(config).await;
    let delivery = Delivery::completed("job_kept_alive");
    let head = webhook_head(
        Some(delivery.timestamp),
        Some(&signature(delivery.timestamp, delivery.body.as_bytes())),
        delivery.body.len(),
    );
    let mut s = open_with(daemon.webhook, &(head + &delivery.body)).await;
    let answer = read_head(&mut s, Duration::from_secs(10)).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
    s.write_all(b"POST /webhooks/sume HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    // Well within IDLE_TIMEOUT (30s), HEADER_TIMEOUT (1s) has closed it.
    assert!(
        read_until_closed(&mut s, Duration::from_secs(10))
            .await
            .is_some(),
        "an unfinished head was kept open"
    );
    let timeouts = metric(&daemon, "sume_inbox_port_timeouts_total{kind=\"header\"}").await;
    assert!(timeouts >= 1.0, "header timeouts counted: {timeouts}");
    daemon.stop().await;
}

/// A client speaking HTTP/2 with prior knowledge (`curl --http2-prior-knowledge`: the
/// connection opens with `PRI * HTTP/2.0`) is answered an HTTP/1.1 505 saying the port speaks
/// HTTP/1.1 alone, counted and closed (it was closed without a byte, counted nowhere, and
/// logged only at DEBUG as a parse error).
#[tokio::test(flavor = "multi_thread")]
async fn http2_with_prior_knowledge_is_answered_505_and_counted() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(short(&db)).await;
    let mut s = open_with(daemon.webhook, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
    let answer = read_until_closed(&mut s, Duration::from_secs(5))
        .await
        .expect("the connection is closed");
    assert!(
        answer.starts_with("HTTP/1.1 505 HTTP Version Not Supported"),
        "{answer}"
    );
    assert!(
        answer
            .ends_with("HTTP/2 with prior knowledge is not supported: this port speaks HTTP/1.1\n"),
        "{answer}"
    );
    let refused = r#"sume_inbox_port_protocols_refused_total{protocol="http2_prior_knowledge"}"#;
    assert_eq!(metric(&daemon, refused).await, 1.0);
    // The port goes on serving HTTP/1.1.
    genuine_gets_through(&daemon, &db, "job_after_http2").await;
    daemon.stop().await;
}

/// Opens `n` connections that each send half a request head and stall.
async fn stalled(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(open_with(addr, "POST /webhooks/sume HTTP/1.1\r\nhost: x\r\n").await);
    }
    out
}

/// Sends a genuine delivery and checks it is answered 204 within a generous bound and stored.
pub(super) async fn genuine_gets_through(daemon: &Daemon, db: &TestDb, job: &str) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let r = Delivery::completed(job)
        .send_raw(&http, &daemon.url("/webhooks/sume"))
        .await
        .expect("the genuine delivery is answered");
    assert_eq!(r.status(), 204);
    assert!(db.event_job_ids().await.contains(job));
}

#[tokio::test(flavor = "multi_thread")]
async fn thousands_of_stalled_connections_do_not_keep_a_delivery_out() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.port.header_timeout = Duration::from_secs(6);
    let daemon = Daemon::start(c).await;
    let conns = stalled(daemon.webhook, 3000).await;
    wait_for("3000 connections open", Duration::from_secs(10), || async {
        metric(&daemon, "sume_inbox_port_connections_open").await >= 3000.0
    })
    .await;
    genuine_gets_through(&daemon, &db, "job_beside_3000").await;
    // And every stalled one is closed by HEADER_TIMEOUT.
    let closing = conns.into_iter().map(|mut s| {
        tokio::spawn(async move { read_until_closed(&mut s, Duration::from_secs(20)).await })
    });
    for closed in futures_util::future::join_all(closing).await {
        assert!(
            closed.unwrap().is_some(),
            "a stalled connection stayed open"
        );
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn at_max_connections_the_oldest_header_readers_are_shed() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.port.header_timeout = Duration::from_secs(30);
    c.port.idle_timeout = Duration::from_secs(30);
    c.port.max_connections = 100;
    let daemon = Daemon::start(c).await;
    let mut conns = stalled(daemon.webhook, 100).await;
    wait_for("100 connections open", Duration::from_secs(10), || async {
        metric(&daemon, "sume_inbox_port_connections_open").await == 100.0
    })
    .await;
    genuine_gets_through(&daemon, &db, "job_beside_100").await;
    assert!(metric(&daemon, "sume_inbox_port_connections_shed_total").await >= 1.0);
    assert!(
        read_until_closed(&mut conns[0], Duration::from_secs(5))
            .await
            .is_some(),
        "the oldest stalled connection was not shed"
    );
    assert!(
        read_until_closed(&mut conns[99], Duration::from_millis(200))
            .await
            .is_none(),
        "the newest stalled connection was shed before the oldest"
    );
    drop(conns);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn beyond_max_in_flight_a_request_gets_503_at_once() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.port.max_in_flight = 1;
    c.ingest.timeout = Duration::from_secs(30);
    let daemon = Daemon::start(c).await;
    // Hold the ingest: the first delivery waits for this lock, in flight.
    let mut locker = db.client().await;
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute("lock table sume.events in access exclusive mode")
        .await
        .unwrap();
    let (http, url) = (reqwest::Client::new(), daemon.url("/webhooks/sume"));
    let first = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { Delivery::completed("job_first").send(&http, &url).await }
    });
    wait_for(
        "the first delivery waits for the lock",
        Duration::from_secs(10),
        || async {
            db.scalar(
                "select count(*) from pg_locks where not granted
             and database = (select oid from pg_database where datname = current_database())",
            )
            .await
                >= 1
        },
    )
    .await;
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let second = Delivery::completed("job_second")
        .send_raw(&quick, &url)
        .await
        .expect("the second request is answered, not held");
    assert_eq!(second.status(), 503);
    assert_eq!(second.headers()["retry-after"], "5");
    // The probes answer from memory, outside MAX_IN_FLIGHT: a slow database under a burst of
    // deliveries must not fail the liveness probe (before: 503 "too many requests in flight").
    for probe in ["/healthz", "/readyz"] {
        let r = quick.get(daemon.url(probe)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{probe}");
    }
    assert!(!first.is_finished(), "the first was still in flight");
    lock.rollback().await.unwrap();
    assert_eq!(first.await.unwrap().status(), 204);
    assert_eq!(
        metric(&daemon, "sume_inbox_port_in_flight_refused_total").await,
        1.0
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn what_cannot_verify_is_refused_without_reading_the_body() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.max_body_bytes = 1024 * 1024;
    let daemon = Daemon::start(c).await;
    let now = unix_now();
    let good = signature(now, b"{}");
    let mib = 1024 * 1024;
    for (head, status) in [
        (webhook_head(Some(now), None, mib), "401"),
        (webhook_head(Some(now), Some("v1=abc"), mib), "401"),
        (
            webhook_head(Some(now), Some(&[good.as_str(); 6].join(",")), mib),
            "401",
        ),
        (webhook_head(None, Some(&good), mib), "401"),
        (
            webhook_head(Some(now - 3600), Some(&signature(now - 3600, b"{}")), mib),
            "401",
        ),
        (webhook_head(Some(now), Some(&good), 2 * mib), "413"),
    ] {
        let mut s = open_with(daemon.webhook, &head).await;
        let answer = read_head(&mut s, Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("no answer without the body to:\n{head}"));
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{answer}\nto:\n{head}"
        );
        // The unread body is still on the wire: the connection cannot carry another request,
        // and the answer says so before the server closes it.
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("\r\nconnection: close\r\n"),
            "{answer}\nto:\n{head}"
        );
        assert!(
            read_until_closed(&mut s, Duration::from_secs(5))
                .await
                .is_some(),
            "still open after refusing:\n{head}"
        );
    }
    assert!(
        metric(
            &daemon,
            "sume_inbox_webhooks_total{outcome=\"unauthorized\"}"
        )
        .await
            >= 5.0
    );
    daemon.stop().await;
}
