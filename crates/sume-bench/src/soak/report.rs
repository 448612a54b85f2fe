//! The soak's section of docs/benchmarks.md: how it ran, one table row per sample, what the
//! daemon did (its counters), and the verdict of every series.

use std::fmt::Write as _;

use super::sample::Sample;
use super::verdict::Verdict;
use crate::report::{ms, thousands};

/// Everything the section says.
pub struct SoakReport {
    /// `### DATE: the soak` and the command.
    pub date: String,
    /// The command as the reader would type it.
    pub command: String,
    /// CPUs, memory, kernel, PostgreSQL, revision.
    pub machine: String,
    /// How the run was set up, one sentence each.
    pub setup: Vec<String>,
    /// Totals of the load and the application.
    pub totals: String,
    /// Deliveries not answered 2xx (or not at all).
    pub failed: u64,
    /// The daemon's counters at the end (`/metrics` lines).
    pub counters: Vec<String>,
    /// Every sample.
    pub samples: Vec<Sample>,
    /// Every series' verdict (or why it has none).
    pub verdicts: Vec<Result<Verdict, String>>,
    /// Where the chart went, relative to the section's file.
    pub chart: Option<String>,
}

fn cell(t: Option<&super::sample::TableSample>) -> String {
    match t {
        None => "-".to_owned(),
        Some(t) => format!(
            "{} / {} / {}",
            thousands(t.live as f64),
            t.bytes_per_row()
                .map_or("-".to_owned(), |b| format!("{b:.0}")),
            thousands(t.dead as f64)
        ),
    }
}

impl SoakReport {
    /// The per-sample table.
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| time | RSS MiB | p99 ms | events: rows / B per row / dead | jobs: rows / B per row / dead | job_closes: rows / B per row / dead | inbox_checks rows | schema MiB |\n\
             |--:|--:|--:|--:|--:|--:|--:|--:|\n",
        );
        for x in &self.samples {
            let _ = writeln!(
                s,
                "| {}:{:02} | {:.1} | {} | {} | {} | {} | {} | {:.1} |",
                x.at.as_secs() / 60,
                x.at.as_secs() % 60,
                x.rss_kib as f64 / 1024.0,
                if x.deliveries > 0 {
                    ms(x.p99)
                } else {
                    "-".into()
                },
                cell(x.table("events")),
                cell(x.table("jobs")),
                cell(x.table("job_closes")),
                x.table("inbox_checks")
                    .map_or("-".into(), |t| thousands(t.live as f64)),
                x.schema_bytes() as f64 / 1048576.0,
            );
        }
        s
    }

    /// `flat ...` / `GROWING ...` / `no verdict ...`, one a line.
    pub fn verdict_lines(&self) -> Vec<String> {
        self.verdicts
            .iter()
            .map(|v| match v {
                Ok(v) => v.line(),
                Err(why) => why.clone(),
            })
            .collect()
    }

    /// The whole section.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "### {}: the soak\n", self.date);
        let _ = writeln!(s, "`{}`\n", self.command);
        let _ = writeln!(s, "Machine: {}.", self.machine);
        for line in &self.setup {
            let _ = writeln!(s, "{line}");
        }
        let _ = writeln!(s, "{}\n", self.totals);
        if !self.counters.is_empty() {
            let _ = writeln!(s, "The daemon's counters at the end:\n\n```");
            for c in &self.counters {
                let _ = writeln!(s, "{c}");
            }
            let _ = writeln!(s, "```\n");
        }
        s.push_str(&self.table());
        let _ = writeln!(s, "\nVerdicts:\n");
        for line in self.verdict_lines() {
            let _ = writeln!(s, "- {line}");
        }
        if let Some(chart) = &self.chart {
            let _ = writeln!(s, "\n![the soak, sampled]({chart})");
        }
        s
    }
}
