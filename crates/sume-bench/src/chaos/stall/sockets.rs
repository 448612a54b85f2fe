//! The stalled sockets themselves: opening one of each kind (half a head; a signed head and
//! half its body; headers that only look signed declaring the largest body, and one byte of
//! it; a whole delivery answered, then silence), opening again when the kernel resets one in a
//! burst, and waiting for the server to close it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::bail;
use sume_wire::headers;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::webhook::{Delivery, Generator};

use super::Stall;

/// What an upload declares: the daemon's MAX_BODY_BYTES, left at its default (1 MiB).
pub(super) const UPLOAD_DECLARED: usize = 1024 * 1024;

/// A stalled connection and when it sent (or read) its last byte.
pub(super) struct Stalled {
    stream: TcpStream,
    since: Instant,
}

/// [`open`], again (up to five times) when the connection is reset before it is answered:
/// a burst of thousands of connections can overflow the listen queue, and the kernel then
/// resets some of them, as a client retrying would see.
pub(super) async fn open_retrying(
    addr: SocketAddr,
    kind: Stall,
    generator: &Generator,
    reopened: &AtomicU64,
) -> anyhow::Result<Stalled> {
    let mut attempt = 1;
    loop {
        match open(addr, kind, generator).await {
            Err(e) if attempt < 5 && is_reset(&e) => {
                reopened.fetch_add(1, Ordering::Relaxed);
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

fn is_reset(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionRefused
            )
        })
    })
}

/// Opens one connection of `kind` and leaves it stalled.
async fn open(addr: SocketAddr, kind: Stall, generator: &Generator) -> anyhow::Result<Stalled> {
    let mut stream = TcpStream::connect(addr).await?;
    let d = generator.next(chrono::Utc::now().timestamp());
    let head = request_head(&d);
    match kind {
        Stall::Header => stream.write_all(&head.as_bytes()[..head.len() / 2]).await?,
        Stall::Body => {
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&d.body[..d.body.len() / 2]).await?;
        }
        Stall::Upload => {
            stream
                .write_all(upload_head(d.timestamp).as_bytes())
                .await?
        }
        Stall::Idle => {
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&d.body).await?;
            let answer = read_head(&mut stream).await?;
            if !answer.starts_with("HTTP/1.1 2") {
                bail!("an idle connection's delivery was answered {answer:?}");
            }
        }
    }
    Ok(Stalled {
        stream,
        since: Instant::now(),
    })
}

fn request_head(d: &Delivery) -> String {
    format!(
        "POST /webhooks/sume HTTP/1.1\r\nhost: inbox\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n{}: {}\r\n{}: {}\r\n{}: {}\r\n\r\n",
        d.body.len(),
        headers::EVENT_ID,
        d.event_id,
        headers::TIMESTAMP,
        d.timestamp,
        headers::SIGNATURE,
        d.signature
    )
}

/// Well-formed headers anyone can write without the secret (a fresh timestamp, a signature of
/// 64 zeros), declaring [`UPLOAD_DECLARED`] bytes, and the first byte of the body.
fn upload_head(timestamp: i64) -> String {
    format!(
        "POST /webhooks/sume HTTP/1.1\r\nhost: inbox\r\ncontent-type: application/json\r\n\
         content-length: {UPLOAD_DECLARED}\r\n{}: {timestamp}\r\n{}: v1={}\r\n\r\n{{",
        headers::TIMESTAMP,
        headers::SIGNATURE,
        "0".repeat(64)
    )
}

/// Reads one response head (to the blank line); the body of a 2xx here is empty.
async fn read_head(stream: &mut TcpStream) -> anyhow::Result<String> {
    let mut all = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        while !all.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await? {
                0 => bail!("the connection closed without an answer"),
                n => all.extend_from_slice(&buf[..n]),
            }
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within 30 s"))??;
    Ok(String::from_utf8_lossy(&all).into_owned())
}

/// How a stalled connection ended.
pub(super) struct Closed {
    pub(super) after: Duration,
    pub(super) got_408: bool,
    /// Answered 503: shed for a newer request (at MAX_IN_FLIGHT, or for MAX_BODY_MEMORY).
    pub(super) got_503: bool,
}

/// Reads until the server closes; `None` when it was still open after `patience`.
pub(super) async fn wait_closed(mut s: Stalled, patience: Duration) -> Option<Closed> {
    let mut all = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        loop {
            match s.stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(patience, read).await.ok()?;
    Some(Closed {
        after: s.since.elapsed(),
        got_408: all.starts_with(b"HTTP/1.1 408"),
        got_503: all.starts_with(b"HTTP/1.1 503"),
    })
}
