//! Whether Sume's answers may be taken as verdicts: a 404 means "not this key's job" only while
//! the URL and the key are known to work.
//!
//! A wrong `SUME_API_URL` (a missing `/api`, say) answers 404 for every path, which would read
//! as "not our job" under every key: every waiting event set aside as foreign, every open job
//! given up. So each key is checked positively (one cheap authenticated read that must answer
//! 200, [`sume_wire::StatusClient::check_key`]) before the first verdict and every
//! [`RECHECK_EVERY`] after (sooner after a failure), and a breaker watches the polls: jobs we
//! registered are ours, so when nearly every poll in a window answers 404 under the job's own
//! key, something is wrong on our side of the URL and verdicts stop for [`BREAKER_OPEN_FOR`].
//! While verdicts stop, nothing is set aside and nothing is given up; terminal statuses Sume
//! reports still close jobs. A passed check counts for KEY_CHECK_MAX_AGE only: when no check of
//! a key could pass for that long (the checks fail, or find no read budget), verdicts stop too. Nothing here touches `/readyz`: a problem on Sume's side must not
//! take ingest out of rotation.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// How often a key that worked is checked again.
pub const RECHECK_EVERY: Duration = Duration::from_secs(300);
/// How soon a key that failed its check is checked again.
pub const RECHECK_FAILED_EVERY: Duration = Duration::from_secs(30);
/// The polls the breaker looks at.
pub const BREAKER_WINDOW: usize = 50;
/// The share of those answered 404 that opens the breaker.
pub const BREAKER_404_SHARE: f64 = 0.95;
/// How long verdicts stop once the breaker opens.
pub const BREAKER_OPEN_FOR: Duration = Duration::from_secs(600);

/// How long a passed key check lets 404s count as verdicts when KEY_CHECK_MAX_AGE is not given.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(900);
/// How long after start a key not yet checked is the normal state of a starting instance
/// (its first check waits for a read token the fleet shares), not a problem to warn about.
pub const FIRST_CHECK_GRACE: Duration = Duration::from_secs(60);

/// The keys' last checks and the breaker; shared by the services that ask Sume.
#[derive(Clone)]
pub struct ApiCheck {
    state: Arc<Mutex<State>>,
    /// KEY_CHECK_MAX_AGE: a key whose last passed check is older is not known to work.
    max_age: Duration,
    /// When this instance began checking: see [`FIRST_CHECK_GRACE`].
    started: Instant,
}

impl Default for ApiCheck {
    fn default() -> Self {
        ApiCheck::new(DEFAULT_MAX_AGE)
    }
}

#[derive(Default)]
struct State {
    /// Per key name: whether its last check answered 200, and when it was made.
    keys: HashMap<String, (bool, Instant)>,
    /// The last polls under a job's own key: true for a 404.
    window: VecDeque<bool>,
    open_until: Option<Instant>,
    /// Keys whose check a pass has claimed and not finished ([`KeyClaim`]).
    checking: std::collections::HashSet<String>,
}

/// One pass's claim on a key's due check: while it is held, other passes of this instance
/// (the inbox check and the poll start together) neither check the key again nor spend a read
/// on it. Dropped, however the check ended (done, no budget, an error), the key is free again.
pub struct KeyClaim {
    api: ApiCheck,
    key: String,
}

impl Drop for KeyClaim {
    fn drop(&mut self) {
        self.api.state().checking.remove(&self.key);
    }
}

/// Why verdicts are not allowed now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// These keys failed their check, their pass is too old, or they were never checked.
    Keys(Vec<String>),
    /// These keys were never checked, within [`FIRST_CHECK_GRACE`] of the start: the first
    /// checks have not run yet.
    FirstChecks(Vec<String>),
    /// Nearly every recent poll of our own jobs answered 404.
    Breaker,
}

impl ApiCheck {
    /// Checks whose pass counts for `max_age` (KEY_CHECK_MAX_AGE).
    pub fn new(max_age: Duration) -> ApiCheck {
        ApiCheck {
            state: Arc::default(),
            max_age,
            started: Instant::now(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `key` is due a check at `now`.
    pub fn due(&self, key: &str, now: Instant) -> bool {
        match self.state().keys.get(key) {
            None => true,
            Some((true, at)) => now.duration_since(*at) >= RECHECK_EVERY,
            Some((false, at)) => now.duration_since(*at) >= RECHECK_FAILED_EVERY,
        }
    }

    /// The claim on `key`'s check when it is due at `now` and no other pass holds it.
    pub fn claim(&self, key: &str, now: Instant) -> Option<KeyClaim> {
        if !self.due(key, now) || !self.state().checking.insert(key.to_owned()) {
            return None;
        }
        Some(KeyClaim {
            api: self.clone(),
            key: key.to_owned(),
        })
    }

    /// Records a key's check.
    pub fn checked(&self, key: &str, usable: bool, now: Instant) {
        self.state().keys.insert(key.to_owned(), (usable, now));
    }

    /// Records one poll of a job under its own key: `not_found` for a 404. Answers true when
    /// this poll opened the breaker.
    pub fn polled(&self, not_found: bool, now: Instant) -> bool {
        let mut s = self.state();
        s.window.push_back(not_found);
        while s.window.len() > BREAKER_WINDOW {
            s.window.pop_front();
        }
        let misses = s.window.iter().filter(|m| **m).count();
        let full = s.window.len() == BREAKER_WINDOW;
        if full && misses as f64 >= BREAKER_404_SHARE * BREAKER_WINDOW as f64 {
            s.window.clear();
            s.open_until = Some(now + BREAKER_OPEN_FOR);
            // Check every key again before the next verdict.
            s.keys.clear();
            return true;
        }
        false
    }

    /// `Ok` when verdicts may be made at `now` with `keys`, else why not.
    pub fn verdicts(&self, keys: &[String], now: Instant) -> Result<(), Hold> {
        let s = self.state();
        if s.open_until.is_some_and(|until| now < until) {
            return Err(Hold::Breaker);
        }
        // A key works while its last check passed, and not too long ago: a check that cannot
        // be made (no read budget, Sume down) must not leave an old pass standing for ever.
        let fresh = |at: &Instant| now.saturating_duration_since(*at) < self.max_age;
        let failing: Vec<String> = keys
            .iter()
            .filter(|k| !s.keys.get(*k).is_some_and(|(ok, at)| *ok && fresh(at)))
            .cloned()
            .collect();
        let starting = now.saturating_duration_since(self.started) < FIRST_CHECK_GRACE;
        if failing.is_empty() {
            Ok(())
        } else if starting && failing.iter().all(|k| !s.keys.contains_key(k)) {
            Err(Hold::FirstChecks(failing))
        } else {
            Err(Hold::Keys(failing))
        }
    }

    /// Whether the breaker is open at `now`.
    pub fn breaker_open(&self, now: Instant) -> bool {
        self.state().open_until.is_some_and(|until| now < until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<String> {
        vec!["main".into(), "other".into()]
    }

    #[test]
    fn no_verdict_before_every_key_answered_200() {
        let c = ApiCheck::default();
        let now = Instant::now();
        assert_eq!(c.verdicts(&keys(), now), Err(Hold::FirstChecks(keys())));
        // Still unchecked a minute after the start (no read token came): a problem.
        assert_eq!(
            c.verdicts(&keys(), now + FIRST_CHECK_GRACE),
            Err(Hold::Keys(keys()))
        );
        // One check failed: no longer a start.
        c.checked("main", false, now);
        assert_eq!(c.verdicts(&keys(), now), Err(Hold::Keys(keys())));
        c.checked("main", true, now);
        c.checked("other", false, now);
        assert_eq!(
            c.verdicts(&keys(), now),
            Err(Hold::Keys(vec!["other".into()]))
        );
        assert!(!c.due("main", now + Duration::from_secs(60)));
        assert!(c.due("other", now + RECHECK_FAILED_EVERY));
        c.checked("other", true, now);
        assert_eq!(c.verdicts(&keys(), now), Ok(()));
        assert!(c.due("main", now + RECHECK_EVERY));
    }

    #[test]
    fn a_due_check_is_claimed_by_one_pass_at_a_time() {
        let c = ApiCheck::default();
        let now = Instant::now();
        let first = c.claim("main", now).expect("never checked: due");
        assert!(c.claim("main", now).is_none(), "held by the first pass");
        assert!(c.claim("other", now).is_some(), "each key apart");
        drop(first); // no budget, say: nothing recorded
        let again = c.claim("main", now).expect("free again");
        c.checked("main", true, now);
        drop(again);
        assert!(c.claim("main", now).is_none(), "checked: not due");
        assert!(c.claim("main", now + RECHECK_EVERY).is_some());
    }

    #[test]
    fn a_pass_too_old_is_no_permission() {
        let c = ApiCheck::new(Duration::from_secs(900));
        let now = Instant::now();
        c.checked("main", true, now);
        c.checked("other", true, now);
        assert_eq!(c.verdicts(&keys(), now + Duration::from_secs(899)), Ok(()));
        // No check could be made since (no budget, Sume down): the permission lapses.
        assert_eq!(
            c.verdicts(&keys(), now + Duration::from_secs(900)),
            Err(Hold::Keys(keys()))
        );
        c.checked("main", true, now + Duration::from_secs(900));
        c.checked("other", true, now + Duration::from_secs(900));
        assert_eq!(c.verdicts(&keys(), now + Duration::from_secs(901)), Ok(()));
    }

    #[test]
    fn nearly_every_poll_answered_404_opens_the_breaker() {
        let c = ApiCheck::default();
        let now = Instant::now();
        for k in keys() {
            c.checked(&k, true, now);
        }
        // A few 404s among found jobs: nothing.
        for i in 0..BREAKER_WINDOW * 2 {
            assert!(!c.polled(i % 10 == 0, now));
        }
        assert_eq!(c.verdicts(&keys(), now), Ok(()));
        // Then 404 after 404.
        let opened = (0..BREAKER_WINDOW).any(|_| c.polled(true, now));
        assert!(opened);
        assert_eq!(c.verdicts(&keys(), now), Err(Hold::Breaker));
        assert!(c.breaker_open(now));
        // After the pause, the keys must prove themselves again.
        let later = now + BREAKER_OPEN_FOR;
        assert_eq!(c.verdicts(&keys(), later), Err(Hold::Keys(keys())));
        assert!(c.due("main", later));
    }
}
