//! The webhooks still reading their body, oldest first, with the bytes each holds of
//! MAX_BODY_MEMORY, so that a newcomer can shed the oldest of them when it finds the port's
//! MAX_IN_FLIGHT slots, or its body memory, held.
//!
//! A request reaches its body only with headers that look right (a well-formed signature
//! header, a fresh timestamp), which anyone can forge; an attacker who then stalls its body
//! would hold a slot, and what it sent of its body, until BODY_TIMEOUT. So:
//! - at MAX_IN_FLIGHT the public port cancels the request that has been reading its body the
//!   longest (answered 503 with `Retry-After`, its connection closed) and gives its slot to the
//!   new request, as MAX_CONNECTIONS sheds the oldest connection still sending its headers;
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
}

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

    /// Registers a request that starts reading its body.
    pub fn enter(&self) -> Reading {
        let shed = CancellationToken::new();
        let held = Arc::new(AtomicUsize::new(0));
        let mut readers = self.lock();
        let id = readers.next_id;
        readers.next_id += 1;
        let reader = Reader {
            shed: shed.clone(),
            held: held.clone(),
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
        let first = readers.enter();
        let second = readers.enter();
        let third = readers.enter();
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
            readers.enter(),
            readers.enter(),
            readers.enter(),
            readers.enter(),
            readers.enter(),
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
}
