//! A TCP proxy on a loopback address of its own, between the daemon and a server (PostgreSQL,
//! the simulator), that a scenario breaks on purpose:
//!
//! - [`Proxy::freeze`]: bytes stop moving both ways and every socket stays open (a server that
//!   hangs, a network that stalls); [`Proxy::thaw`] lets them move again;
//! - [`Proxy::reset`]: every connection open now is reset (RST on both sides);
//! - [`Proxy::black_hole`]: the kernel drops every packet to and from the proxy's address
//!   (nftables, see [`Nft`]), so nothing answers, not even TCP: a host that vanished. Only a
//!   connection's own timeouts (TCP keepalives, `tcp_user_timeout`) end the daemon's side.
//!
//! The proxy's tasks stop when it drops; so do the nftables rules.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A running proxy.
pub(super) struct Proxy {
    /// Where clients connect (a 127.x.y.z address of its own, so that a black hole drops
    /// nothing else).
    pub(super) addr: SocketAddr,
    frozen: watch::Sender<bool>,
    /// Cancelled to reset every connection open now; replaced by a fresh one after.
    reset: Arc<std::sync::Mutex<CancellationToken>>,
    accepted: Arc<AtomicU64>,
    stop: CancellationToken,
    nft: Option<Nft>,
}

impl Proxy {
    /// Listens on a fresh loopback address and forwards each connection to `upstream`.
    pub(super) async fn start(upstream: SocketAddr) -> anyhow::Result<Proxy> {
        let (listener, addr) = bind_own_address().await?;
        let (frozen, _) = watch::channel(false);
        let proxy = Proxy {
            addr,
            frozen,
            reset: Arc::new(std::sync::Mutex::new(CancellationToken::new())),
            accepted: Arc::new(AtomicU64::new(0)),
            stop: CancellationToken::new(),
            nft: None,
        };
        let (frozen, stop, accepted) = (
            proxy.frozen.subscribe(),
            proxy.stop.clone(),
            proxy.accepted.clone(),
        );
        let reset = proxy.reset.clone();
        tokio::spawn(accept_loop(
            listener, upstream, frozen, stop, accepted, reset,
        ));
        Ok(proxy)
    }

    /// `url` with its host and port replaced by the proxy's.
    pub(super) fn url_for(&self, url: &str) -> String {
        replace_authority(url, &self.addr.to_string())
    }

    /// Stops moving bytes; every socket stays open.
    pub(super) fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    /// Moves bytes again, those held included.
    pub(super) fn thaw(&self) {
        self.frozen.send_replace(false);
    }

    /// Resets every connection open now (new ones are forwarded as before).
    pub(super) fn reset(&self) {
        let mut token = self.reset.lock().expect("reset token");
        token.cancel();
        *token = CancellationToken::new();
    }

    /// Drops every packet to and from the proxy's address in the kernel, until
    /// [`Proxy::lift`]. Fails when nftables cannot be used here (no `nft`, no CAP_NET_ADMIN).
    pub(super) fn black_hole(&mut self) -> anyhow::Result<()> {
        let ip = match self.addr.ip() {
            std::net::IpAddr::V4(ip) => ip,
            std::net::IpAddr::V6(_) => bail!("the proxy listens on IPv6"),
        };
        self.nft = Some(Nft::drop_address(ip)?);
        Ok(())
    }

    /// Removes the black hole; connections the daemon has not given up yet resume.
    pub(super) fn lift(&mut self) {
        self.nft = None;
    }

    /// The daemon's connections to the proxy that the kernel still holds established (from
    /// `/proc/net/tcp`: local side any, remote side the proxy's address).
    pub(super) fn established_to(&self) -> usize {
        established_to(self.addr)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.reset.lock().expect("reset token").cancel();
    }
}

/// A listener on 127.a.b.c, a..c drawn, falling back to 127.0.0.1 where that fails.
async fn bind_own_address() -> anyhow::Result<(TcpListener, SocketAddr)> {
    for _ in 0..20 {
        let (a, b, c) = {
            let mut rng = rand::thread_rng();
            (
                rng.gen_range(64..250u8),
                rng.gen::<u8>(),
                rng.gen_range(2..250u8),
            )
        };
        let ip = Ipv4Addr::new(127, a, b, c);
        if let Ok(l) = TcpListener::bind((ip, 0)).await {
            let addr = l.local_addr()?;
            return Ok((l, addr));
        }
    }
    bail!("no loopback address 127.x.y.z could be bound for the proxy")
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    frozen: watch::Receiver<bool>,
    stop: CancellationToken,
    accepted: Arc<AtomicU64>,
    reset: Arc<std::sync::Mutex<CancellationToken>>,
) {
    loop {
        let client = tokio::select! {
            _ = stop.cancelled() => return,
            c = listener.accept() => match c {
                Ok((c, _)) => c,
                Err(_) => continue,
            },
        };
        accepted.fetch_add(1, Ordering::Relaxed);
        let (frozen, stop) = (frozen.clone(), stop.clone());
        let reset = reset.lock().expect("reset token").clone();
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(upstream).await {
                forward(client, server, frozen, stop, reset).await;
            }
        });
    }
}

/// Copies both ways until both sides have closed, the proxy stops, or a reset comes. Every
/// close is abortive (linger 0): a reset sends RST both ways at once.
async fn forward(
    client: TcpStream,
    server: TcpStream,
    frozen: watch::Receiver<bool>,
    stop: CancellationToken,
    reset: CancellationToken,
) {
    for s in [&client, &server] {
        let _ = s.set_nodelay(true);
        abortive_close(s);
    }
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = reset.cancelled() => {}
        _ = futures_util::future::join(pump(cr, sw, frozen.clone()), pump(sr, cw, frozen)) => {}
    }
}

/// SO_LINGER with a zero timeout: closing the socket sends RST, not FIN.
fn abortive_close(s: &TcpStream) {
    use std::os::fd::AsRawFd as _;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket this process owns, with a struct of the size given.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// One direction: read, wait while frozen, write; at the end of the input, a FIN onwards.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut frozen: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if wait_thawed(&mut frozen).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        // Bytes read just as the freeze began are held with the rest.
        if wait_thawed(&mut frozen).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

async fn wait_thawed(frozen: &mut watch::Receiver<bool>) -> Result<(), watch::error::RecvError> {
    frozen.wait_for(|f| !*f).await.map(|_| ())
}

/// `scheme://user@host:port,host:port/db?q` with the hosts replaced by `authority`.
fn replace_authority(url: &str, authority: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (auth, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let user = auth.rsplit_once('@').map(|(u, _)| format!("{u}@"));
    format!("{scheme}://{}{authority}{path}", user.unwrap_or_default())
}

/// Sockets in state ESTABLISHED whose remote end is `addr`.
fn established_to(addr: SocketAddr) -> usize {
    let std::net::IpAddr::V4(ip) = addr.ip() else {
        return 0;
    };
    let want = format!(
        "{:08X}:{:04X}",
        u32::from_le_bytes(ip.octets()),
        addr.port()
    );
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[2] == want && f[3] == "01"
        })
        .count()
}

/// An nftables table of this run's own that drops, in the input hook, every packet to or from
/// one address; removed when dropped.
pub(super) struct Nft {
    table: String,
}

impl Nft {
    fn drop_address(ip: Ipv4Addr) -> anyhow::Result<Nft> {
        Nft::drop_matching(&[format!("ip daddr {ip}"), format!("ip saddr {ip}")])
    }

    /// Drops every TCP packet to or from `port` on loopback (a server on 127.0.0.1 that went
    /// silent, its process still running).
    pub(super) fn drop_port(port: u16) -> anyhow::Result<Nft> {
        Nft::drop_matching(&[format!("tcp dport {port}"), format!("tcp sport {port}")])
    }

    fn drop_matching(matches: &[String]) -> anyhow::Result<Nft> {
        let table = format!(
            "sume_chaos_{}_{:x}",
            std::process::id(),
            rand::thread_rng().gen::<u32>()
        );
        let mut script = format!(
            "add table ip {table}\n\
             add chain ip {table} input {{ type filter hook input priority -10; }}\n"
        );
        for m in matches {
            script.push_str(&format!("add rule ip {table} input {m} drop\n"));
        }
        let mut child = Command::new("nft")
            .arg("-f")
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("running nft (Debian: apt-get install nftables)")?;
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(script.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "nft refused the black hole: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(Nft { table })
    }

    /// Whether nftables can be used on this machine (`nft` runs and may add a table).
    pub(super) fn usable() -> Result<(), String> {
        Nft::drop_address(Ipv4Addr::new(127, 254, 254, 254))
            .map(drop)
            .map_err(|e| format!("{e:#}"))
    }
}

impl Drop for Nft {
    fn drop(&mut self) {
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", &self.table])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Waits until `done` holds, checking every 50 ms, for at most `patience`; answers how long it
/// took, or `None` when it never held.
pub(super) async fn time_until(patience: Duration, done: impl Fn() -> bool) -> Option<Duration> {
    let start = tokio::time::Instant::now();
    while start.elapsed() < patience {
        if done() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_pointed_at_the_proxy() {
        assert_eq!(
            replace_authority("postgres://postgres@127.0.0.1:5432/db?x=1", "127.9.9.9:7"),
            "postgres://postgres@127.9.9.9:7/db?x=1"
        );
        assert_eq!(
            replace_authority("http://127.0.0.1:80/api/v1", "127.9.9.9:7"),
            "http://127.9.9.9:7/api/v1"
        );
    }

    #[tokio::test]
    async fn a_frozen_proxy_holds_bytes_and_a_thawed_one_delivers_them() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let mut b = [0u8; 16];
            while let Ok(n) = s.read(&mut b).await {
                if n == 0 || s.write_all(&b[..n]).await.is_err() {
                    break;
                }
            }
        });
        let proxy = Proxy::start(upstream).await.unwrap();
        let mut c = TcpStream::connect(proxy.addr).await.unwrap();
        c.write_all(b"a").await.unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).await.unwrap();
        proxy.freeze();
        c.write_all(b"b").await.unwrap();
        let held = tokio::time::timeout(Duration::from_millis(300), c.read_exact(&mut b)).await;
        assert!(held.is_err(), "a frozen proxy let a byte through");
        proxy.thaw();
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"b");
        proxy.reset();
        let after = tokio::time::timeout(Duration::from_secs(5), c.read(&mut b)).await;
        assert!(
            matches!(after, Ok(Ok(0)) | Ok(Err(_))),
            "the reset left the connection open: {after:?}"
        );
    }
}
