//! The webhooks still reading their body, oldest first, so that a port whose MAX_IN_FLIGHT
//! slots are all held can shed the oldest of them for a newcomer.
//!
//! A request reaches its body only with headers that look right (a well-formed signature
//! header, a fresh timestamp), which anyone can forge; an attacker who then stalls its body
//! would hold a slot until BODY_TIMEOUT. At MAX_IN_FLIGHT the public port therefore cancels the
//! request that has been reading its body the longest (answered 503 with `Retry-After`, its
//! connection closed) and gives its slot to the new request, as MAX_CONNECTIONS sheds the oldest
//! connection still sending its headers. A genuine delivery sends its body at once, so the
//! oldest reader is the slowest; a request already verified and waiting for its commit is never
//! shed.

use std::collections::BTreeMap;
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
    open: BTreeMap<u64, CancellationToken>,
}

/// One request reading its body; leaves the registry when dropped.
#[derive(Debug)]
pub struct Reading {
    id: u64,
    readers: BodyReaders,
    shed: CancellationToken,
}

impl BodyReaders {
    fn lock(&self) -> MutexGuard<'_, Readers> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a request that starts reading its body.
    pub fn enter(&self) -> Reading {
        let shed = CancellationToken::new();
        let mut readers = self.lock();
        let id = readers.next_id;
        readers.next_id += 1;
        readers.open.insert(id, shed.clone());
        Reading {
            id,
            readers: self.clone(),
            shed,
        }
    }

    /// Cancels the request that has been reading its body the longest; false when none is.
    pub fn shed_oldest(&self) -> bool {
        match self.lock().open.pop_first() {
            Some((_, shed)) => {
                shed.cancel();
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
}
