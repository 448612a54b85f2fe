//! Thousands of stalled uploads at the largest declared size against the daemon binary with its
//! default limits: each sends well-formed signed-looking headers (a fresh `X-Sume-Timestamp`,
//! `X-Sume-Signature: v1=` and 64 zeros, `Content-Length` of MAX_BODY_BYTES) and one byte of
//! body, then nothing. Genuine deliveries beside them are answered 204 and stored, and the
//! daemon's resident memory (its own process, read from `/proc`) stays bounded meanwhile; and
//! bodies sent a byte a chunk hold what they sent, not the buffers they came in.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::net::TcpStream;

use crate::port::{open_with, read_until_closed};
use crate::support::*;

/// More than MAX_IN_FLIGHT (1024), so the newest shed the oldest; each declares 1 MiB, 2 GiB
/// in all, 32 times MAX_BODY_MEMORY.
const UPLOADS: usize = 2_000;

/// Generous: the debug binary holds about 70 MiB with them on the development machine (the
/// release one 143 MiB with 6,000 more stalled connections beside them, docs/reliability.md).
const RSS_BOUND_KIB: u64 = 256 * 1024;

/// The daemon process, killed when dropped.
pub(super) struct Binary(pub(super) Child);

impl Binary {
    /// `sume-inbox serve` on `db` with free ports and `env` besides, once it is ready; with the
    /// addresses it listens on (public, admin).
    pub(super) async fn start(
        db: &TestDb,
        env: &[(&str, &str)],
    ) -> (Binary, SocketAddr, SocketAddr) {
        Binary::start_with(db, env, |_| {}).await
    }

    /// As [`Binary::start`], with `adjust` applied to the command before it is spawned. Its
    /// stderr goes to a file under the test target's temporary directory unless `adjust` sends
    /// it somewhere else; when the daemon exits or is not ready in time, the test fails with
    /// the exit status and the end of that file.
    pub(super) async fn start_with(
        db: &TestDb,
        env: &[(&str, &str)],
        adjust: impl FnOnce(&mut Command),
    ) -> (Binary, SocketAddr, SocketAddr) {
        let (listen, admin): (SocketAddr, SocketAddr) = (
            format!("127.0.0.1:{}", free_port()).parse().unwrap(),
            format!("127.0.0.1:{}", free_port()).parse().unwrap(),
        );
        let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "binary-{}-{}.log",
            std::process::id(),
            listen.port()
        ));
        let mut command = Command::new(env!("CARGO_BIN_EXE_sume-inbox"));
        command
            .arg("serve")
            .env("DATABASE_URL", &db.url)
            .env("SUME_WEBHOOK_SECRET", SECRET)
            .env("LISTEN_ADDR", listen.to_string())
            .env("ADMIN_ADDR", admin.to_string())
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
        adjust(&mut command);
        let mut daemon = Binary(command.spawn().unwrap());
        let end = tokio::time::Instant::now() + START_DEADLINE;
        loop {
            let ready = reqwest::get(format!("http://{listen}/readyz")).await;
            if matches!(ready, Ok(r) if r.status() == 200) {
                break;
            }
            if let Some(status) = daemon.0.try_wait().unwrap() {
                panic!(
                    "the daemon exited ({status}) before it was ready:\n{}",
                    tail(&log)
                );
            }
            if tokio::time::Instant::now() > end {
                panic!(
                    "the daemon was not ready in {START_DEADLINE:?}:\n{}",
                    tail(&log)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = std::fs::remove_file(&log);
        (daemon, listen, admin)
    }
}

/// The last lines of a daemon's stderr, for a failure's message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The daemon's resident set, from `/proc/PID/status`.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A metric's value from the binary's admin port (0 when absent).
pub(super) async fn metric(admin: SocketAddr, name: &str) -> f64 {
    let text = reqwest::get(format!("http://{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// An upload whose headers pass every check made before the body, at the largest size the
/// daemon takes, that sends one byte of it.
async fn stalled_upload(addr: SocketAddr) -> TcpStream {
    let head = format!(
        "POST /webhooks/sume HTTP/1.1\r\nhost: inbox\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nx-sume-timestamp: {}\r\nx-sume-signature: v1={}\r\n\r\n{{",
        1024 * 1024,
        unix_now(),
        "0".repeat(64)
    );
    open_with(addr, &head).await
}

#[tokio::test(flavor = "multi_thread")]
async fn thousands_of_stalled_uploads_at_the_largest_size_keep_no_delivery_out_nor_memory() {
    sume_inbox::process::fd_limit::raise(UPLOADS as u64 + 1024);
    let db = TestDb::new().await;
    let (daemon, listen, admin) =
        Binary::start(&db, &[("SUME_API_URL", "http://127.0.0.1:9/v1")]).await;
    let pid = daemon.0.id();
    let idle_rss = rss_kib(pid);
    let mut uploads = Vec::with_capacity(UPLOADS);
    for batch in 0..UPLOADS.div_ceil(250) {
        let opening = (batch * 250..UPLOADS.min((batch + 1) * 250)).map(|_| stalled_upload(listen));
        uploads.extend(futures_util::future::join_all(opening).await);
    }
    // Every upload was taken: open, or shed (503, closed) by a newer one at MAX_IN_FLIGHT (or
    // refused for its memory, which must not happen, see below).
    wait_for("every upload taken", Duration::from_secs(30), || async {
        metric(admin, "sume_inbox_port_connections_open").await
            + metric(admin, "sume_inbox_port_bodies_shed_total").await
            + metric(admin, "sume_inbox_port_body_memory_refused_total").await
            >= UPLOADS as f64
    })
    .await;
    let stalled_rss = rss_kib(pid);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for i in 0..5 {
        let job = format!("job_beside_stalled_uploads_{i}");
        let r = Delivery::completed(&job)
            .send_raw(&http, &format!("http://{listen}/webhooks/sume"))
            .await
            .expect("a genuine delivery is answered");
        assert_eq!(r.status(), 204, "{job}");
        assert!(db.event_job_ids().await.contains(&job), "{job} not stored");
    }
    let after_rss = rss_kib(pid);
    assert!(
        stalled_rss.max(after_rss) < RSS_BOUND_KIB,
        "the daemon holds {stalled_rss} KiB with {UPLOADS} uploads stalled, {after_rss} KiB after the deliveries"
    );
    assert_eq!(
        metric(admin, "sume_inbox_port_body_memory_refused_total").await,
        0.0
    );
    // The oldest upload was shed long ago; the newest still waits for its body.
    let oldest = read_until_closed(&mut uploads[0], Duration::from_secs(5)).await;
    assert!(
        oldest
            .as_deref()
            .is_some_and(|a| a.starts_with("HTTP/1.1 503")),
        "{oldest:?}"
    );
    eprintln!(
        "daemon RSS: {idle_rss} KiB ready, {stalled_rss} KiB with {UPLOADS} stalled 1 MiB uploads, {after_rss} KiB after 5 deliveries"
    );
    drop(uploads);
    drop(daemon);
}

/// Bodies sent a byte a chunk, each chunk size padded with thousands of zeros, counted a byte
/// each against MAX_BODY_MEMORY: the daemon's memory grows by about what is counted, not by
/// the read buffers those bytes came in (before, each byte kept its buffer: 8 connections of
/// 2,000 such chunks grew it by 126 MiB while 16 KiB were counted, and nothing was shed).
#[tokio::test(flavor = "multi_thread")]
async fn bodies_sent_a_byte_a_chunk_hold_what_they_sent_not_their_buffers() {
    use tokio::io::AsyncWriteExt;
    const CONNECTIONS: usize = 8;
    const CHUNKS: usize = 1_000;
    let db = TestDb::new().await;
    let limits = [
        ("MAX_BODY_BYTES", "64KiB"),
        ("MAX_BODY_MEMORY", "1MiB"),
        ("BODY_TIMEOUT", "60s"),
    ];
    let (daemon, listen, admin) = Binary::start(&db, &limits).await;
    let pid = daemon.0.id();
    let idle_rss = rss_kib(pid);
    let head = format!(
        "POST /webhooks/sume HTTP/1.1\r\nhost: inbox\r\ntransfer-encoding: chunked\r\n\
         x-sume-timestamp: {}\r\nx-sume-signature: v1={}\r\n\r\n",
        unix_now(),
        "0".repeat(64)
    );
    let body = format!("{}1\r\nx\r\n", "0".repeat(8_000)).repeat(CHUNKS);
    let mut connections = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut s = open_with(listen, &head).await;
        s.write_all(body.as_bytes()).await.unwrap();
        connections.push(s);
    }
    // Every byte read by the daemon: nothing left queued in either direction of the port's
    // connections (the kernel's own count, /proc/net/tcp).
    wait_for("the bodies read", Duration::from_secs(60), || async {
        queued_on(listen.port()) == 0
    })
    .await;
    let grown = rss_kib(pid).saturating_sub(idle_rss);
    // None shed nor refused: every body is still being read, its bytes held.
    assert_eq!(
        metric(admin, "sume_inbox_port_bodies_shed_total").await,
        0.0
    );
    assert_eq!(
        metric(admin, "sume_inbox_port_body_memory_refused_total").await,
        0.0
    );
    assert!(
        grown < 16 * 1024,
        "{CONNECTIONS} bodies of {CHUNKS} one-byte chunks grew the daemon by {grown} KiB"
    );
    eprintln!("{CONNECTIONS} bodies of {CHUNKS} one-byte chunks grew the daemon by {grown} KiB");
    drop(connections);
    drop(daemon);
}

/// Bytes queued in the kernel, sent or received and not yet read, on the TCP connections
/// of local `port` (either end), from `/proc/net/tcp`.
fn queued_on(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let hex_port = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let ours = fields[1].ends_with(&hex_port) || fields[2].ends_with(&hex_port);
            let (tx, rx) = fields[4].split_once(':')?;
            let queued = u64::from_str_radix(tx, 16).ok()? + u64::from_str_radix(rx, 16).ok()?;
            ours.then_some(queued)
        })
        .sum()
}
