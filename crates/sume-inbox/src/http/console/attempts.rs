//! The limit on wrong sign-in tokens: [`SIGN_IN_LIMIT`] a minute per client, where a client is
//! the peer's address (an IPv6 address by its /64, what one host is usually given). Only an
//! attempt whose form nonce checked out is counted, so posts from other pages (which cannot
//! read the form, nor send its `SameSite=Strict` nonce cookie) count for nothing, and a
//! stranger who loads the form spends only its own address's attempts.
//!
//! Behind a reverse proxy, or on loopback (the default ADMIN_ADDR), every operator shares one
//! address: there, whoever can load the form through it can spend the minute's attempts for
//! all of them.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Wrong tokens allowed per client a minute; past it, every sign-in of that client (the right
/// token too) is answered 429 until the minute ends.
pub const SIGN_IN_LIMIT: u32 = 10;

/// How long a client's count lasts from its first wrong token.
const WINDOW: Duration = Duration::from_secs(60);

/// Clients counted at once; beyond, the oldest count is forgotten (the map stays bounded
/// whatever the number of addresses an attacker has).
const MAX_CLIENTS: usize = 4096;

/// Who an attempt is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Client {
    /// An IPv4 address (an IPv4-mapped IPv6 one included).
    V4([u8; 4]),
    /// The first 64 bits of an IPv6 address.
    V6([u8; 8]),
    /// No address known: every such attempt shares one count.
    Unknown,
}

impl Client {
    /// The client of a request from `peer`.
    pub fn of(peer: Option<SocketAddr>) -> Client {
        match peer.map(|p| p.ip().to_canonical()) {
            Some(IpAddr::V4(v4)) => Client::V4(v4.octets()),
            Some(IpAddr::V6(v6)) => {
                let mut net = [0u8; 8];
                net.copy_from_slice(&v6.octets()[..8]);
                Client::V6(net)
            }
            None => Client::Unknown,
        }
    }
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Client::V4(a) => write!(f, "{}", std::net::Ipv4Addr::from(*a)),
            Client::V6(net) => {
                let mut full = [0u8; 16];
                full[..8].copy_from_slice(net);
                write!(f, "{}/64", std::net::Ipv6Addr::from(full))
            }
            Client::Unknown => f.write_str("an unknown address"),
        }
    }
}

/// A client's wrong tokens in its current window.
#[derive(Debug, Clone, Copy)]
struct Count {
    since: Instant,
    wrong: u32,
}

/// The counts of this instance.
#[derive(Debug, Default)]
pub struct WrongTokens {
    counts: Mutex<HashMap<Client, Count>>,
}

impl WrongTokens {
    fn lock(&self) -> MutexGuard<'_, HashMap<Client, Count>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `client` has used up its wrong tokens for the current minute.
    pub fn spent(&self, client: Client) -> bool {
        self.lock()
            .get(&client)
            .is_some_and(|c| c.since.elapsed() < WINDOW && c.wrong >= SIGN_IN_LIMIT)
    }

    /// Counts a wrong token from `client`.
    pub fn count(&self, client: Client) {
        let mut counts = self.lock();
        if !counts.contains_key(&client) && counts.len() >= MAX_CLIENTS {
            counts.retain(|_, c| c.since.elapsed() < WINDOW);
            if counts.len() >= MAX_CLIENTS {
                let oldest = counts.iter().min_by_key(|(_, c)| c.since).map(|(k, _)| *k);
                oldest.map(|k| counts.remove(&k));
            }
        }
        let now = Instant::now();
        let c = counts.entry(client).or_insert(Count {
            since: now,
            wrong: 0,
        });
        if c.since.elapsed() >= WINDOW {
            *c = Count {
                since: now,
                wrong: 0,
            };
        }
        c.wrong += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(ip: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(ip.parse().unwrap(), 4000))
    }

    #[test]
    fn each_client_spends_its_own_attempts() {
        let wrong = WrongTokens::default();
        let (a, b) = (Client::of(peer("192.0.2.1")), Client::of(peer("192.0.2.2")));
        for _ in 0..SIGN_IN_LIMIT {
            assert!(!wrong.spent(a));
            wrong.count(a);
        }
        assert!(wrong.spent(a));
        assert!(
            !wrong.spent(b),
            "another address is not limited by a's guesses"
        );
        assert_eq!(
            Client::of(peer("::ffff:192.0.2.1")),
            a,
            "an IPv4-mapped address is the same client"
        );
        assert_eq!(
            Client::of(peer("2001:db8:1:2::1")),
            Client::of(peer("2001:db8:1:2:ffff::9")),
            "one /64, one client"
        );
        assert_ne!(
            Client::of(peer("2001:db8:1:2::1")),
            Client::of(peer("2001:db8:1:3::1"))
        );
        assert_eq!(Client::of(None), Client::Unknown);
        assert_eq!(a.to_string(), "192.0.2.1");
        assert_eq!(
            Client::of(peer("2001:db8:1:2::1")).to_string(),
            "2001:db8:1:2::/64"
        );
    }

    #[test]
    fn the_counts_stay_bounded_by_forgetting_the_oldest() {
        let wrong = WrongTokens::default();
        for i in 0..(MAX_CLIENTS as u32 + 10) {
            wrong.count(Client::V4(i.to_be_bytes()));
        }
        assert_eq!(wrong.lock().len(), MAX_CLIENTS);
        assert!(!wrong.lock().contains_key(&Client::V4(0u32.to_be_bytes())));
    }
}
