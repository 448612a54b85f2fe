//! The webhooks still reading their body, oldest first, with the connection each came on and
//! the bytes each holds of MAX_BODY_MEMORY, so that a newcomer can shed the oldest of them
//! when it finds the port's connections, its MAX_IN_FLIGHT slots, or its body memory, held.
//!
//! A request reaches its body only with headers that look right (a well-formed signature
//! header, a fresh timestamp), which anyone can forge; an attacker who then stalls its body
//! would hold a connection, a slot, and what it sent of its body, until BODY_TIMEOUT. So:
//! - at MAX_CONNECTIONS, when no connection is still sending its headers, the public port
//!   cancels the request that has been reading its body the longest (answered 503 with
//!   `Retry-After`, its connection closed) and gives its connection's place to the newcomer;
//! - at MAX_IN_FLIGHT it cancels that request likewise and gives its slot to the new request,
//!   as MAX_CONNECTIONS sheds the oldest connection still sending its headers;
//! - when a body's next bytes do not fit in what is left of MAX_BODY_MEMORY, its reader sheds
//!   the oldest other readers that hold bytes, as many as it takes to cover what it lacks (none
//!   when all of them together could not), and waits briefly for their bytes to come back.
//!
//! A genuine delivery sends its body at once, so the oldest reader is the slowest; a request
//! already verified and waiting for its commit is not a reader any more and is never shed, and
//! no reader sheds itself.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

/// The registry, shared by the webhook handler and the port's server loop.
#[derive(Clone, Debug, Default)]
pub struct BodyReaders {
    inner: Arc<Mutex<Readers>>,
}

#[derive(Debug, Default)]
struct Readers {
    next_id: u64,
    open: BTreeMap<u64, Reader>,
}

/// What the registry knows of one reader.
#[derive(Debug)]
struct Reader {
    shed: CancellationToken,
    held: Arc<AtomicUsize>,
    on: Option<Connection>,
}

/// The connection a request came on, as the port's server numbers them: it puts one in every
/// request's extensions, and the webhook handler enters its body reader under it, so that the
/// connection cap can make room by shedding a reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connection(pub u64);

/// One request reading its body; leaves the registry when dropped.
#[derive(Debug)]
pub struct Reading {
    id: u64,
    readers: BodyReaders,
    shed: CancellationToken,
    held: Arc<AtomicUsize>,
}

impl BodyReaders {
    fn lock(&self) -> MutexGuard<'_, Readers> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a request that starts reading its body, on connection `on` (if known).
    pub fn enter(&self, on: Option<Connection>) -> Reading {
        let shed = CancellationToken::new();
        let held = Arc::new(AtomicUsize::new(0));
        let mut readers = self.lock();
        let id = readers.next_id;
        readers.next_id += 1;
        let reader = Reader {
            shed: shed.clone(),
            held: held.clone(),
            on,
        };
        readers.open.insert(id, reader);
        Reading {
            id,
            readers: self.clone(),
            shed,
            held,
        }
    }

    /// Cancels the request that has been reading its body the longest; false when none is.
    pub fn shed_oldest(&self) -> bool {
        match self.lock().open.pop_first() {
            Some((_, reader)) => {
                reader.shed.cancel();
                true
            }
            None => false,
        }
    }

    /// At the connection cap: cancels the request that has been reading its body the longest
    /// among those on a connection `open` says is still counted, and answers that connection
    /// (its place goes to a newcomer); `None` when no such request is reading.
    pub fn shed_oldest_of(&self, open: impl Fn(Connection) -> bool) -> Option<Connection> {
        let mut readers = self.lock();
        let (id, on) = readers
            .open
            .iter()
            .find_map(|(&id, r)| r.on.filter(|&c| open(c)).map(|c| (id, c)))?;
        if let Some(reader) = readers.open.remove(&id) {
            reader.shed.cancel();
        }
        Some(on)
    }

    /// Requests reading their body now.
    pub fn len(&self) -> usize {
        self.lock().open.len()
    }

    /// Whether no request is reading its body.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Reading {
    /// Completes when this request has been shed.
    pub async fn shed(&self) {
        self.shed.cancelled().await
    }

    /// Records that this request now holds `bytes` of MAX_BODY_MEMORY.
    pub fn holds(&self, bytes: usize) {
        self.held.store(bytes, Ordering::Relaxed);
    }

    /// Sheds the oldest other readers holding bytes, as many as it takes for what they hold
    /// to cover `lacking` bytes; none when all of them together hold less. Answers how many
    /// were shed (their bytes return as their handlers drop them).
    pub fn shed_others_for(&self, lacking: usize) -> usize {
        let mut readers = self.readers.lock();
        let mut covered = 0;
        let mut victims = Vec::new();
        for (&id, reader) in &readers.open {
            if covered >= lacking {
                break;
            }
            let held = reader.held.load(Ordering::Relaxed);
            if id != self.id && held > 0 {
                covered += held;
                victims.push(id);
            }
        }
        if covered < lacking {
            return 0;
        }
        for id in &victims {
            if let Some(reader) = readers.open.remove(id) {
                reader.shed.cancel();
            }
        }
        victims.len()
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.readers.lock().open.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_reader_is_shed_first_and_leaving_unregisters() {
        let readers = BodyReaders::default();
        let first = readers.enter(None);
        let second = readers.enter(None);
        let third = readers.enter(None);
        drop(second);
        assert_eq!(readers.len(), 2);
        assert!(readers.shed_oldest());
        first.shed().await; // completes: it was shed
        assert!(!third.shed.is_cancelled(), "the newer reader stays");
        assert_eq!(readers.len(), 1);
        drop(first);
        drop(third);
        assert!(readers.is_empty());
        assert!(!readers.shed_oldest(), "nobody to shed");
    }

    #[tokio::test]
    async fn for_memory_the_oldest_others_holding_bytes_are_shed_until_they_cover_the_lack() {
        let readers = BodyReaders::default();
        let (a, b, c, d, newcomer) = (
            readers.enter(None),
            readers.enter(None),
            readers.enter(None),
            readers.enter(None),
            readers.enter(None),
        );
        a.holds(100);
        // b holds nothing: shedding it would free nothing.
        c.holds(100);
        d.holds(100);
        newcomer.holds(500);
        assert_eq!(
            newcomer.shed_others_for(301),
            0,
            "the others hold 300 in all: nobody is shed for nothing"
        );
        assert_eq!(readers.len(), 5);
        assert_eq!(newcomer.shed_others_for(150), 2);
        a.shed().await;
        c.shed().await;
        assert!(!b.shed.is_cancelled() && !d.shed.is_cancelled());
        assert!(!newcomer.shed.is_cancelled(), "a reader never sheds itself");
        assert_eq!(readers.len(), 3);
        assert_eq!(
            newcomer.shed_others_for(0),
            0,
            "nothing lacking, nobody shed"
        );
        assert_eq!(d.shed_others_for(501), 0);
        assert_eq!(d.shed_others_for(500), 1);
        newcomer.shed().await;
    }

    #[tokio::test]
    async fn at_the_connection_cap_the_oldest_reader_on_a_counted_connection_is_shed() {
        let readers = BodyReaders::default();
        let unknown = readers.enter(None);
        let gone = readers.enter(Some(Connection(1)));
        let oldest = readers.enter(Some(Connection(2)));
        let newest = readers.enter(Some(Connection(3)));
        // Connection 1 is no longer counted (its reader is about to be dropped with it), and a
        // reader whose connection is unknown cannot make room for one.
        let counted = |c: Connection| c != Connection(1);
        assert_eq!(readers.shed_oldest_of(counted), Some(Connection(2)));
        oldest.shed().await;
        assert!(!unknown.shed.is_cancelled() && !gone.shed.is_cancelled());
        assert!(!newest.shed.is_cancelled());
        assert_eq!(readers.len(), 3);
        assert_eq!(readers.shed_oldest_of(counted), Some(Connection(3)));
        assert_eq!(readers.shed_oldest_of(counted), None, "nobody left to shed");
        drop((unknown, gone, oldest, newest));
        assert!(readers.is_empty());
    }
}
