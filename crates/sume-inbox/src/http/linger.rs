//! How a port's connection closes once its last answer is sent, for [`super::server`].
//!
//! An answer given before a request's body was read, or while it was (a 401 or a 413 from the
//! headers, a 413 at the body limit, a 503 shed, a 408), leaves the rest of the body on the
//! wire. Closed at once, the socket resets the connection when those bytes arrive, and a
//! client that writes its whole body before it reads (Python's urllib, many others) fails on
//! its write and never reads the answer. So such a connection closes as RFC 9112 §9.6 says: its
//! write side is shut (the client reads the end of the answer), what the client still sends is
//! read and discarded, and the socket is closed when the client closes its side, or after
//! [`LINGER_TIME`], or after [`LINGER_BYTES_PER_LIMIT`] times the port's body limit, whichever
//! comes first; a connection lingering is the first shed at the connection cap
//! ([`super::conns`]), and is counted (`..._lingering_connections`, `..._lingers_total{by}`).
//!
//! What it costs: its connection's place under the cap for at most [`LINGER_TIME`] (shed first
//! when a newcomer needs it), its task, no buffer of its own (the bytes discarded go through one
//! buffer per thread), and no slot of MAX_IN_FLIGHT or byte of MAX_BODY_MEMORY.
//!
//! A connection whose requests were read whole closes at once, as does one shed at the cap while
//! it read a body (answered 503): its place is already a newcomer's.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::timed_io::ConnState;
use crate::metrics::{LingerEnd, PortMetrics};

/// The longest a connection reads what its client sends after the answer.
pub const LINGER_TIME: Duration = Duration::from_secs(2);

/// The most a connection reads after the answer, in bodies of the port's limit (MAX_BODY_BYTES;
/// the admin API's 2 MiB): a client's body a few times over the limit still reads its answer.
pub const LINGER_BYTES_PER_LIMIT: u64 = 4;

/// The size of each thread's buffer for the bytes discarded.
const DISCARD_BUFFER: usize = 64 * 1024;

thread_local! {
    /// Where the bytes read after an answer go: borrowed for one read that does not wait, so
    /// every connection lingering on a thread shares it.
    static DISCARD: RefCell<Vec<u8>> = RefCell::new(vec![0; DISCARD_BUFFER]);
}

/// Closes `stream`, the connection `conn`, answered: at once when its last request was read
/// whole (`unread` false), or when it was shed at the cap while it read a body (its place is
/// already another's); else after lingering, at most `limit` × [`LINGER_BYTES_PER_LIMIT`]
/// bytes and [`LINGER_TIME`], or until the connection is shed. Counted in `metrics`.
pub(super) async fn close(
    mut stream: TcpStream,
    conn: &ConnState,
    unread: bool,
    limit: usize,
    metrics: &PortMetrics,
) {
    if !unread || conn.is_closing() {
        let _ = stream.shutdown().await;
        return;
    }
    conn.lingering();
    metrics.lingering.inc();
    let max_bytes = limit as u64 * LINGER_BYTES_PER_LIMIT;
    let end = tokio::select! {
        end = discard(&mut stream, max_bytes) => end,
        () = tokio::time::sleep(LINGER_TIME) => LingerEnd::time,
        () = conn.shed.cancelled() => LingerEnd::shed,
    };
    metrics.lingering.dec();
    metrics.lingered(end);
}

/// Shuts the write side of `stream` (its client reads the end of the answer), then reads and
/// discards what comes until the client closes its side (or resets), or `max_bytes` came.
async fn discard(stream: &mut TcpStream, max_bytes: u64) -> LingerEnd {
    if stream.shutdown().await.is_err() {
        return LingerEnd::client;
    }
    let mut read = 0u64;
    loop {
        if stream.readable().await.is_err() {
            return LingerEnd::client;
        }
        match DISCARD.with_borrow_mut(|buffer| stream.try_read(buffer)) {
            Ok(0) => return LingerEnd::client,
            Ok(n) => read += n as u64,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => return LingerEnd::client,
        }
        if read >= max_bytes {
            return LingerEnd::bytes;
        }
    }
}

/// A request body that clears its connection's [`ConnState::body_unread`] once read to its
/// end: what the server reads to tell whether its close must linger.
pub struct ReadToEnd<B> {
    inner: B,
    conn: Arc<ConnState>,
}

impl<B> ReadToEnd<B> {
    /// `inner`, the body of the request `conn` is handling.
    pub fn new(inner: B, conn: Arc<ConnState>) -> ReadToEnd<B> {
        ReadToEnd { inner, conn }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for ReadToEnd<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            _ => false,
        };
        if ended {
            this.conn.body_read();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::metrics::LingerLabels;

    /// A connection's two ends: the client's, and the server's as the loop hands it over.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        (client.unwrap(), accepted.unwrap().0)
    }

    /// Lingers on `server` (a limit of 1,000 bytes: 4,000 read at most), and answers how it
    /// ended, as counted.
    async fn lingered(server: TcpStream, conn: &ConnState) -> LingerEnd {
        let metrics = PortMetrics::default();
        close(server, conn, true, 1000, &metrics).await;
        assert_eq!(metrics.lingering.get(), 0);
        let ends = LingerEnd::ALL.into_iter();
        let counted: Vec<_> = ends
            .filter(|&by| metrics.lingers.get_or_create(&LingerLabels { by }).get() == 1)
            .collect();
        assert_eq!(counted.len(), 1, "{counted:?}");
        counted[0]
    }

    #[tokio::test]
    async fn a_client_that_closes_after_reading_ends_it_and_reads_the_end_of_the_answer() {
        let (mut client, server) = pair().await;
        let conn = ConnState::accepted();
        client.write_all(&[b'x'; 3000]).await.unwrap();
        let reading = async {
            let mut rest = Vec::new();
            client.read_to_end(&mut rest).await.unwrap();
            drop(client);
            rest
        };
        let (end, rest) = tokio::join!(lingered(server, &conn), reading);
        assert_eq!((end, rest.len()), (LingerEnd::client, 0));
        assert!(conn.is_lingering());
    }

    #[tokio::test]
    async fn a_client_sending_past_the_byte_bound_is_closed() {
        let (mut client, server) = pair().await;
        let sending = async move {
            let chunk = [b'x'; 1000];
            while client.write_all(&chunk).await.is_ok() {}
        };
        let conn = ConnState::accepted();
        let (end, ()) = tokio::join!(lingered(server, &conn), sending);
        assert_eq!(end, LingerEnd::bytes);
    }

    #[tokio::test]
    async fn a_client_that_neither_sends_nor_closes_is_closed_at_the_time_bound() {
        let (_client, server) = pair().await;
        let end = lingered(server, &ConnState::accepted()).await;
        assert_eq!(end, LingerEnd::time);
    }

    #[tokio::test]
    async fn a_lingering_connection_shed_is_closed() {
        let (_client, server) = pair().await;
        let conn = ConnState::accepted();
        conn.shed.cancel();
        assert_eq!(lingered(server, &conn).await, LingerEnd::shed);
    }

    /// Closes `server` as answered with `unread`, its client silent: it must close at once.
    async fn closes_at_once(conn: &ConnState, unread: bool) {
        let (mut client, server) = pair().await;
        let metrics = PortMetrics::default();
        close(server, conn, unread, 1000, &metrics).await;
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(!conn.is_lingering());
        let ends = LingerEnd::ALL.into_iter();
        let counted = ends.map(|by| metrics.lingers.get_or_create(&LingerLabels { by }).get());
        assert_eq!(counted.sum::<u64>(), 0);
    }

    #[tokio::test]
    async fn a_connection_whose_requests_were_read_whole_closes_at_once() {
        closes_at_once(&ConnState::accepted(), false).await;
    }

    #[tokio::test]
    async fn a_connection_shed_at_the_cap_while_it_read_a_body_closes_at_once() {
        let conn = ConnState::accepted();
        conn.closing();
        closes_at_once(&conn, true).await;
    }
}
