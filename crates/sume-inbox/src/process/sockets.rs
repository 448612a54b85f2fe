//! Binding the daemon's listeners with a listen queue that holds a burst.
//!
//! `TcpListener::bind` leaves the kernel's accept queue at 128 connections. On the public
//! port that is far too few: when several thousand clients connect at once (a slowloris
//! flood, or Sume's retries after an outage) the queue overflows between two accepts, and the
//! kernel then drops new connections' handshakes or resets connections the client already
//! thinks open, genuine deliveries among them. [`bind`] asks for [`BACKLOG`] instead (the
//! kernel caps it at `net.core.somaxconn`, 4096 by default since Linux 5.4).

use std::io;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

/// The listen queue asked for: the most `MAX_CONNECTIONS`' default (10000) could need between
/// two accepts, capped by the kernel at `net.core.somaxconn`.
pub const BACKLOG: u32 = 8192;

/// Binds `addr` (address reuse on, as `TcpListener::bind` does) with a [`BACKLOG`]-deep
/// listen queue.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::net::TcpStream;
    use tokio::task::JoinSet;

    /// With nothing accepting, a burst of 1000 connections (fewer where the kernel caps the
    /// queue lower) all complete their handshake: they wait in the listen queue. With a
    /// 128-deep queue most of them never would (the kernel drops their handshakes while the
    /// queue is full), and this test would fail at its generous bound.
    #[tokio::test]
    async fn a_burst_of_connections_waits_in_the_queue() {
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(4096);
        let burst = somaxconn.saturating_sub(8).min(1000);
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut connecting = JoinSet::new();
        for _ in 0..burst {
            connecting.spawn(async move {
                tokio::time::timeout(Duration::from_secs(30), TcpStream::connect(addr)).await
            });
        }
        let mut open = Vec::new();
        while let Some(done) = connecting.join_next().await {
            let stream = done
                .unwrap()
                .expect("a connection never completed: the listen queue overflowed")
                .expect("connect");
            open.push(stream);
        }
        assert_eq!(open.len(), burst);
        drop(listener);
    }

    #[tokio::test]
    async fn a_port_in_use_is_refused_and_v6_binds() {
        let first = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let taken = first.local_addr().unwrap();
        assert!(bind(taken).is_err(), "a second listener on a port in use");
        if let Ok(v6) = bind("[::1]:0".parse().unwrap()) {
            assert!(v6.local_addr().unwrap().is_ipv6());
        }
    }
}
