//! The admin port against slow and numerous clients, over raw sockets on loopback: it is served
//! by the public port's loop, so stalled heads and bodies are closed by HEADER_TIMEOUT and
//! BODY_TIMEOUT, and MAX_ADMIN_CONNECTIONS caps its connections; no timeout cuts a `?wait=`
//! in progress, which is answered when its job closes (or at shutdown), and the public port
//! keeps answering throughout.

use std::time::Duration;

use sume_inbox::config::Config;

use crate::port::{metric, open_with, read_head, read_until_closed};
use crate::support::*;
use crate::wait::{outcome, register, start_wait};

/// Every timer at a second, so a test sees each of them fire.
fn short(db: &TestDb) -> Config {
    let mut c = config(&db.url);
    c.port.header_timeout = Duration::from_secs(1);
    c.port.idle_timeout = Duration::from_secs(1);
    c.port.body_timeout = Duration::from_secs(1);
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn stalled_admin_connections_and_bodies_are_closed_by_their_timeouts() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(short(&db)).await;
    let mut stalled = Vec::new();
    for i in 0..40 {
        let head = if i % 2 == 0 {
            ""
        } else {
            "GET /v1/jobs/job_x HT"
        };
        stalled.push(open_with(daemon.admin, head).await);
    }
    let closing = stalled.into_iter().map(|mut s| {
        tokio::spawn(async move { read_until_closed(&mut s, Duration::from_secs(20)).await })
    });
    for closed in futures_util::future::join_all(closing).await {
        assert!(
            closed.unwrap().is_some(),
            "an admin connection stalled in its head stayed open"
        );
    }
    let header = "sume_inbox_admin_port_timeouts_total{kind=\"header\"}";
    assert!(metric(&daemon, header).await >= 40.0);
    // A write whose body stalls is answered 408 and closed.
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: 100\r\n\r\n{{\"job_id\":",
        daemon.admin
    );
    let mut post = open_with(daemon.admin, &head).await;
    let answer = read_until_closed(&mut post, Duration::from_secs(20))
        .await
        .expect("a stalled admin body keeps its connection open");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // In the API's error envelope, with its request id.
    assert!(answer.contains("\"code\":\"body_timeout\""), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("x-request-id: req_"),
        "{answer}"
    );
    let body = "sume_inbox_admin_port_timeouts_total{kind=\"body\"}";
    assert!(metric(&daemon, body).await >= 1.0);
    assert_eq!(db.scalar("select count(*) from sume.jobs").await, 0);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn beyond_max_admin_connections_idle_ones_are_shed_and_a_wait_outlives_every_timeout() {
    let db = TestDb::new().await;
    let mut c = short(&db);
    c.wait.max_waiters = 2;
    c.max_admin_connections = 8;
    let daemon = Daemon::start(c).await;
    register(&db, "job_awaited").await;
    register(&db, "job_at_shutdown").await;
    let awaited = start_wait(&daemon, "job_awaited", "60s").await;
    // Many more connections than the cap, sending nothing: the oldest idle ones are shed to
    // make room, never the wait.
    let mut stalled = Vec::new();
    for _ in 0..30 {
        stalled.push(open_with(daemon.admin, "").await);
    }
    let mut first = stalled.remove(0);
    assert!(
        read_until_closed(&mut first, Duration::from_secs(5))
            .await
            .is_some(),
        "the oldest idle connection is still open"
    );
    assert!(metric(&daemon, "sume_inbox_admin_port_connections_shed_total").await >= 15.0);
    assert!(metric(&daemon, "sume_inbox_admin_port_connections_open").await <= 8.0);
    // The others are closed by HEADER_TIMEOUT: the wait has outlived it, and BODY_TIMEOUT and
    // IDLE_TIMEOUT (the same second), and goes on.
    let header = "sume_inbox_admin_port_timeouts_total{kind=\"header\"}";
    wait_for(
        "stalled heads time out",
        Duration::from_secs(20),
        || async { metric(&daemon, header).await >= 1.0 },
    )
    .await;
    assert!(!awaited.is_finished(), "the wait was cut");
    // The public port answers meanwhile, and its delivery closes the job: the wait is answered.
    let http = reqwest::Client::new();
    let r = Delivery::completed("job_awaited")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    assert_eq!(r.status(), 204);
    let (status, how, job) = outcome(awaited.await.unwrap()).await;
    assert_eq!((status, how.as_str()), (200, "closed"));
    assert_eq!(job["state"], "completed");
    // At shutdown a wait in progress is answered, and the port closes.
    let at_shutdown = start_wait(&daemon, "job_at_shutdown", "60s").await;
    daemon.shutdown.cancel();
    let (status, how, job) = outcome(at_shutdown.await.unwrap()).await;
    assert_eq!((status, how.as_str()), (200, "shutdown"));
    assert_eq!(job["state"], "open");
    daemon.task.await.unwrap().unwrap();
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_kept_alive_admin_connection_is_closed_after_idle_timeout() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(short(&db)).await;
    let head = format!("GET /metrics HTTP/1.1\r\nhost: {}\r\n\r\n", daemon.admin);
    let mut s = open_with(daemon.admin, &head).await;
    let answer = read_head(&mut s, Duration::from_secs(5)).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        read_until_closed(&mut s, Duration::from_secs(20))
            .await
            .is_some(),
        "an idle admin connection stayed open past IDLE_TIMEOUT"
    );
    assert!(
        metric(
            &daemon,
            "sume_inbox_admin_port_timeouts_total{kind=\"idle\"}"
        )
        .await
            >= 1.0
    );
    daemon.stop().await;
}
