//! The issue's targets, judged on what a run measured: durable throughput against the
//! per-request baseline, p99 at full speed and at a fixed rate, nothing lost, the sweep ratio
//! and the daemon's peak memory. Only the main daemon is judged, never a variant.

use std::time::Duration;

use super::numbers::{mib, ms, thousands};
use super::{Report, Server};
use crate::load::Mode;

/// One of the issue's targets, measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The target as the issue states it, with the step it is judged on.
    pub target: String,
    /// What this run measured, as printed beside the target.
    pub measured: String,
    /// Whether the measurement meets the target; a miss is printed as MISSED.
    pub met: bool,
}

impl Report {
    /// The issue's targets, each with what this run measured.
    pub fn verdicts(&self) -> Vec<Verdict> {
        let mut out = Vec::new();
        let top = self
            .rows
            .iter()
            .filter(|r| r.server == Server::Daemon && r.mode == Mode::Closed)
            .map(|r| r.connections)
            .max();
        if let Some(n) = top {
            let d = self.daemon_closed(n).expect("row exists");
            if let Some(b) = self.baseline_for(n) {
                let x = if b.per_sec() > 0.0 {
                    d.per_sec() / b.per_sec()
                } else {
                    f64::INFINITY
                };
                out.push(Verdict {
                    target: format!(
                        "{n} connections: durable 2xx/s >= 3x the per-request baseline"
                    ),
                    measured: format!(
                        "{:.2}x ({} vs {}/s)",
                        x,
                        thousands(d.per_sec()),
                        thousands(b.per_sec())
                    ),
                    met: x >= 3.0,
                });
            }
            let p99 = d.tally.latency.quantile(0.99);
            out.push(Verdict {
                target: format!("{n} connections: p99 <= 50 ms"),
                measured: format!("{} ms", ms(p99)),
                met: p99 <= Duration::from_millis(50),
            });
            let failed = d.tally.not_2xx + d.tally.errors;
            out.push(Verdict {
                target: format!("{n} connections: nothing lost, every request answered 2xx"),
                measured: format!("stored = acked; {failed} not 2xx"),
                met: failed == 0,
            });
        }
        if let Some(r) = self.daemon_rate() {
            let p99 = r.tally.latency.quantile(0.99);
            out.push(Verdict {
                target: format!("fixed {}: p99 <= 10 ms", r.load_label()),
                measured: format!("{} ms", ms(p99)),
                met: p99 <= Duration::from_millis(10),
            });
        }
        if let Some(sw) = &self.sweep {
            out.push(Verdict {
                target: format!(
                    "sweep pass over {} due jobs, beside {} closed jobs vs none: ratio <= 1.5",
                    thousands(sw.due as f64),
                    thousands(sw.closed_beside as f64)
                ),
                measured: format!("{:.2}", sw.ratio()),
                met: sw.ratio() <= 1.5,
            });
        }
        if let Some(kib) = self.daemon_peak_kib() {
            out.push(Verdict {
                target: "daemon RSS <= 100 MiB".to_owned(),
                measured: format!("{} MiB peak (VmHWM)", mib(kib)),
                met: kib <= 100 * 1024,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::report;

    #[test]
    fn the_sweep_ratio_is_a_target() {
        let v = report().verdicts();
        let sweep = v
            .iter()
            .find(|v| v.target.starts_with("sweep pass"))
            .unwrap();
        assert_eq!(sweep.measured, "1.60");
        assert!(!sweep.met, "1.6 is over 1.5");
    }

    #[test]
    fn verdicts_follow_the_issue() {
        let v = report().verdicts();
        let find = |s: &str| v.iter().find(|v| v.target.contains(s)).unwrap().clone();
        assert!(find("3x the per-request baseline").met);
        assert!(find("p99 <= 50 ms").met);
        assert!(find("nothing lost").met);
        let fixed = find("p99 <= 10 ms");
        assert!(!fixed.met, "12 ms misses a 10 ms target");
        assert_eq!(fixed.measured, "12.0 ms");
        assert!(find("RSS").met);
    }
}
