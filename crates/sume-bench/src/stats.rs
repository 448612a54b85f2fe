//! What one measured step counted: answers by class, latencies in an HDR histogram, and the
//! time it took. Senders keep plain per-connection tallies; they are merged once at the end.

use std::time::Duration;

use hdrhistogram::Histogram;

/// The largest latency recorded exactly (anything longer is recorded as this): one minute.
const MAX_MICROS: u64 = 60_000_000;

/// Latencies in microseconds, 3 significant digits.
#[derive(Clone)]
pub struct Latencies {
    hist: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            hist: Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds"),
        }
    }
}

impl std::fmt::Debug for Latencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latencies")
            .field("count", &self.count())
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .finish()
    }
}

impl Latencies {
    /// Records one latency; below a microsecond counts as one, above a minute as a minute.
    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, MAX_MICROS);
        self.hist.saturating_record(us);
    }

    /// [`Latencies::record`], for a latency already in microseconds.
    pub fn record_micros(&mut self, us: u64) {
        self.hist.saturating_record(us.clamp(1, MAX_MICROS));
    }

    /// Adds every latency of `other`.
    pub fn merge(&mut self, other: &Latencies) {
        self.hist
            .add(&other.hist)
            .expect("histograms with the same bounds merge");
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The latency at quantile `q` (0.5 = median); zero when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.hist.is_empty() {
            return Duration::ZERO;
        }
        Duration::from_micros(self.hist.value_at_quantile(q))
    }

    /// The longest latency recorded (to the histogram's precision).
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.hist.max())
    }
}

/// One sender's (or, merged, one step's) tally.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Every 2xx, warm-up included: what the inbox must hold afterwards.
    pub acked_total: u64,
    /// Every request sent, warm-up included.
    pub sent_total: u64,
    /// In the measured window: 2xx answers.
    pub ok: u64,
    /// In the measured window: answers that were not 2xx.
    pub not_2xx: u64,
    /// In the measured window: requests that got no answer (connection errors).
    pub errors: u64,
    /// From the intended send time to the answer (closed loop: the actual send time).
    pub latency: Latencies,
    /// From the actual send time to the answer (differs from `latency` in the open loop only).
    pub service: Latencies,
    /// When the last measured request was answered, after the measured window's start.
    pub last_answer: Duration,
}

impl Tally {
    /// Adds another sender's tally: counts and latencies summed, the later last answer kept.
    pub fn merge(&mut self, other: &Tally) {
        self.acked_total += other.acked_total;
        self.sent_total += other.sent_total;
        self.ok += other.ok;
        self.not_2xx += other.not_2xx;
        self.errors += other.errors;
        self.latency.merge(&other.latency);
        self.service.merge(&other.service);
        self.last_answer = self.last_answer.max(other.last_answer);
    }

    /// 2xx answers per second over the measured window (from its start to the last answer).
    pub fn ok_per_sec(&self, window: Duration) -> f64 {
        let secs = self.last_answer.max(window).as_secs_f64();
        if secs == 0.0 {
            0.0
        } else {
            self.ok as f64 / secs
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut l = Latencies::default();
        assert_eq!(l.quantile(0.99), Duration::ZERO);
        for us in 1..=1000u64 {
            l.record_micros(us * 10);
        }
        assert_eq!(l.count(), 1000);
        let p50 = l.quantile(0.5).as_micros() as f64;
        let p99 = l.quantile(0.99).as_micros() as f64;
        assert!((p50 - 5_000.0).abs() / 5_000.0 < 0.002, "p50 {p50}");
        assert!((p99 - 9_900.0).abs() / 9_900.0 < 0.002, "p99 {p99}");
        let max = l.max().as_micros() as f64;
        assert!((max - 10_000.0).abs() / 10_000.0 < 0.002, "max {max}");
    }

    #[test]
    fn out_of_range_values_are_clamped_not_lost() {
        let mut l = Latencies::default();
        l.record(Duration::ZERO);
        l.record(Duration::from_secs(3_600));
        assert_eq!(l.count(), 2);
        assert!(l.max() >= Duration::from_secs(59));
    }

    #[test]
    fn tallies_merge() {
        let mut a = Tally {
            acked_total: 10,
            sent_total: 11,
            ok: 8,
            not_2xx: 1,
            last_answer: Duration::from_secs(2),
            ..Tally::default()
        };
        a.latency.record_micros(100);
        let mut b = Tally {
            acked_total: 5,
            sent_total: 5,
            ok: 4,
            errors: 1,
            last_answer: Duration::from_secs(3),
            ..Tally::default()
        };
        b.latency.record_micros(300);
        a.merge(&b);
        assert_eq!((a.acked_total, a.sent_total, a.ok), (15, 16, 12));
        assert_eq!((a.not_2xx, a.errors), (1, 1));
        assert_eq!(a.latency.count(), 2);
        assert_eq!(a.last_answer, Duration::from_secs(3));
        assert_eq!(a.ok_per_sec(Duration::from_secs(1)), 4.0);
    }
}
