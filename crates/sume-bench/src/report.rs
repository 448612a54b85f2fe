//! The result of a run as one markdown table (printed, and appended to docs/benchmarks.md),
//! with the command, the date, the machine, the settings and the issue's targets.

use std::fmt::Write as _;
use std::time::Duration;

use crate::ceiling::Ceiling;
use crate::load::Mode;
use crate::stack::Memory;
use crate::stats::Tally;

/// Which server a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// The daemon as `make bench` builds and configures it: the targets are judged on it.
    Daemon,
    /// Another build or other settings of the daemon, measured beside it for comparison.
    Variant,
    Baseline,
}

impl Server {
    pub fn label(self) -> &'static str {
        match self {
            Server::Daemon | Server::Variant => "sume-inbox",
            Server::Baseline => "per-request baseline",
        }
    }
}

/// One measured step.
#[derive(Debug, Clone)]
pub struct Row {
    pub server: Server,
    /// What the table calls the server (a variant's label is shown beside the name).
    pub label: String,
    pub mode: Mode,
    pub connections: usize,
    pub window: Duration,
    pub tally: Tally,
    pub memory: Option<Memory>,
    /// CPU time per stored event, warm-up included.
    pub cpu: Option<CpuCost>,
    /// Deliveries per commit, warm-up included (the daemon's own count; 1 for the baseline).
    pub per_commit: Option<f64>,
}

/// `(sum, count)` of the daemon's `ingest_batch_size` histogram in a Prometheus text page
/// (whatever prefix the metric carries).
pub fn batch_totals(metrics: &str) -> Option<(f64, f64)> {
    let value = |suffix: &str| {
        metrics.lines().find_map(|l| {
            let (name, v) = l.split_once(' ')?;
            name.ends_with(suffix)
                .then(|| v.trim().parse::<f64>().ok())?
        })
    };
    Some((
        value("ingest_batch_size_sum")?,
        value("ingest_batch_size_count")?,
    ))
}

/// CPU time per stored event: the server's, and PostgreSQL's (every process of the cluster).
/// Other processes on a shared machine change how fast a step runs far more than what each
/// event costs, so these compare well across steps and runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuCost {
    pub server_us: f64,
    pub postgres_us: f64,
    /// The load generator's own share (it runs on the same cores).
    pub load_us: f64,
}

impl CpuCost {
    pub fn per_event(
        server: Duration,
        postgres: Duration,
        load: Duration,
        events: u64,
    ) -> Option<CpuCost> {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / events as f64;
        (events > 0).then(|| CpuCost {
            server_us: per(server),
            postgres_us: per(postgres),
            load_us: per(load),
        })
    }
}

impl Row {
    pub fn per_sec(&self) -> f64 {
        self.tally.ok_per_sec(self.window)
    }

    fn load_label(&self) -> String {
        match self.mode {
            Mode::Closed => "max".to_owned(),
            Mode::Rate(r) => format!("{}/s", thousands(r)),
        }
    }
}

/// Where and how the run happened.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub command: String,
    pub date: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub memory: String,
    pub kernel: String,
    pub postgres: String,
    pub revision: String,
    pub settings: Vec<(String, String)>,
    /// `label: what differs` of each variant measured beside the daemon.
    pub variants: Vec<String>,
    pub warmup: Duration,
    pub duration: Duration,
    /// Rounds of every step; each row is its median round.
    pub rounds: u32,
    pub note: Option<String>,
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub context: Context,
    pub rows: Vec<Row>,
    pub ceiling: Option<Ceiling>,
    pub attach: Option<crate::stages::AttachResult>,
    pub sweep: Option<crate::stages::SweepResult>,
}

/// One of the issue's targets, measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub target: String,
    pub measured: String,
    pub met: bool,
}

/// Keeps, for each server and load, the round with the median events/s (the lower middle
/// one for an even count), in the order the steps first ran.
pub fn median_rows(rows: Vec<Row>) -> Vec<Row> {
    let key = |r: &Row| (r.label.clone(), format!("{:?}", r.mode), r.connections);
    let mut keys = Vec::new();
    for r in &rows {
        if !keys.contains(&key(r)) {
            keys.push(key(r));
        }
    }
    keys.into_iter()
        .map(|k| {
            let mut same: Vec<&Row> = rows.iter().filter(|r| key(r) == k).collect();
            same.sort_by(|a, b| a.per_sec().total_cmp(&b.per_sec()));
            same[(same.len() - 1) / 2].clone()
        })
        .collect()
}

/// 12345.6 -> "12,346".
pub fn thousands(x: f64) -> String {
    let n = x.round() as u64;
    let digits = n.to_string();
    let first = match digits.len() % 3 {
        0 => 3,
        r => r,
    };
    let mut out = digits[..first].to_owned();
    for group in digits.as_bytes()[first..].chunks(3) {
        out.push(',');
        out.push_str(std::str::from_utf8(group).expect("ASCII digits"));
    }
    out
}

/// Milliseconds, with precision where it matters: 0.84, 12.3, 151.
pub fn ms(d: Duration) -> String {
    let x = d.as_secs_f64() * 1000.0;
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".to_owned()
    }
}

impl Report {
    fn baseline_for(&self, connections: usize) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.server == Server::Baseline && r.mode == Mode::Closed && r.connections == connections
        })
    }

    fn daemon_closed(&self, connections: usize) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.server == Server::Daemon && r.mode == Mode::Closed && r.connections == connections
        })
    }

    fn daemon_rate(&self) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.server == Server::Daemon && matches!(r.mode, Mode::Rate(_)))
    }

    fn daemon_peak_kib(&self) -> Option<u64> {
        self.rows
            .iter()
            .filter(|r| r.server == Server::Daemon)
            .filter_map(|r| r.memory.map(|m| m.peak_kib))
            .max()
    }

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

    /// The table alone.
    pub fn table(&self) -> String {
        let ceiling = self.ceiling.map(|c| c.rows_per_sec()).unwrap_or(0.0);
        let mut t = String::new();
        t.push_str("| server | load | conns | events/s | p50 ms | p99 ms | p99.9 ms | max ms | not 2xx | RSS peak MiB | CPU us/event: server + PG + load | events/commit | vs per-request | vs PG ceiling |\n");
        t.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
        for r in &self.rows {
            let l = &r.tally.latency;
            let vs_baseline = match (r.server, r.mode, self.baseline_for(r.connections)) {
                (Server::Daemon | Server::Variant, Mode::Closed, Some(b)) => {
                    ratio(r.per_sec(), b.per_sec())
                }
                (Server::Baseline, Mode::Closed, _) => "1.00x".to_owned(),
                _ => "-".to_owned(),
            };
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.label,
                r.load_label(),
                r.connections,
                thousands(r.per_sec()),
                ms(l.quantile(0.5)),
                ms(l.quantile(0.99)),
                ms(l.quantile(0.999)),
                ms(l.max()),
                r.tally.not_2xx + r.tally.errors,
                r.memory
                    .map(|m| mib(m.peak_kib))
                    .unwrap_or_else(|| "-".into()),
                r.cpu
                    .map(|c| {
                        format!(
                            "{:.0} + {:.0} + {:.0}",
                            c.server_us, c.postgres_us, c.load_us
                        )
                    })
                    .unwrap_or_else(|| "-".into()),
                r.per_commit
                    .map(|b| format!("{b:.1}"))
                    .unwrap_or_else(|| "-".into()),
                vs_baseline,
                match r.mode {
                    Mode::Closed => ratio(r.per_sec(), ceiling),
                    Mode::Rate(_) => "-".to_owned(),
                },
            );
        }
        if let Some(c) = self.ceiling {
            let _ = writeln!(
                t,
                "| PostgreSQL ceiling | {}-row txns | {} | {} rows/s | - | - | - | - | - | - | - | {} | - | 1.00x |",
                c.batch,
                c.connections,
                thousands(c.rows_per_sec()),
                c.batch,
            );
        }
        t
    }

    /// The whole section appended to docs/benchmarks.md.
    pub fn markdown(&self) -> String {
        let c = &self.context;
        let mut s = String::new();
        let _ = writeln!(s, "### {}\n", c.date);
        let _ = writeln!(s, "`{}`\n", c.command);
        let _ = writeln!(
            s,
            "Machine: {} CPUs ({}), {}, {}; {}; revision {}.",
            c.cpus, c.cpu_model, c.memory, c.kernel, c.postgres, c.revision
        );
        let settings: Vec<String> = c.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            s,
            "Daemon settings: {}. Each step: {} s warm-up, {} s measured{}.",
            settings.join(", "),
            c.warmup.as_secs_f64(),
            c.duration.as_secs_f64(),
            if c.rounds > 1 {
                format!(
                    "; each row is the median of {} rounds by events/s",
                    c.rounds
                )
            } else {
                String::new()
            }
        );
        for v in &c.variants {
            let _ = writeln!(s, "Variant {v}.");
        }
        if let Some(note) = &c.note {
            let _ = writeln!(s, "Note: {note}");
        }
        s.push('\n');
        s.push_str(&self.table());
        if let Some(r) = self.daemon_rate() {
            let svc = &r.tally.service;
            let _ = writeln!(
                s,
                "\nFixed rate: latency from the intended send time; service time alone (from the \
                 actual send): p50 {} / p99 {} / p99.9 {} ms.",
                ms(svc.quantile(0.5)),
                ms(svc.quantile(0.99)),
                ms(svc.quantile(0.999)),
            );
        }
        if let Some(a) = &self.attach {
            let _ = writeln!(
                s,
                "\nAttach: {} jobs registered through the SQL path at full speed on {} connections \
                 (in {:.2} s), their events already waiting: all closed {:.2} s after the first \
                 registration ({:.0} jobs/s); registration to closed p50 {:.1} / p99 {:.1} / max \
                 {:.1} ms.",
                thousands(a.jobs as f64),
                a.connections,
                a.registered_in.as_secs_f64(),
                a.total.as_secs_f64(),
                a.jobs as f64 / a.total.as_secs_f64(),
                a.p50_ms,
                a.p99_ms,
                a.max_ms
            );
        }
        if let Some(sw) = &self.sweep {
            let _ = writeln!(
                s,
                "\nSweep: one pass over {} open jobs due (each polled at the simulator and closed): \
                 {:.2} s alone, {:.2} s beside {} closed jobs and their events; ratio {:.2}.",
                thousands(sw.due as f64),
                sw.pass_empty.as_secs_f64(),
                sw.pass_beside_closed.as_secs_f64(),
                thousands(sw.closed_beside as f64),
                sw.ratio()
            );
        }
        s.push_str("\nTargets:\n\n");
        for v in self.verdicts() {
            let _ = writeln!(
                s,
                "- {} {}: {}",
                if v.met { "met" } else { "MISSED" },
                v.target,
                v.measured
            );
        }
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: Server, mode: Mode, connections: usize, ok: u64, p99_us: u64) -> Row {
        let mut tally = Tally {
            ok,
            acked_total: ok,
            sent_total: ok,
            ..Tally::default()
        };
        for _ in 0..99 {
            tally.latency.record_micros(p99_us / 2);
        }
        tally.latency.record_micros(p99_us);
        tally.latency.record_micros(p99_us);
        Row {
            server,
            label: server.label().to_owned(),
            mode,
            connections,
            window: Duration::from_secs(10),
            tally,
            memory: Some(Memory {
                peak_kib: 40 * 1024,
                now_kib: 30 * 1024,
            }),
            cpu: CpuCost::per_event(
                Duration::from_millis(ok),
                Duration::from_millis(2 * ok),
                Duration::from_micros(500 * ok),
                ok,
            ),
            per_commit: Some(12.5),
        }
    }

    fn report() -> Report {
        Report {
            context: Context {
                command: "make bench".into(),
                date: "2025-01-01 12:00 UTC".into(),
                cpus: 2,
                cpu_model: "Test CPU".into(),
                settings: vec![("INGEST_WRITERS".into(), "2".into())],
                warmup: Duration::from_secs(3),
                duration: Duration::from_secs(10),
                ..Context::default()
            },
            rows: vec![
                row(Server::Daemon, Mode::Closed, 256, 60_000, 40_000),
                row(Server::Baseline, Mode::Closed, 256, 15_000, 90_000),
                row(Server::Daemon, Mode::Rate(1000.0), 64, 10_000, 12_000),
            ],
            ceiling: Some(Ceiling {
                rows: 200_000,
                elapsed: Duration::from_secs(10),
                batch: 1000,
                connections: 2,
            }),
            attach: None,
            sweep: Some(crate::stages::SweepResult {
                due: 10_000,
                closed_beside: 1_000_000,
                pass_empty: Duration::from_millis(2000),
                pass_beside_closed: Duration::from_millis(3200),
                closed_by_pass: 10_000,
            }),
        }
    }

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
    fn median_rounds() {
        let rows = vec![
            row(Server::Daemon, Mode::Closed, 16, 300, 1_000),
            row(Server::Baseline, Mode::Closed, 16, 50, 1_000),
            row(Server::Daemon, Mode::Closed, 16, 100, 1_000),
            row(Server::Baseline, Mode::Closed, 16, 70, 1_000),
            row(Server::Daemon, Mode::Closed, 16, 200, 1_000),
            row(Server::Baseline, Mode::Closed, 16, 60, 1_000),
        ];
        let m = median_rows(rows);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].server, m[0].tally.ok), (Server::Daemon, 200));
        assert_eq!((m[1].server, m[1].tally.ok), (Server::Baseline, 60));
    }

    #[test]
    fn reads_batch_sizes_from_metrics() {
        let page =
            "# HELP sume_inbox_ingest_batch_size Deliveries written per ingest transaction\n\
                    # TYPE sume_inbox_ingest_batch_size histogram\n\
                    sume_inbox_ingest_batch_size_sum 5120.0\n\
                    sume_inbox_ingest_batch_size_count 40\n\
                    sume_inbox_ingest_batch_size_bucket{le=\"1.0\"} 3\n";
        assert_eq!(batch_totals(page), Some((5120.0, 40.0)));
        assert_eq!(batch_totals("webhooks_total 3\n"), None);
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(ms(Duration::from_micros(840)), "0.84");
        assert_eq!(ms(Duration::from_micros(12_340)), "12.3");
        assert_eq!(ms(Duration::from_micros(151_000)), "151");
    }

    #[test]
    fn the_table_has_every_row_and_both_ratios() {
        let t = report().table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2 + 3 + 1, "{t}");
        let cols = lines[0].matches('|').count();
        assert!(lines.iter().all(|l| l.matches('|').count() == cols), "{t}");
        // 6,000/s vs 1,500/s and vs a 20,000 rows/s ceiling.
        assert!(lines[2].contains("| 6,000 |"), "{}", lines[2]);
        assert!(
            lines[2].contains("| 1000 + 2000 + 500 | 12.5 | 4.00x | 0.30x |"),
            "{}",
            lines[2]
        );
        assert!(lines[3].starts_with("| per-request baseline | max | 256 | 1,500 |"));
        assert!(lines[4].contains("| 1,000/s | 64 |"), "{}", lines[4]);
        assert!(lines[5].contains("| 20,000 rows/s |"), "{}", lines[5]);
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

    #[test]
    fn the_section_names_command_machine_and_misses() {
        let md = report().markdown();
        assert!(md.starts_with("### 2025-01-01 12:00 UTC\n\n`make bench`\n"));
        assert!(md.contains("2 CPUs (Test CPU)"));
        assert!(md.contains("INGEST_WRITERS=2"));
        assert!(md.contains("- MISSED fixed 1,000/s: p99 <= 10 ms: 12.0 ms"));
        assert!(md.contains("- met daemon RSS <= 100 MiB: 40.0 MiB peak (VmHWM)"));
    }
}
