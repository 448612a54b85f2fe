//! Answers given before a request's body is read, on both ports, reach a client that writes
//! its whole body before it reads: the answer is sent, the server stops writing, reads and
//! discards what the client still sends (within a time and a byte bound), then closes. Tried
//! with the clients that meet it: Python's urllib (which gives up on a failed write), curl
//! with `Expect: 100-continue`, a client trickling its body, and a thousand oversize uploads
//! at once beside genuine deliveries.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::port::{
    genuine_gets_through, metric, open_with, read_head, read_until_closed, signature, webhook_head,
};
use crate::support::*;

/// Sends `n` POSTs of `size` bytes with Python's urllib, which writes the whole body before it
/// reads and reports a failed write as the request's failure; prints how many were answered
/// `expected`, and on stderr what the others got.
const URLLIB: &str = r#"
import sys, urllib.request, urllib.error
url, n, size, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
headers = dict(h.split(": ", 1) for h in sys.argv[5:])
body = b"x" * size
answered = 0
for _ in range(n):
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    except OSError as e:
        print("no answer:", repr(e), file=sys.stderr)
        continue
    if status == expected:
        answered += 1
    else:
        print("answered", status, file=sys.stderr)
print(answered)
"#;

/// How many of `n` POSTs of `size` bytes of `x` to `url` with `headers`, sent by urllib, were
/// answered `expected`.
pub(crate) async fn urllib(
    url: &str,
    n: u32,
    size: usize,
    expected: u16,
    headers: &[String],
) -> u32 {
    let out = tokio::process::Command::new("python3")
        .args(["-c", URLLIB, url])
        .args([n.to_string(), size.to_string(), expected.to_string()])
        .args(headers)
        .output()
        .await
        .expect("these tests need python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "urllib's script failed: {stderr}");
    let answered = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    if answered < n {
        eprintln!("urllib, {url}, {size} bytes: {answered} of {n} answered {expected}\n{stderr}");
    }
    answered
}

/// The headers of a webhook signed at `ts` over a body of `size` bytes of `x`.
pub(crate) fn signed(ts: i64, size: usize) -> Vec<String> {
    signed_over(ts, "x".repeat(size).as_bytes())
}

/// Ten times each with urllib: a signed 2 MiB webhook (413 from its Content-Length), webhooks
/// of 512 KiB and 1 MiB with a stale timestamp (401 from their headers; on loopback the socket
/// buffers hold the first whole, not the second), a 3 MiB admin write (413 from its
/// Content-Length). Each answer is read every time: the connection reads what still comes
/// before it closes, so urllib's write does not fail on a reset first.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_writes_its_whole_body_first_reads_every_early_answer() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.max_body_bytes = 1024 * 1024;
    let daemon = Daemon::start(c).await;
    let url = daemon.url("/webhooks/sume");
    let (now, mib) = (unix_now(), 1024 * 1024);
    let too_large = urllib(&url, 10, 2 * mib, 413, &signed(now, 2 * mib)).await;
    let stale = urllib(&url, 10, mib / 2, 401, &signed(now - 3600, mib / 2)).await;
    let stale_mib = urllib(&url, 10, mib, 401, &signed(now - 3600, mib)).await;
    let json = ["Content-Type: application/json".to_string()];
    let admin = urllib(&daemon.admin_url("/v1/jobs"), 10, 3 * mib, 413, &json).await;
    assert_eq!((too_large, stale, stale_mib, admin), (10, 10, 10, 10));
    daemon.stop().await;
}

/// A head past the 16 KiB the ports read is answered 431 by the HTTP parser, the rest of the
/// head and the body still coming: urllib, writing them all first, reads that answer too.
#[tokio::test(flavor = "multi_thread")]
async fn a_head_too_large_is_answered_431_to_a_client_that_writes_first() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let pad = [format!("X-Pad: {}", "p".repeat(64 * 1024))];
    let url = daemon.url("/webhooks/sume");
    assert_eq!(urllib(&url, 10, 256 * 1024, 431, &pad).await, 10);
    assert_eq!(
        urllib(&daemon.admin_url("/v1/jobs"), 10, 1024, 431, &pad).await,
        10
    );
    daemon.stop().await;
}

/// curl with `Expect: 100-continue` (which it sends by itself for large bodies) waits for a
/// `100 Continue` before it sends a body: a request refused from its head is answered at once
/// and never told to go on, so curl reads the answer and never sends the body; one taken is
/// told to go on and stored.
#[tokio::test(flavor = "multi_thread")]
async fn curl_with_expect_100_continue_reads_the_early_answer_and_sends_no_body() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let url = daemon.url("/webhooks/sume");
    let now = unix_now();
    let too_large = curl_expecting(&url, 1024 * 1024, &signed(now, 1024 * 1024)).await;
    let stale = curl_expecting(&url, 32 * 1024, &signed(now - 3600, 32 * 1024)).await;
    let json = ["Content-Type: application/json".to_string()];
    let admin = curl_expecting(&daemon.admin_url("/v1/jobs"), 3 << 20, &json).await;
    assert_eq!((too_large, stale, admin), (413, 401, 413));
    // From outside: the first bytes the port sends are the answer, not `100 Continue`.
    let head = webhook_head(Some(now), Some(&signature(now, b"{}")), 1024 * 1024);
    let head = head.replacen("\r\n\r\n", "\r\nexpect: 100-continue\r\n\r\n", 1);
    let mut s = open_with(daemon.webhook, &head).await;
    let answer = read_until_closed(&mut s, Duration::from_secs(10))
        .await
        .expect("answered and closed without the body");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");
    // A genuine delivery sent so is told to go on, and stored.
    let genuine = Delivery::completed("job_expecting");
    let mut headers = signed_over(genuine.timestamp, genuine.body.as_bytes());
    headers.push("X-Sume-Event-Id: evt_job_expecting".into());
    let status = curl(&url, genuine.body.as_bytes(), &headers).await;
    assert_eq!(status, 204);
    assert!(db.event_job_ids().await.contains("job_expecting"));
    daemon.stop().await;
}

/// The headers of a webhook signed at `ts` over `body`.
fn signed_over(ts: i64, body: &[u8]) -> Vec<String> {
    vec![
        "Content-Type: application/json".into(),
        format!("X-Sume-Timestamp: {ts}"),
        format!("X-Sume-Signature: {}", signature(ts, body)),
    ]
}

/// The status curl reads for a POST of `size` bytes of `x` to `url` with `headers`.
async fn curl_expecting(url: &str, size: usize, headers: &[String]) -> u16 {
    curl(url, "x".repeat(size).as_bytes(), headers).await
}

/// The status curl reads for a POST of `body` to `url` with `headers` and
/// `Expect: 100-continue`, waiting as long as it takes for the `100 Continue` (30 s, never
/// reached here: without it, curl would send the body after 1 s anyway).
async fn curl(url: &str, body: &[u8], headers: &[String]) -> u16 {
    let file = std::env::temp_dir().join(format!("linger-{}-{}", std::process::id(), rand_u64()));
    std::fs::write(&file, body).unwrap();
    let mut command = tokio::process::Command::new("curl");
    command.args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"]);
    command.args(["--expect100-timeout", "30", "-H", "Expect: 100-continue"]);
    for header in headers {
        command.args(["-H", header]);
    }
    let data = format!("@{}", file.display());
    let out = command
        .args(["--data-binary", &data, url])
        .output()
        .await
        .expect("these tests need curl");
    let _ = std::fs::remove_file(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "curl {url}: {stderr}");
    String::from_utf8_lossy(&out.stdout).parse().unwrap()
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// A webhook head declaring `length` bytes, signed so that it passes the checks made before
/// the body (a fresh timestamp, a well-formed signature).
fn oversize_head(length: usize) -> String {
    let ts = unix_now();
    webhook_head(Some(ts), Some(&signature(ts, b"{}")), length)
}

/// A client that trickles its body, a KiB every 50 ms, without stopping: it reads its 413 at
/// once, then the end of the answer, and the port closes the connection at the linger's time
/// bound however long it would go on.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_trickling_its_body_reads_its_answer_and_is_closed_at_the_time_bound() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let stream = TcpStream::connect(daemon.webhook).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    writer
        .write_all(oversize_head(1 << 20).as_bytes())
        .await
        .unwrap();
    let trickling = tokio::spawn(async move {
        let kib = [b'x'; 1024];
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if writer.write_all(&kib).await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    });
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut answer));
    assert!(read.await.is_ok(), "the answer did not end");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(trickling.await.unwrap(), "still connected after a minute");
    let lingers = |by: &str| format!("sume_inbox_port_lingers_total{{by=\"{by}\"}}");
    assert_eq!(metric(&daemon, &lingers("time")).await, 1.0);
    assert_eq!(metric(&daemon, &lingers("client")).await, 0.0);
    let lingering = "sume_inbox_port_lingering_connections";
    assert_eq!(metric(&daemon, lingering).await, 0.0);
    daemon.stop().await;
}

/// A client sending far past its answer, as fast as it can, is closed once the connection has
/// read four times MAX_BODY_BYTES after the answer: its writes fail then.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_sending_far_past_its_answer_is_closed_at_the_byte_bound() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let mut s = open_with(daemon.webhook, &oversize_head(1 << 30)).await;
    let chunk = vec![b'x'; 64 * 1024];
    let mut sent = 0usize;
    // 64 KiB is MAX_BODY_BYTES here: the bound is 256 KiB, past the socket buffers' few MiB.
    while sent < 256 << 20 {
        if s.write_all(&chunk).await.is_err() {
            break;
        }
        sent += chunk.len();
    }
    assert!(
        sent < 256 << 20,
        "256 MiB sent and the connection still open"
    );
    let lingers = "sume_inbox_port_lingers_total{by=\"bytes\"}";
    wait_for(
        "a linger ended at its byte bound",
        Duration::from_secs(10),
        || async { metric(&daemon, lingers).await == 1.0 },
    )
    .await;
    daemon.stop().await;
}

/// Writes `head` and `body` bytes of `x`, then reads until the port closes: what was read, or
/// `None` when the write failed (the port closed first).
async fn write_first(addr: SocketAddr, head: &str, body: usize) -> Option<String> {
    let mut s = TcpStream::connect(addr).await.ok()?;
    s.write_all(head.as_bytes()).await.ok()?;
    s.write_all(&vec![b'x'; body]).await.ok()?;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut answer));
    read.await.ok()?.ok()?;
    Some(String::from_utf8_lossy(&answer).into_owned())
}

/// A thousand uploads of three times MAX_BODY_BYTES at once, each writing its whole body
/// before it reads, beside genuine deliveries: every upload reads its 413, every delivery is
/// stored, and no connection is left lingering.
#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_oversize_uploads_at_once_each_read_their_413_beside_genuine_deliveries() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let size = 192 * 1024;
    let uploads: Vec<_> = (0..1000)
        .map(|_| {
            let (addr, head) = (daemon.webhook, oversize_head(size));
            tokio::spawn(async move { write_first(addr, &head, size).await })
        })
        .collect();
    for n in 0..20 {
        genuine_gets_through(&daemon, &db, &format!("job_beside_uploads_{n}")).await;
    }
    let mut unanswered = 0;
    for upload in uploads {
        match upload.await.unwrap() {
            Some(answer) => assert!(answer.starts_with("HTTP/1.1 413"), "{answer}"),
            None => unanswered += 1,
        }
    }
    assert_eq!(unanswered, 0, "uploads that could not read their 413");
    let lingering = "sume_inbox_port_lingering_connections";
    wait_for(
        "no connection lingering",
        Duration::from_secs(20),
        || async { metric(&daemon, lingering).await == 0.0 },
    )
    .await;
    let too_large = r#"sume_inbox_webhooks_total{outcome="too_large"}"#;
    assert_eq!(metric(&daemon, too_large).await, 1000.0);
    let closed = "sume_inbox_port_lingers_total{by=\"client\"}";
    assert_eq!(
        metric(&daemon, closed).await,
        1000.0,
        "each closed by its client"
    );
    daemon.stop().await;
}

/// At MAX_CONNECTIONS, connections lingering after their answer are the first closed for a
/// newcomer: as many uploads as the cap, refused from their heads, each holding its connection
/// a while after its 413 and then sending the next, never keep a genuine delivery out.
#[tokio::test(flavor = "multi_thread")]
async fn at_max_connections_lingering_connections_are_shed_first() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.port.max_connections = 100;
    c.port.max_in_flight = 50;
    let daemon = Daemon::start(c).await;
    let stop = CancellationToken::new();
    let uploaders: Vec<_> = (0..100)
        .map(|i| tokio::spawn(upload_again_and_again(daemon.webhook, i, stop.clone())))
        .collect();
    // Once they are lingering: a burst of new connections, all still sending their heads,
    // would shed the oldest of those, a genuine delivery among them.
    let lingering = "sume_inbox_port_lingering_connections";
    wait_for("uploads lingering", Duration::from_secs(30), || async {
        metric(&daemon, lingering).await >= 50.0
    })
    .await;
    let shed = "sume_inbox_port_lingers_total{by=\"shed\"}";
    let mut n = 0;
    wait_for(
        "lingering connections shed",
        Duration::from_secs(60),
        || {
            n += 1;
            let job = format!("job_beside_lingering_{n}");
            let (daemon, db) = (&daemon, &db);
            async move {
                genuine_gets_through(daemon, db, &job).await;
                metric(daemon, shed).await >= 1.0
            }
        },
    )
    .await;
    stop.cancel();
    futures_util::future::join_all(uploaders).await;
    daemon.stop().await;
}

/// Until `stop`: an upload refused from its head (a KiB of its body sent), its answer read,
/// its connection held open a while (half a second and `i` hundredths, so that the uploaders
/// come back at different times), and again.
async fn upload_again_and_again(addr: SocketAddr, i: u64, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = s.write_all(oversize_head(1 << 20).as_bytes()).await;
        let _ = s.write_all(&[b'x'; 1024]).await;
        let _ = read_head(&mut s, Duration::from_secs(5)).await;
        tokio::time::sleep(Duration::from_millis(500 + 10 * i)).await;
    }
}
