//! The targets, judged on what a run measured: durable throughput and CPU per event against the
//! per-request baseline, p99 at full speed and at a fixed rate, nothing lost, attach's latency
//! at full speed and at a steady rate, the sweep ratio and the daemon's peak memory. Only the
//! main daemon is judged, never a variant.

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
        self.full_speed_verdicts(&mut out);
        self.fixed_rate_verdicts(&mut out);
        self.attach_sweep_memory_verdicts(&mut out);
        out
    }

    /// At the most connections: throughput against the baseline, p99, nothing lost, CPU.
    fn full_speed_verdicts(&self, out: &mut Vec<Verdict>) {
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
                        "{n} connections: durable 2xx/s >= 4x the per-request baseline"
                    ),
                    measured: format!(
                        "{:.2}x ({} vs {}/s)",
                        x,
                        thousands(d.per_sec()),
                        thousands(b.per_sec())
                    ),
                    met: x >= 4.0,
                });
            }
            let p99 = d.tally.latency.quantile(0.99);
            out.push(Verdict {
                target: format!("{n} connections: p99 <= 25 ms"),
                measured: format!("{} ms", ms(p99)),
                met: p99 <= Duration::from_millis(25),
            });
            let failed = d.tally.not_2xx + d.tally.errors;
            out.push(Verdict {
                target: format!("{n} connections: nothing lost, every request answered 2xx"),
                measured: format!("stored = acked; {failed} not 2xx"),
                met: failed == 0,
            });
            if let Some(cpu) = d.cpu {
                out.push(Verdict {
                    target: format!("{n} connections: daemon CPU <= 20 us per event"),
                    measured: format!("{:.0} us", cpu.server_us),
                    met: cpu.server_us <= 20.0,
                });
                out.push(Verdict {
                    target: format!("{n} connections: PostgreSQL CPU <= 25 us per event"),
                    measured: format!("{:.0} us", cpu.postgres_us),
                    met: cpu.postgres_us <= 25.0,
                });
            }
        }
    }

    /// At a fixed rate: p99, and CPU per event against the baseline's.
    fn fixed_rate_verdicts(&self, out: &mut Vec<Verdict>) {
        if let Some(r) = self.daemon_rate() {
            let p99 = r.tally.latency.quantile(0.99);
            out.push(Verdict {
                target: format!("fixed {}: p99 <= 5 ms", r.load_label()),
                measured: format!("{} ms", ms(p99)),
                met: p99 <= Duration::from_millis(5),
            });
            if let (Some(d), Some(b)) = (r.cpu, self.baseline_rate().and_then(|b| b.cpu)) {
                let (ours, theirs) = (d.server_us + d.postgres_us, b.server_us + b.postgres_us);
                out.push(Verdict {
                    target: format!(
                        "fixed {}: CPU per event, server + PostgreSQL, <= the per-request baseline's",
                        r.load_label()
                    ),
                    measured: format!(
                        "{:.0} + {:.0} = {:.0} us vs {:.0} + {:.0} = {:.0} us",
                        d.server_us, d.postgres_us, ours, b.server_us, b.postgres_us, theirs
                    ),
                    met: ours <= theirs,
                });
            }
        }
    }

    /// Attach's latency, the sweep's ratio and the daemon's peak memory.
    fn attach_sweep_memory_verdicts(&self, out: &mut Vec<Verdict>) {
        for a in &self.attach {
            let (target, limit) = match a.rate {
                None => ("attach at full speed".to_owned(), 20.0),
                Some(rate) => (format!("attach at a steady {}/s", thousands(rate)), 10.0),
            };
            out.push(Verdict {
                target: format!("{target}: registration to closed p99 <= {limit:.0} ms"),
                measured: format!("{:.1} ms", a.p99_ms),
                met: a.p99_ms <= limit,
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
                target: "daemon RSS <= 50 MiB".to_owned(),
                measured: format!("{} MiB peak (VmHWM)", mib(kib)),
                met: kib <= 50 * 1024,
            });
        }
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
        assert!(find("4x the per-request baseline").met);
        assert!(!find("p99 <= 25 ms").met, "40 ms misses a 25 ms target");
        assert!(find("nothing lost").met);
        let cpu = find("daemon CPU <= 20 us");
        assert!(!cpu.met && cpu.measured == "1000 us", "{cpu:?}");
        assert!(!find("PostgreSQL CPU <= 25 us").met);
        let fixed = find("p99 <= 5 ms");
        assert!(!fixed.met, "12 ms misses a 5 ms target");
        assert_eq!(fixed.measured, "12.0 ms");
        let cpu = find("CPU per event, server + PostgreSQL");
        assert!(cpu.met, "{}", cpu.measured);
        let full = find("attach at full speed");
        assert!(!full.met && full.measured == "25.0 ms", "{full:?}");
        assert!(find("attach at a steady 500/s").met);
        assert!(find("RSS").met);
    }
}
