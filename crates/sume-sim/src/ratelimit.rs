//! Per-key rate limits, reads and creates counted apart, in fixed windows.
//!
//! Windows are aligned to the simulator's start (window `n` covers `[n*w, (n+1)*w)`), so
//! "requests per window" is a well-defined number a test can assert on; every window's counts
//! are kept (the last [`WINDOWS_KEPT`] per key) and shown by `GET /sim/stats`. A verdict carries
//! what the `RateLimit-*` headers and `Retry-After` say.
//!
//! Reads also have a daily cap (Sume documents 10,000 reads a day per key), counted in days
//! aligned to the simulator's start like the windows (an assumption: the docs do not say when
//! Sume's day begins), and of a configurable length so a test can reach its end. A read the day
//! refuses answers 429 whose `Retry-After` and `RateLimit-Reset` run to the day's end, with the
//! day's limit as `RateLimit-Limit`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Windows kept per key for `/sim/stats`.
pub const WINDOWS_KEPT: usize = 10_000;

/// Which budget a request spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    Read,
    Create,
}

/// The limiter's answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub limit: u32,
    pub remaining: u32,
    /// Time until the current window ends.
    pub reset: Duration,
}

/// Whole seconds, rounded up.
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

impl Verdict {
    /// `Retry-After` for a refused request: the rest of the window, at least one second.
    pub fn retry_after_secs(&self) -> u64 {
        ceil_secs(self.reset).max(1)
    }

    /// Sets `RateLimit-Limit`, `-Remaining` and `-Reset` where the answer has none yet.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for (name, value) in [
            ("ratelimit-limit", u64::from(self.limit)),
            ("ratelimit-remaining", u64::from(self.remaining)),
            ("ratelimit-reset", ceil_secs(self.reset)),
        ] {
            if !headers.contains_key(name) {
                headers.insert(name, HeaderValue::from(value));
            }
        }
        if !self.allowed && !headers.contains_key("retry-after") {
            headers.insert("retry-after", HeaderValue::from(self.retry_after_secs()));
        }
    }
}

/// What one key did in one window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowCount {
    /// Window number since the simulator started.
    pub window: u64,
    /// Milliseconds from the simulator's start to the window's start.
    pub starts_at_ms: u64,
    /// Reads allowed in this window (at most `--reads-per-window`).
    pub reads: u32,
    /// Reads refused with a 429 for being over the limit (injected 429s count as allowed).
    pub reads_refused: u32,
    /// Creates allowed in this window (at most `--creates-per-window`).
    pub creates: u32,
    /// Creates refused with a 429 for being over the limit.
    pub creates_refused: u32,
}

/// Fixed-window counters for every key.
#[derive(Debug)]
pub struct RateLimiter {
    epoch: Instant,
    window: Duration,
    reads: u32,
    creates: u32,
    windows: Mutex<HashMap<String, BTreeMap<u64, WindowCount>>>,
    day: Duration,
    reads_per_day: u32,
    /// Per key: the day's number and the reads it allowed.
    days: Mutex<HashMap<String, (u64, u32)>>,
}

impl RateLimiter {
    pub fn new(epoch: Instant, window: Duration, reads: u32, creates: u32) -> RateLimiter {
        RateLimiter {
            epoch,
            window: window.max(Duration::from_millis(1)),
            reads,
            creates,
            windows: Mutex::new(HashMap::new()),
            day: Duration::from_secs(86_400),
            reads_per_day: u32::MAX,
            days: Mutex::new(HashMap::new()),
        }
    }

    /// The same with a cap of `reads` per key and `day`.
    pub fn with_daily_reads(self, reads: u32, day: Duration) -> RateLimiter {
        RateLimiter {
            day: day.max(Duration::from_millis(1)),
            reads_per_day: reads,
            ..self
        }
    }

    /// Counts a read against the key's day: what the day has left after it (and when it ends),
    /// or the verdict when the day refuses it.
    fn check_day(&self, key: &str, now: Instant) -> Result<(u32, Duration), Verdict> {
        let (index, reset) = self.span_of(now, self.day);
        let mut days = self.days.lock().expect("rate lock");
        let (day, used) = days.entry(key.to_owned()).or_insert((index, 0));
        if *day != index {
            (*day, *used) = (index, 0);
        }
        if *used < self.reads_per_day {
            *used += 1;
            return Ok((self.reads_per_day - *used, reset));
        }
        Err(Verdict {
            allowed: false,
            limit: self.reads_per_day,
            remaining: 0,
            reset,
        })
    }

    fn window_of(&self, now: Instant) -> (u64, Duration) {
        self.span_of(now, self.window)
    }

    /// The number of the span of length `span` holding `now`, and the time to its end.
    fn span_of(&self, now: Instant, span: Duration) -> (u64, Duration) {
        let since = now.saturating_duration_since(self.epoch).as_nanos();
        let w = span.as_nanos();
        let index = (since / w) as u64;
        let ends = (index as u128 + 1) * w;
        (index, Duration::from_nanos((ends - since) as u64))
    }

    /// Counts one request of `key` and says whether it is within the budget.
    pub fn check(&self, key: &str, class: Class, now: Instant) -> Verdict {
        let (index, reset) = self.window_of(now);
        let limit = match class {
            Class::Read => self.reads,
            Class::Create => self.creates,
        };
        let mut all = self.windows.lock().expect("rate lock");
        let per_key = all.entry(key.to_owned()).or_default();
        let count = per_key.entry(index).or_insert_with(|| WindowCount {
            window: index,
            starts_at_ms: (self.window.as_millis() as u64).saturating_mul(index),
            ..WindowCount::default()
        });
        let (used, refused) = match class {
            Class::Read => (&mut count.reads, &mut count.reads_refused),
            Class::Create => (&mut count.creates, &mut count.creates_refused),
        };
        // The day counts only reads the window allows, so a refused read spends neither.
        let day = match class {
            Class::Read if *used < limit => Some(self.check_day(key, now)),
            _ => None,
        };
        let day_left = match day {
            Some(Err(refusal)) => {
                *refused += 1;
                return refusal;
            }
            Some(Ok(left)) => Some(left),
            None => None,
        };
        let allowed = *used < limit;
        if allowed {
            *used += 1;
        } else {
            *refused += 1;
        }
        let remaining = limit - *used;
        while per_key.len() > WINDOWS_KEPT {
            per_key.pop_first();
        }
        // The tighter of the two: a client pacing itself by RateLimit-Remaining is not met by a
        // day-long 429 while the window says reads remain.
        match day_left {
            Some((left, day_reset)) if left < remaining => Verdict {
                allowed,
                limit: self.reads_per_day,
                remaining: left,
                reset: day_reset,
            },
            _ => Verdict {
                allowed,
                limit,
                remaining,
                reset,
            },
        }
    }

    /// The windows of `key`, oldest first.
    pub fn windows(&self, key: &str) -> Vec<WindowCount> {
        let all = self.windows.lock().expect("rate lock");
        all.get(key)
            .map(|w| w.values().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reads_and_creates_apart_and_resets_per_window() {
        let epoch = Instant::now();
        let rl = RateLimiter::new(epoch, Duration::from_secs(60), 2, 1);
        let t = epoch + Duration::from_secs(10);
        assert!(rl.check("a", Class::Read, t).allowed);
        let v = rl.check("a", Class::Read, t);
        assert!(v.allowed);
        assert_eq!(v.remaining, 0);
        let refused = rl.check("a", Class::Read, t);
        assert!(!refused.allowed);
        assert_eq!(refused.reset, Duration::from_secs(50));
        assert_eq!(refused.retry_after_secs(), 50);
        assert!(
            rl.check("a", Class::Create, t).allowed,
            "creates have their own budget"
        );
        assert!(
            rl.check("b", Class::Read, t).allowed,
            "keys have their own budget"
        );
        let next = rl.check("a", Class::Read, epoch + Duration::from_secs(61));
        assert!(next.allowed);
        let windows = rl.windows("a");
        assert_eq!(windows.len(), 2);
        assert_eq!((windows[0].reads, windows[0].reads_refused), (2, 1));
        assert_eq!(windows[0].creates, 1);
        assert_eq!(windows[1].starts_at_ms, 60_000);
    }

    #[test]
    fn the_daily_read_cap_refuses_until_the_day_ends() {
        let epoch = Instant::now();
        let rl = RateLimiter::new(epoch, Duration::from_secs(1), 100, 100)
            .with_daily_reads(2, Duration::from_secs(60));
        let t = epoch + Duration::from_secs(10);
        let first = rl.check("a", Class::Read, t);
        assert!(first.allowed);
        assert_eq!(
            (first.limit, first.remaining),
            (2, 1),
            "the headers tell the day's cap when it is the tighter"
        );
        let last = rl.check("a", Class::Read, t + Duration::from_secs(2));
        assert!(last.allowed);
        assert_eq!((last.remaining, last.reset.as_secs()), (0, 48));
        let refused = rl.check("a", Class::Read, t + Duration::from_secs(4));
        assert!(!refused.allowed, "the minute allows it, the day does not");
        assert_eq!((refused.limit, refused.remaining), (2, 0));
        assert_eq!(refused.retry_after_secs(), 46, "to the day's end");
        assert!(
            rl.check("a", Class::Create, t).allowed,
            "creates are not capped a day"
        );
        assert!(
            rl.check("b", Class::Read, t).allowed,
            "each key has its own day"
        );
        assert!(
            rl.check("a", Class::Read, epoch + Duration::from_secs(61))
                .allowed
        );
    }

    #[test]
    fn retry_after_is_at_least_one_second() {
        let epoch = Instant::now();
        let rl = RateLimiter::new(epoch, Duration::from_millis(100), 1, 1);
        rl.check("a", Class::Read, epoch);
        let v = rl.check("a", Class::Read, epoch + Duration::from_millis(50));
        assert!(!v.allowed);
        assert_eq!(v.retry_after_secs(), 1);
        let mut h = HeaderMap::new();
        v.apply(&mut h);
        assert_eq!(h["retry-after"], "1");
        assert_eq!(h["ratelimit-remaining"], "0");
        assert_eq!(h["ratelimit-limit"], "1");
        assert_eq!(h["ratelimit-reset"], "1");
    }
}
