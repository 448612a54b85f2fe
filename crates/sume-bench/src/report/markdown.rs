//! The report as text: the results table (also printed alone for the steps measured before a
//! failure) and the whole section appended to docs/benchmarks.md: heading, command, machine and
//! settings, the table, a note per stage, and the targets met or missed.

use std::fmt::Write as _;

use super::numbers::{mib, ms, ratio, thousands};
use super::{Report, Row, Server};
use crate::ceiling::Ceiling;
use crate::load::Mode;

impl Report {
    /// The table alone.
    pub fn table(&self) -> String {
        let ceiling = self.ceiling.map(|c| c.rows_per_sec()).unwrap_or(0.0);
        let mut t = String::new();
        t.push_str("| server | load | conns | events/s | p50 ms | p99 ms | p99.9 ms | max ms | not 2xx | RSS peak MiB | CPU us/event: server + PG + load | events/commit | vs per-request | vs PG ceiling |\n");
        t.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
        for r in &self.rows {
            self.write_row(&mut t, r, ceiling);
        }
        if let Some(c) = self.ceiling {
            write_ceiling_row(&mut t, c);
        }
        t
    }

    /// One measured step as a table line; `ceiling` is the ceiling's rows/s (0 without one).
    fn write_row(&self, t: &mut String, r: &Row, ceiling: f64) {
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

    /// The whole section appended to docs/benchmarks.md.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        self.write_preamble(&mut s);
        s.push('\n');
        s.push_str(&self.table());
        self.write_stage_notes(&mut s);
        self.write_targets(&mut s);
        s
    }

    /// The heading (the date), the command, the machine, the settings, variants and note.
    fn write_preamble(&self, s: &mut String) {
        let c = &self.context;
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
    }

    /// A paragraph each for the fixed-rate service time, attach and sweep, when measured.
    fn write_stage_notes(&self, s: &mut String) {
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
        for a in &self.attach {
            let _ = writeln!(
                s,
                "\nAttach: {} jobs registered through the SQL path {} on {} connections \
                 (in {:.2} s), their events already waiting: all closed {:.2} s after the first \
                 registration ({:.0} jobs/s); registration to closed p50 {:.1} / p99 {:.1} / max \
                 {:.1} ms.",
                thousands(a.jobs as f64),
                match a.rate {
                    None => "at full speed".to_owned(),
                    Some(r) => format!("at a steady {}/s", thousands(r)),
                },
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
    }

    /// Every target, met or MISSED, with what was measured.
    fn write_targets(&self, s: &mut String) {
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
    }
}

/// The PostgreSQL ceiling's line, the last of the table.
fn write_ceiling_row(t: &mut String, c: Ceiling) {
    let _ = writeln!(
        t,
        "| PostgreSQL ceiling | {}-row txns | {} | {} rows/s | - | - | - | - | - | - | - | {} | - | 1.00x |",
        c.batch,
        c.connections,
        thousands(c.rows_per_sec()),
        c.batch,
    );
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::report;

    #[test]
    fn the_table_has_every_row_and_both_ratios() {
        let t = report().table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2 + 4 + 1, "{t}");
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
        assert!(lines[5].starts_with("| per-request baseline | 1,000/s | 64 |"));
        assert!(lines[6].contains("| 20,000 rows/s |"), "{}", lines[6]);
    }

    #[test]
    fn the_section_names_command_machine_and_misses() {
        let md = report().markdown();
        assert!(md.starts_with("### 2025-01-01 12:00 UTC\n\n`make bench`\n"));
        assert!(md.contains("2 CPUs (Test CPU)"));
        assert!(md.contains("INGEST_WRITERS=2"));
        assert!(md.contains("- MISSED fixed 1,000/s: p99 <= 5 ms: 12.0 ms"));
        assert!(md.contains("- met daemon RSS <= 50 MiB: 40.0 MiB peak (VmHWM)"));
        assert!(md.contains("registered through the SQL path at a steady 500/s on 8 connections"));
        assert!(md.contains(
            "- MISSED attach at full speed: registration to closed p99 <= 20 ms: 25.0 ms"
        ));
    }
}
