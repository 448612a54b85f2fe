//! SIGTERM under load: the binary stops accepting, every request it answered 2xx is committed,
//! and it exits 0 in bounded time, also when nobody reads its stderr any more.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_under_load_exits_zero_and_loses_nothing_acknowledged() {
    let db = TestDb::new().await;
    let (port, admin) = (free_port(), free_port());
    let (notify_path, notify) = notify_socket(port);
    let mut child = spawn_serve(&db, port, admin, &notify_path);
    let mut message = [0u8; 256];
    let n = notify.recv(&mut message).expect("READY=1 from the daemon");
    assert!(String::from_utf8_lossy(&message[..n]).starts_with("READY=1"));
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    wait_for("binary ready", START_DEADLINE, || async {
        matches!(http.get(format!("{base}/readyz")).send().await, Ok(r) if r.status() == 200)
    })
    .await;
    assert!(
        healthcheck(port, false) && healthcheck(port, true),
        "the healthcheck command sees it alive and ready"
    );

    let senders = send_until_refused(&http, &format!("{base}/webhooks/sume"));
    wait_for("load is flowing", Duration::from_secs(20), || async {
        db.scalar("select count(*) from sume.events").await >= 200
    })
    .await;
    let status = sigterm_and_wait_for_exit(&mut child).await;
    assert!(status.success(), "exit status {status}");
    assert!(!healthcheck(port, false), "nothing answers any more");
    let n = notify
        .recv(&mut message)
        .expect("STOPPING=1 from the daemon");
    // Lines of KEY=value; a trailing newline is allowed by the protocol.
    assert_eq!(message[..n].trim_ascii_end(), b"STOPPING=1");
    let _ = std::fs::remove_file(&notify_path);
    let mut acked = Vec::new();
    for s in senders {
        acked.extend(s.await.unwrap());
    }
    let stored = db.event_job_ids().await;
    assert!(acked.len() >= 200);
    let lost: Vec<&String> = acked.iter().filter(|j| !stored.contains(*j)).collect();
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
}

/// Stands in for systemd's notification socket (Type=notify).
pub(crate) fn notify_socket(port: u16) -> (PathBuf, UnixDatagram) {
    let path = std::env::temp_dir().join(format!("sume-notify-{}-{port}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_read_timeout(Some(START_DEADLINE)).unwrap();
    (path, socket)
}

/// The binary's `serve` as systemd would start it, stdout discarded; the caller says where
/// stderr goes.
pub(crate) fn serve_command(db: &TestDb, port: u16, admin: u16, notify_path: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sume-inbox"));
    cmd.arg("serve")
        .env("NOTIFY_SOCKET", notify_path)
        .env("DATABASE_URL", &db.url)
        .env("SUME_WEBHOOK_SECRET", SECRET)
        .env("LISTEN_ADDR", format!("127.0.0.1:{port}"))
        .env("ADMIN_ADDR", format!("127.0.0.1:{admin}"))
        .stdout(Stdio::null());
    cmd
}

/// The same, its stderr discarded, given ten seconds to stop.
fn spawn_serve(db: &TestDb, port: u16, admin: u16, notify_path: &Path) -> Child {
    serve_command(db, port, admin, notify_path)
        .env("SHUTDOWN_TIMEOUT", "10s")
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Whether the binary's `healthcheck` (with `--ready`: its readiness) succeeds.
fn healthcheck(port: u16, ready: bool) -> bool {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sume-inbox"));
    cmd.arg("healthcheck")
        .env("LISTEN_ADDR", format!("0.0.0.0:{port}"));
    if ready {
        cmd.arg("--ready");
    }
    cmd.output().unwrap().status.success()
}

/// Sixteen senders of webhooks, each until the daemon stops accepting; each answers the jobs
/// whose webhook was acknowledged (204).
fn send_until_refused(http: &reqwest::Client, url: &str) -> Vec<JoinHandle<Vec<String>>> {
    (0..16)
        .map(|w| {
            let (http, url) = (http.clone(), url.to_owned());
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0..10_000 {
                    let job = format!("job_{w}_{i}");
                    match Delivery::completed(&job).send_raw(&http, &url).await {
                        Ok(r) if r.status() == 204 => acked.push(job),
                        Ok(r) => assert_eq!(r.status(), 503, "only 204, 503 or no answer"),
                        Err(_) => break, // the daemon stopped accepting
                    }
                }
                acked
            })
        })
        .collect()
}

pub(crate) async fn sigterm_and_wait_for_exit(child: &mut Child) -> ExitStatus {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// stderr a pipe whose reader went away (a log shipper restarted, `serve 2>&1 | head`): the
/// lines are lost, nothing else. The logger's own report of the failed write once went to the
/// same stderr and panicked the task that logged, the one that hears SIGTERM among them, so
/// the daemon served on and never stopped.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_is_heard_when_stderr_is_a_pipe_nobody_reads() {
    let db = TestDb::new().await;
    let (port, admin) = (free_port(), free_port());
    let (notify_path, notify) = notify_socket(port);
    let mut child = serve_command(&db, port, admin, &notify_path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let mut message = [0u8; 256];
    let n = notify.recv(&mut message).expect("READY=1 from the daemon");
    assert!(String::from_utf8_lossy(&message[..n]).starts_with("READY=1"));
    // It still serves: a delivery is stored, and its log line lost.
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/webhooks/sume");
    assert_eq!(
        Delivery::completed("job_unread")
            .send(&http, &url)
            .await
            .status(),
        204
    );
    let status = sigterm_and_wait_for_exit(&mut child).await;
    assert!(status.success(), "exit status {status}");
    let _ = std::fs::remove_file(&notify_path);
}

/// An upload that stalls (headers that look signed, a body that never comes) at SIGTERM: the
/// request is dropped at SHUTDOWN_TIMEOUT, and with it what it held, so the ingest writers
/// stop in turn. Before, its connection outlived the forced stop and kept the writers waiting
/// another SHUTDOWN_TIMEOUT, which ended in ERROR lines for tasks "stopped unexpectedly".
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_upload_at_sigterm_is_dropped_with_what_it_held() {
    let db = TestDb::new().await;
    let (port, admin) = (free_port(), free_port());
    let (notify_path, notify) = notify_socket(port);
    let log = std::env::temp_dir().join(format!("sume-stalled-{}-{port}.log", std::process::id()));
    let mut child = serve_command(&db, port, admin, &notify_path)
        .env("SHUTDOWN_TIMEOUT", "1s")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut message = [0u8; 256];
    notify.recv(&mut message).expect("READY=1 from the daemon");
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    // `Expect: 100-continue`: the "100 Continue" says the request is in the daemon's hands and
    // its body being read, so SIGTERM cannot come while the connection waits to be accepted.
    let head = format!(
        "POST /webhooks/sume HTTP/1.1\r\nhost: x\r\nx-sume-timestamp: {}\r\n\
         x-sume-signature: v1={}\r\nexpect: 100-continue\r\ncontent-length: 100\r\n\r\n",
        unix_now(),
        "0".repeat(64)
    );
    let mut stalled = crate::port::open_with(addr, &head).await;
    let interim = crate::port::read_head(&mut stalled, Duration::from_secs(10)).await;
    assert!(
        interim.as_deref().unwrap_or("").starts_with("HTTP/1.1 100"),
        "{interim:?}"
    );
    stalled.write_all(b"abcd").await.unwrap();
    let status = sigterm_and_wait_for_exit(&mut child).await;
    assert!(status.success(), "exit status {status}");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("dropping them unanswered"), "{said}");
    assert!(!said.contains("tasks did not stop"), "{said}");
    assert!(!said.contains("stopped unexpectedly"), "{said}");
    let _ = std::fs::remove_file(&notify_path);
    let _ = std::fs::remove_file(&log);
}
