//! Log lines an attacker can cause, at a bounded rate.
//!
//! Every refused delivery is counted in the metrics; its log line is written only while the
//! budget allows (a few a second), and the next line written says how many were left out, so
//! a flood of forged requests cannot fill a disk or drown the log that matters.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A budget of log lines per time window.
#[derive(Debug)]
pub struct LogBudget {
    per_window: u32,
    window: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    started: Option<Instant>,
    used: u32,
    suppressed: u64,
}

impl LogBudget {
    /// At most `per_window` lines each `window`.
    pub const fn new(per_window: u32, window: Duration) -> LogBudget {
        LogBudget {
            per_window,
            window,
            state: Mutex::new(State {
                started: None,
                used: 0,
                suppressed: 0,
            }),
        }
    }

    /// `Some(left_out)` when a line may be written now, with the number of lines left out
    /// since the last one written; `None` when this one must be left out.
    pub fn allow(&self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.started
            .is_none_or(|t| now.duration_since(t) >= self.window)
        {
            s.started = Some(now);
            s.used = 0;
        }
        if s.used < self.per_window {
            s.used += 1;
            Some(std::mem::take(&mut s.suppressed))
        } else {
            s.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_beyond_the_budget_are_left_out_and_counted() {
        let budget = LogBudget::new(2, Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(budget.allow_at(t0), Some(0));
        assert_eq!(budget.allow_at(t0), Some(0));
        for _ in 0..1000 {
            assert_eq!(budget.allow_at(t0 + Duration::from_millis(500)), None);
        }
        assert_eq!(budget.allow_at(t0 + Duration::from_secs(1)), Some(1000));
        assert_eq!(budget.allow_at(t0 + Duration::from_secs(1)), Some(0));
    }
}
