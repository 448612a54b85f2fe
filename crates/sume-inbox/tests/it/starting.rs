//! While `serve`'s start waits (here for the migrations' lock, held as by another instance
//! migrating), LISTEN_ADDR answers: `/healthz` 200 and `/readyz` 503 saying why, a webhook 503
//! with `Retry-After`, nothing stored; and systemd hears that the start goes on. Before, the
//! port said nothing until the start was over, so an orchestrator's probes and systemd's
//! `TimeoutStartSec=` killed a start that migrated or waited longer than they allowed.

use std::process::{Child, Stdio};
use std::time::Duration;

use crate::port_linger::{signed, urllib};
use crate::port_memory::metric;
use crate::shutdown::{notify_socket, serve_command, sigterm_and_wait_for_exit};
use crate::support::*;

/// The migrations' advisory lock, as `sume_inbox::db::migrate` names it.
const MIGRATIONS_LOCK: &str = "x'53554d45494e4258'::bigint";

/// A session holding the migrations' lock, as an instance migrating does.
pub(crate) async fn hold_the_migrations_lock(db: &TestDb) -> tokio_postgres::Client {
    let holder = db.client().await;
    let sql = format!("select pg_advisory_lock({MIGRATIONS_LOCK})");
    holder.execute(sql.as_str(), &[]).await.unwrap();
    holder
}

/// Lets the lock `holder` holds go.
pub(crate) async fn release(holder: &tokio_postgres::Client) {
    let sql = format!("select pg_advisory_unlock({MIGRATIONS_LOCK})");
    holder.execute(sql.as_str(), &[]).await.unwrap();
}

/// The binary's `serve`, killed when dropped (a test that fails leaves no daemon behind).
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary's `serve` on `port`, its output discarded.
fn spawn_serve(db: &TestDb, port: u16, notify_path: &std::path::Path) -> Serving {
    let child = serve_command(db, port, free_port(), notify_path)
        .env("SHUTDOWN_TIMEOUT", "5s")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Serving(child)
}

/// GET `url`: its status and body, `None` while nothing answers.
async fn get(http: &reqwest::Client, url: &str) -> Option<(u16, String)> {
    let r = http.get(url).send().await.ok()?;
    let status = r.status().as_u16();
    Some((status, r.text().await.ok()?))
}

/// What the port says while another instance holds the migrations' lock.
const WAITING: &str = "another instance is migrating the schema: waiting for the migrations' lock";

/// `/readyz` on `base`, asked until it says the start waits for the migrations' lock (30 s at
/// most): its status and words.
async fn until_waiting_for_the_lock(http: &reqwest::Client, base: &str) -> (u16, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match get(http, &format!("{base}/readyz")).await {
            Some((status, said)) if said.contains(WAITING) => return (status, said),
            answer => assert!(
                tokio::time::Instant::now() < deadline,
                "/readyz never said the start waits for the lock: {answer:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn while_the_start_waits_for_the_migrations_lock_the_port_says_so_then_serves() {
    let db = TestDb::new().await;
    let holder = hold_the_migrations_lock(&db).await;
    let port = free_port();
    let (notify_path, _notify) = notify_socket(port);
    let mut child = spawn_serve(&db, port, &notify_path);
    let base = format!("http://127.0.0.1:{port}");
    // Short: a port that says nothing must fail the test, not hang it.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let (status, said) = until_waiting_for_the_lock(&http, &base).await;
    assert_eq!(status, 503, "{said}");
    assert!(said.starts_with("starting: "), "{said}");
    let (status, said) = get(&http, &format!("{base}/healthz")).await.unwrap();
    assert_eq!(status, 200, "alive: {said}");
    assert!(
        said.starts_with("starting: ") && said.contains(WAITING),
        "{said}"
    );

    let webhooks = format!("{base}/webhooks/sume");
    let refused = Delivery::completed("job_while_starting")
        .send(&http, &webhooks)
        .await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "5");
    assert_eq!(refused.headers()["connection"], "close");
    // A client that writes its whole body before it reads (urllib) reads that answer too.
    let size = 2 << 20;
    let answered = urllib(&webhooks, 10, size, 503, &signed(unix_now(), size)).await;
    assert_eq!(answered, 10);

    release(&holder).await;
    wait_for(
        "/readyz 200 once migrated",
        Duration::from_secs(30),
        || async {
            get(&http, &format!("{base}/readyz"))
                .await
                .is_some_and(|(s, _)| s == 200)
        },
    )
    .await;
    let stored = Delivery::completed("job_once_serving")
        .send(&http, &webhooks)
        .await;
    assert_eq!(stored.status(), 204, "the same port, now the daemon's own");
    let jobs = db.event_job_ids().await;
    assert_eq!(jobs.len(), 1, "nothing stored while starting: {jobs:?}");
    assert!(jobs.contains("job_once_serving"), "{jobs:?}");
    let status = sigterm_and_wait_for_exit(&mut child.0).await;
    assert!(status.success(), "exit status {status}");
    let _ = std::fs::remove_file(&notify_path);
}

/// Under systemd (`Type=notify`), a start that waits tells so every 10 s with
/// `EXTEND_TIMEOUT_USEC` and what it waits for (`STATUS=`): past `TimeoutStartSec=`, systemd
/// ends the start only when such messages stop (a process that hangs). `READY=1` follows once
/// it serves.
#[tokio::test(flavor = "multi_thread")]
async fn a_start_waiting_for_the_migrations_lock_tells_systemd_it_goes_on() {
    let db = TestDb::new().await;
    let holder = hold_the_migrations_lock(&db).await;
    let port = free_port();
    let (notify_path, notify) = notify_socket(port);
    let mut child = spawn_serve(&db, port, &notify_path);
    let started = std::time::Instant::now();
    let notify = std::sync::Arc::new(notify);
    let next = || {
        let notify = notify.clone();
        tokio::task::spawn_blocking(move || {
            let mut message = [0u8; 512];
            let n = notify
                .recv(&mut message)
                .expect("a message from the daemon");
            String::from_utf8_lossy(&message[..n]).into_owned()
        })
    };
    let said = next().await.unwrap();
    assert!(
        said.starts_with("EXTEND_TIMEOUT_USEC=30000000\n"),
        "after {:?}: {said:?}",
        started.elapsed()
    );
    assert!(
        said.contains("STATUS=starting: another instance is migrating the schema"),
        "{said:?}"
    );
    release(&holder).await;
    let mut said = next().await.unwrap();
    while said.starts_with("EXTEND_TIMEOUT_USEC=") {
        said = next().await.unwrap();
    }
    assert!(said.starts_with("READY=1\n"), "{said:?}");
    let status = sigterm_and_wait_for_exit(&mut child.0).await;
    assert!(status.success(), "exit status {status}");
    let _ = std::fs::remove_file(&notify_path);
}

/// Reads what the daemon tells systemd until `READY=1`.
fn until_ready(notify: &std::os::unix::net::UnixDatagram) {
    let mut message = [0u8; 512];
    loop {
        let n = notify.recv(&mut message).expect("READY=1 from the daemon");
        if message[..n].starts_with(b"READY=1\n") {
            return;
        }
    }
}

/// The connections accepted while the daemon started are still open when its own server takes
/// the listener over: they count against MAX_CONNECTIONS with the server's, and those still
/// waiting for a request head are the first closed to make room. Before, each server counted
/// only its own, so the port could hold twice its cap (and twice its share of the open-file
/// limit) for HEADER_TIMEOUT after the start.
#[tokio::test(flavor = "multi_thread")]
async fn the_connections_opened_while_starting_count_against_max_connections_once_serving() {
    let db = TestDb::new().await;
    let holder = hold_the_migrations_lock(&db).await;
    let (port, admin) = (free_port(), free_port());
    let (notify_path, notify) = notify_socket(port);
    let child = serve_command(&db, port, admin, &notify_path)
        .env("MAX_CONNECTIONS", "20")
        .env("MAX_IN_FLIGHT", "10")
        .env("HEADER_TIMEOUT", "60s")
        .env("IDLE_TIMEOUT", "60s")
        .env("SHUTDOWN_TIMEOUT", "5s")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Serving(child);
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    until_waiting_for_the_lock(&http, &base).await;
    // The answers above close their connections; then the cap is filled with silent ones.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    release(&holder).await;
    tokio::task::spawn_blocking(move || until_ready(&notify))
        .await
        .unwrap();

    let stored = Delivery::completed("job_beside_the_start_s_connections")
        .send(&http, &format!("{base}/webhooks/sume"))
        .await;
    assert_eq!(stored.status(), 204);
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], admin));
    let shed = metric(admin, "sume_inbox_port_connections_shed_total").await;
    let open = metric(admin, "sume_inbox_port_connections_open").await;
    assert_eq!(
        (shed, open),
        (1.0, 20.0),
        "the delivery's connection took the place of the oldest silent one"
    );
    drop(silent);
    let status = sigterm_and_wait_for_exit(&mut child.0).await;
    assert!(status.success(), "exit status {status}");
    let _ = std::fs::remove_file(&notify_path);
}
