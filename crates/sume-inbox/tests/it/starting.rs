//! While `serve`'s start waits (here for the migrations' lock, held as by another instance
//! migrating), LISTEN_ADDR answers: `/healthz` 200 and `/readyz` 503 saying why, a webhook 503
//! with `Retry-After`, nothing stored; and systemd hears that the start goes on. Before, the
//! port said nothing until the start was over, so an orchestrator's probes and systemd's
//! `TimeoutStartSec=` killed a start that migrated or waited longer than they allowed.

use std::process::{Child, Stdio};
use std::time::Duration;

use crate::shutdown::{notify_socket, serve_command, sigterm_and_wait_for_exit};
use crate::support::*;

/// The migrations' advisory lock, as `sume_inbox::db::migrate` names it.
const MIGRATIONS_LOCK: &str = "x'53554d45494e4258'::bigint";

/// A session holding the migrations' lock, as an instance migrating does.
async fn hold_the_migrations_lock(db: &TestDb) -> tokio_postgres::Client {
    let holder = db.client().await;
    let sql = format!("select pg_advisory_lock({MIGRATIONS_LOCK})");
    holder.execute(sql.as_str(), &[]).await.unwrap();
    holder
}

/// Lets the lock `holder` holds go.
async fn release(holder: &tokio_postgres::Client) {
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
    let waiting = "another instance is migrating the schema: waiting for the migrations' lock";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (status, said) = loop {
        match get(&http, &format!("{base}/readyz")).await {
            Some((status, said)) if said.contains(waiting) => break (status, said),
            answer => assert!(
                tokio::time::Instant::now() < deadline,
                "/readyz never said the start waits for the lock: {answer:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 503, "{said}");
    assert!(said.starts_with("starting: "), "{said}");
    let (status, said) = get(&http, &format!("{base}/healthz")).await.unwrap();
    assert_eq!(status, 200, "alive: {said}");
    assert!(
        said.starts_with("starting: ") && said.contains(waiting),
        "{said}"
    );

    let webhooks = format!("{base}/webhooks/sume");
    let refused = Delivery::completed("job_while_starting")
        .send(&http, &webhooks)
        .await;
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "5");
    assert_eq!(refused.headers()["connection"], "close");

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
