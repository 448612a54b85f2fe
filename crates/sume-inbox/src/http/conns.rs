//! A port's open connections, oldest first, against its cap (MAX_CONNECTIONS on the public
//! port, MAX_ADMIN_CONNECTIONS on the admin one), for [`super::server`]:
//! - at the cap, room is made for a newcomer by closing the oldest connection lingering (answered
//!   with its body unread, reading what its client still sends: [`super::linger`]); else the
//!   oldest still waiting for (or reading) a request head; else by shedding the webhook that has
//!   been reading its body the longest ([`super::body_readers`]), whose handler answers it 503
//!   with `Retry-After` and closes its connection; else the newcomer is closed at once. No other
//!   request being handled is dropped for a newcomer, and a delivery verified and waiting for
//!   its commit never is;
//! - a connection shed counts against the cap no more, but holds its descriptor until its task
//!   has run and closed it. A burst of newcomers, each shedding the one before, piles those up
//!   faster than their tasks run (some 200 beside a cap of 112 on two busy cores: a process
//!   under `ulimit -n 400` ran out of descriptors, and accepted nothing on either port), so the
//!   port accepts no more while [`MAX_CLOSING`] are still open ([`Conns::until_few_closing`]):
//!   newcomers wait in the listen queue meanwhile. A shed body reader's connection, which
//!   answers first, closes then without lingering, and is dropped if it has not closed within
//!   500 ms;
//! - one registry counts a port's connections for the process's whole life: the server that
//!   answers on LISTEN_ADDR while the daemon starts ([`super::server::serve_until`]) and the
//!   daemon's own, which takes the listener over, share it, so that the connections still open
//!   from the start count against the cap (and are the first closed at it) after the handover.
//!   Each server hands in its own body readers and counters.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use super::body_readers::{BodyReaders, Connection};
use super::timed_io::ConnState;
use crate::metrics::PortMetrics;

/// Connections shed and not yet closed beyond which the port stops accepting until some have
/// closed; within the descriptors the open-file limit leaves to spare
/// ([`crate::process::fd_limit::SPARE`]).
pub const MAX_CLOSING: usize = 64;

// Both ports' fit in the spare beside the other descriptors it counts.
const _: () = assert!(2 * MAX_CLOSING as u64 <= crate::process::fd_limit::SPARE / 2);

/// How long a body reader shed at the cap has to be answered 503 and closed before its
/// connection is dropped unanswered (it is answered at once, unless its task cannot run).
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// The registry of one port.
pub struct Conns {
    cap: usize,
    state: Mutex<Open>,
    /// Told each time a connection shed has closed.
    closed: Notify,
}

/// The connections counted against the cap, and how many shed are still to close.
#[derive(Default)]
struct Open {
    next_id: u64,
    open: BTreeMap<u64, Arc<ConnState>>,
    closing: usize,
}

impl Conns {
    /// A port's registry: `cap` connections.
    pub fn new(cap: usize) -> Conns {
        Conns {
            cap,
            state: Mutex::new(Open::default()),
            closed: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, Open> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Completes once fewer than [`MAX_CLOSING`] connections shed are still to close: the port
    /// accepts its next connection only then.
    pub async fn until_few_closing(&self) {
        while self.state().closing >= MAX_CLOSING {
            // `notify_one` keeps its wake-up for a waiter yet to come: none is lost in between.
            self.closed.notified().await;
        }
    }

    /// Registers a new connection, making room for it at the cap (shedding one of
    /// `body_readers` if need be); `None` when none could be made (the new one is then closed).
    /// Counted in `metrics`.
    pub fn admit(
        &self,
        body_readers: &BodyReaders,
        metrics: &PortMetrics,
    ) -> Option<(u64, Arc<ConnState>)> {
        let mut state = self.state();
        if state.open.len() >= self.cap && !make_room(&mut state, body_readers, metrics) {
            metrics.connections_refused.inc();
            return None;
        }
        let id = state.next_id;
        state.next_id += 1;
        let conn = Arc::new(ConnState::accepted());
        state.open.insert(id, conn.clone());
        metrics.connections_open.set(state.open.len() as i64);
        Some((id, conn))
    }

    /// The connection `id` has closed (`metrics` shows how many are left).
    pub fn forget(&self, id: u64, metrics: &PortMetrics) {
        let mut state = self.state();
        if state.open.remove(&id).is_none() {
            // It was shed: one fewer to close.
            state.closing = state.closing.saturating_sub(1);
            self.closed.notify_one();
        }
        metrics.connections_open.set(state.open.len() as i64);
    }
}

/// At the cap: closes the oldest connection lingering, else the oldest still waiting for its
/// request head, else sheds the webhook of `body_readers` that has been reading its body the
/// longest (counted in `port_bodies_shed` by its handler, which answers it). False when none is
/// there.
fn make_room(state: &mut Open, body_readers: &BodyReaders, metrics: &PortMetrics) -> bool {
    let oldest = |sheddable: fn(&ConnState) -> bool| {
        let found = state.open.iter().find(|(_, c)| sheddable(c));
        found.map(|(id, _)| *id)
    };
    let closable = oldest(ConnState::is_lingering).or_else(|| oldest(ConnState::awaiting_head));
    if let Some(shed) = closable.and_then(|id| state.open.remove(&id)) {
        shed.shed.cancel();
        metrics.connections_shed.inc();
        state.closing += 1;
        return true;
    }
    let counted = |Connection(id): Connection| state.open.contains_key(&id);
    let Some(Connection(id)) = body_readers.shed_oldest_of(counted) else {
        return false;
    };
    let Some(shed) = state.open.remove(&id) else {
        return false;
    };
    state.closing += 1;
    shed.closing();
    tokio::spawn(async move {
        tokio::time::sleep(CLOSE_GRACE).await;
        shed.shed.cancel();
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Admits a connection into `conns`, which must have room for it.
    fn admit(conns: &Conns, metrics: &PortMetrics) -> (u64, Arc<ConnState>) {
        conns.admit(&BodyReaders::default(), metrics).expect("room")
    }

    /// At the cap, the oldest connection lingering goes first, then the oldest waiting for a
    /// head; one busy with a request never does.
    #[test]
    fn at_the_cap_lingering_connections_are_shed_before_those_awaiting_a_head() {
        let (conns, metrics) = (Conns::new(3), PortMetrics::default());
        let (_, head) = admit(&conns, &metrics);
        let (_, busy) = admit(&conns, &metrics);
        let (_, lingering) = admit(&conns, &metrics);
        busy.request_started(true);
        lingering.lingering();
        let (_, newcomer) = admit(&conns, &metrics);
        assert!(lingering.shed.is_cancelled());
        assert!(!head.shed.is_cancelled() && !busy.shed.is_cancelled());
        admit(&conns, &metrics);
        assert!(
            head.shed.is_cancelled(),
            "then the oldest awaiting its head"
        );
        assert!(!busy.shed.is_cancelled() && !newcomer.shed.is_cancelled());
        assert_eq!(metrics.connections_shed.get(), 2);
    }
}
