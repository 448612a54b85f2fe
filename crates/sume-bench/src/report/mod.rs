//! The result of a run: what each step measured ([`Row`]), where and how the run happened
//! ([`Context`]) and the stages beside ingest, gathered in one [`Report`], with the lookups the
//! targets and the table share. `verdicts.rs` judges the targets on it, `markdown.rs`
//! writes it as the table printed and appended to docs/benchmarks.md, `numbers.rs` writes its
//! numbers.

mod markdown;
mod numbers;
mod verdicts;

#[cfg(test)]
mod fixtures;

use std::time::Duration;

use crate::ceiling::Ceiling;
use crate::load::Mode;
use crate::stack::Memory;
use crate::stats::Tally;

pub use numbers::{ms, thousands};
pub use verdicts::Verdict;

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

/// The rows the targets and the table look up.
impl Report {
    /// The baseline's as-fast-as-possible step at `connections`.
    fn baseline_for(&self, connections: usize) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.server == Server::Baseline && r.mode == Mode::Closed && r.connections == connections
        })
    }

    /// The main daemon's as-fast-as-possible step at `connections`.
    fn daemon_closed(&self, connections: usize) -> Option<&Row> {
        self.rows.iter().find(|r| {
            r.server == Server::Daemon && r.mode == Mode::Closed && r.connections == connections
        })
    }

    /// The main daemon's fixed-rate step.
    fn daemon_rate(&self) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.server == Server::Daemon && matches!(r.mode, Mode::Rate(_)))
    }

    /// The main daemon's highest peak resident set over all its steps.
    fn daemon_peak_kib(&self) -> Option<u64> {
        self.rows
            .iter()
            .filter(|r| r.server == Server::Daemon)
            .filter_map(|r| r.memory.map(|m| m.peak_kib))
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::row;
    use super::*;

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
}
