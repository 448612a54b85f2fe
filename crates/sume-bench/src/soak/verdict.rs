//! The soak's check: after the settling time, no series may grow.
//!
//! Each series is read at two places: the **reference**, the largest of the samples in the
//! `span` (e.g. the minute) ending at the settling time (3 minutes by default), and the
//! **end**, the largest of the samples in the last `span` of the run. Taking the largest of a
//! span reads a sawtooth (rows deleted by retention once a minute, dead tuples cleared by
//! autovacuum) at its top instead of wherever a sample happens to fall. A series is **flat**
//! when the end is at most the reference plus `tolerance` (20% by default) of it, or plus the
//! series' floor, whichever is more: the floor keeps a series near zero (a p99 of 3 ms, a few
//! dead tuples) from failing on a change that means nothing. Shrinking is flat: a leak grows.

use std::fmt::Write as _;
use std::time::Duration;

use super::sample::{Reading, Sample};

/// One series of the soak: a name, a unit, and how to read it from a sample.
pub struct Series {
    /// As the verdicts and the chart name it.
    pub name: String,
    /// Its unit, for the verdict line.
    pub unit: &'static str,
    /// A growth up to this much is flat whatever the tolerance says.
    pub floor: f64,
    /// The value of a sample (`None`: not measured there, e.g. an empty table's bytes per row).
    pub read: Reading,
}

/// Every series the soak checks: memory, latency, and for each growing table its live rows,
/// bytes per live row and dead tuples, and the whole schema's size.
pub fn all() -> Vec<Series> {
    let mut v = vec![
        Series {
            name: "daemon RSS".into(),
            unit: "MiB",
            floor: 4.0,
            read: Box::new(|s| Some(s.rss_kib as f64 / 1024.0)),
        },
        Series {
            name: "p99 of the window".into(),
            unit: "ms",
            floor: 2.0,
            read: Box::new(|s| (s.deliveries > 0).then_some(s.p99.as_secs_f64() * 1e3)),
        },
        Series {
            name: "schema size".into(),
            unit: "MiB",
            floor: 8.0,
            read: Box::new(|s| Some(s.schema_bytes() as f64 / 1048576.0)),
        },
    ];
    for table in ["events", "jobs", "job_closes"] {
        v.push(Series {
            name: format!("sume.{table} live rows"),
            unit: "rows",
            floor: 20_000.0,
            read: Box::new(move |s| s.table(table).map(|t| t.live as f64)),
        });
        v.push(Series {
            name: format!("sume.{table} bytes per live row"),
            unit: "B",
            floor: 64.0,
            read: Box::new(move |s| s.table(table).and_then(|t| t.bytes_per_row())),
        });
        v.push(Series {
            name: format!("sume.{table} dead tuples"),
            unit: "rows",
            floor: 20_000.0,
            read: Box::new(move |s| s.table(table).map(|t| t.dead as f64)),
        });
    }
    v
}

/// A series' verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The series.
    pub name: String,
    /// Its unit.
    pub unit: &'static str,
    /// The largest value of the reference span.
    pub reference: f64,
    /// The largest value of the last span.
    pub end: f64,
    /// The most `end` may be and still be flat.
    pub limit: f64,
    /// `end <= limit`.
    pub flat: bool,
}

impl Verdict {
    /// `flat  daemon RSS: 41.2 MiB at 3 min, 42.0 at the end (+1.9%); limit 49.4`.
    pub fn line(&self) -> String {
        let growth = if self.reference > 0.0 {
            format!("{:+.1}%", (self.end / self.reference - 1.0) * 100.0)
        } else {
            "from 0".to_owned()
        };
        let mut s = String::new();
        let _ = write!(
            s,
            "{} {}: {} {u} by the settling time, {} {u} at the end ({growth}); flat up to {} {u}",
            if self.flat { "flat" } else { "GROWING" },
            self.name,
            num(self.reference),
            num(self.end),
            num(self.limit),
            u = self.unit,
        );
        s
    }
}

fn num(x: f64) -> String {
    if x.abs() >= 100.0 {
        crate::report::thousands(x)
    } else {
        format!("{x:.2}")
    }
}

/// The largest value of `series` over the samples taken in `(to - span, to]`.
fn largest(samples: &[Sample], series: &Series, to: Duration, span: Duration) -> Option<f64> {
    samples
        .iter()
        .filter(|s| s.at <= to && s.at + span > to)
        .filter_map(|s| (series.read)(s))
        .reduce(f64::max)
}

/// Judges each series; `None` for one with no value in either span.
pub fn judge(
    samples: &[Sample],
    series: &Series,
    settle: Duration,
    span: Duration,
    tolerance: f64,
) -> Option<Verdict> {
    let end_at = samples.last()?.at;
    let reference = largest(samples, series, settle, span)?;
    let end = largest(samples, series, end_at, span)?;
    let limit = reference + (reference * tolerance).max(series.floor);
    Some(Verdict {
        name: series.name.clone(),
        unit: series.unit,
        reference,
        end,
        limit,
        flat: end <= limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::sample::TableSample;

    fn sample(min: f64, rss_mib: u64, events: u64) -> Sample {
        Sample {
            at: Duration::from_secs_f64(min * 60.0),
            rss_kib: rss_mib * 1024,
            p99: Duration::from_millis(3),
            deliveries: 100,
            tables: vec![TableSample {
                name: "events".into(),
                live: events,
                dead: 0,
                bytes: events * 1000,
            }],
        }
    }

    fn rss() -> Series {
        all().remove(0)
    }

    #[test]
    fn a_steady_series_is_flat_and_a_leak_is_not() {
        let settle = Duration::from_secs(180);
        let span = Duration::from_secs(60);
        let steady: Vec<Sample> = (1..=20)
            .map(|i| sample(i as f64 / 2.0, 40, 200_000))
            .collect();
        let v = judge(&steady, &rss(), settle, span, 0.2).unwrap();
        assert!(v.flat, "{}", v.line());
        assert_eq!((v.reference, v.end), (40.0, 40.0));
        // 40 MiB at 3 min, then 2 MiB more each 30 s: 54 MiB at the end, over 40 + 20%.
        let leaking: Vec<Sample> = (1..=20)
            .map(|i| {
                sample(
                    i as f64 / 2.0,
                    40 + 2 * (i as u64).saturating_sub(6),
                    200_000,
                )
            })
            .collect();
        let v = judge(&leaking, &rss(), settle, span, 0.2).unwrap();
        assert!(!v.flat, "{}", v.line());
        assert!(v.line().starts_with("GROWING daemon RSS"), "{}", v.line());
    }

    #[test]
    fn a_sawtooth_is_read_at_its_top_and_small_values_have_a_floor() {
        let settle = Duration::from_secs(180);
        let span = Duration::from_secs(60);
        // Rows deleted once a minute: 120k and 240k in turn.
        let saw: Vec<Sample> = (1..=20)
            .map(|i| {
                sample(
                    i as f64 / 2.0,
                    40,
                    if i % 2 == 0 { 240_000 } else { 120_000 },
                )
            })
            .collect();
        let rows = all()
            .into_iter()
            .find(|s| s.name == "sume.events live rows")
            .unwrap();
        let v = judge(&saw, &rows, settle, span, 0.2).unwrap();
        assert!(v.flat && v.reference == 240_000.0, "{}", v.line());
        // 3 MiB of RSS growing to 6: +100%, but within the 4 MiB floor.
        let small: Vec<Sample> = (1..=20)
            .map(|i| sample(i as f64 / 2.0, if i > 10 { 6 } else { 3 }, 1))
            .collect();
        assert!(judge(&small, &rss(), settle, span, 0.2).unwrap().flat);
    }
}
