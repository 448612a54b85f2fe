//! The clock the sweep's statements read: the database's own, or one a test sets and moves.
//!
//! Every statement that computes an age or a due time takes the clock as a parameter and reads
//! `coalesce($now, now())`. In production the parameter is null, so the database's one clock
//! rules for every instance; a test passes a [`Clock::fixed`] time and moves it forward, so
//! "an hour later" costs nothing and a test never waits for a real interval to pass.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Where "now" comes from for the sweep's statements.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// The database's `now()`, shared by the whole fleet.
    #[default]
    Database,
    /// A time the holder sets; clones share it, so moving one moves them all.
    Fixed(Arc<Mutex<DateTime<Utc>>>),
}

impl Clock {
    /// A clock stopped at `at`, to be moved with [`Clock::advance`] or [`Clock::set`].
    pub fn fixed(at: DateTime<Utc>) -> Clock {
        Clock::Fixed(Arc::new(Mutex::new(at)))
    }

    /// The `$now` parameter of a statement: `None` lets the database use its own clock.
    pub fn now(&self) -> Option<DateTime<Utc>> {
        match self {
            Clock::Database => None,
            Clock::Fixed(at) => Some(*at.lock().expect("clock lock")),
        }
    }

    /// Moves a fixed clock forward. The database's clock cannot be moved: panics.
    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).expect("clock step in range");
        match self {
            Clock::Database => panic!("the database's clock cannot be moved"),
            Clock::Fixed(at) => *at.lock().expect("clock lock") += by,
        }
    }

    /// Sets a fixed clock. The database's clock cannot be set: panics.
    pub fn set(&self, to: DateTime<Utc>) {
        match self {
            Clock::Database => panic!("the database's clock cannot be set"),
            Clock::Fixed(at) => *at.lock().expect("clock lock") = to,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_a_fixed_clock_and_the_database_clock_is_no_parameter() {
        assert_eq!(Clock::Database.now(), None);
        let t = Utc::now();
        let clock = Clock::fixed(t);
        let held = clock.clone();
        clock.advance(Duration::from_secs(90));
        assert_eq!(held.now(), Some(t + chrono::Duration::seconds(90)));
        held.set(t);
        assert_eq!(clock.now(), Some(t));
    }
}
