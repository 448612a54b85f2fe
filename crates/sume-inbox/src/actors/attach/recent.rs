//! The job ids registered lately, remembered as hashes for one to two [`HINT_WINDOW`]s, so
//! attach can tell which of ingest's hints need the database (see the attach module).

use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

use tokio::time::Instant;

use super::HINT_WINDOW;

/// The registrations remembered per [`HINT_WINDOW`] at most (a faster stream of registrations
/// shortens the window instead of growing the memory: 8 bytes an id).
const RECENT_MAX: usize = 100_000;

/// The job ids registered lately (their notifications), as hashes in two generations of up to
/// [`HINT_WINDOW`] each: an id is remembered for one to two windows. A collision only costs a
/// look at the database.
#[derive(Default)]
pub(super) struct Recent {
    current: HashSet<u64>,
    previous: HashSet<u64>,
    started: Option<Instant>,
}

impl Recent {
    fn hash(job_id: &str) -> u64 {
        BuildHasherDefault::<DefaultHasher>::default().hash_one(job_id)
    }

    fn rotate(&mut self, now: Instant) {
        let started = *self.started.get_or_insert(now);
        if now.duration_since(started) >= HINT_WINDOW || self.current.len() >= RECENT_MAX {
            self.previous = std::mem::take(&mut self.current);
            self.started = Some(now);
        }
    }

    pub(super) fn insert(&mut self, job_id: &str, now: Instant) {
        self.rotate(now);
        self.current.insert(Self::hash(job_id));
    }

    pub(super) fn contains(&mut self, job_id: &str, now: Instant) -> bool {
        self.rotate(now);
        let h = Self::hash(job_id);
        self.current.contains(&h) || self.previous.contains(&h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_registration_is_remembered_for_one_to_two_windows() {
        let mut recent = Recent::default();
        let t0 = Instant::now();
        recent.insert("job_a", t0);
        assert!(recent.contains("job_a", t0));
        assert!(!recent.contains("job_b", t0));
        let later = t0 + HINT_WINDOW + Duration::from_secs(1);
        assert!(
            recent.contains("job_a", later),
            "kept in the previous generation"
        );
        assert!(
            !recent.contains("job_a", later + HINT_WINDOW),
            "forgotten after two windows"
        );
    }

    #[test]
    fn a_flood_of_registrations_rotates_early_instead_of_growing() {
        let mut recent = Recent::default();
        let now = Instant::now();
        for i in 0..(RECENT_MAX * 3) {
            recent.insert(&format!("job_{i}"), now);
        }
        assert!(recent.current.len() <= RECENT_MAX);
        assert!(recent.previous.len() <= RECENT_MAX);
        assert!(recent.contains(&format!("job_{}", RECENT_MAX * 3 - 1), now));
    }
}
