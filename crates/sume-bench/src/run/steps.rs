//! The ingest steps: each server loaded at each connection count as fast as it answers, then
//! at the fixed rate, round after round. A step starts from an empty `sume.events` and a
//! checkpoint, reads CPU time and the daemon's batch sizes around the load, and ends with the
//! data check: rows stored must equal 2xx answers.

use std::time::Duration;

use anyhow::Context as _;

use super::servers::{Servers, Target};
use super::setup::connect;
use super::Bench;
use crate::check::stored_matches_acked;
use crate::load::{self, Mode, Step};
use crate::report::{self, CpuCost, Row, Server};
use crate::sql;
use crate::stack;

/// CPU time used so far by the server, by PostgreSQL and by this process.
type CpuTimes = (Duration, Duration, Duration);

impl Bench {
    /// Every step of every round. Servers take turns step by step (and round by round), so
    /// that a burst of noise on a shared machine does not land on one of them only. The rows
    /// measured before a failure stay in `rows`.
    pub(super) async fn rounds(
        &mut self,
        servers: &mut Servers,
        rows: &mut Vec<Row>,
    ) -> anyhow::Result<()> {
        let rounds = self.args.rounds;
        let connections = self.args.connections.clone();
        for round in 1..=rounds {
            if rounds > 1 {
                eprintln!("sume-bench: round {round} of {rounds}");
            }
            for &n in &connections {
                self.each_server(servers, n, Mode::Closed, rows).await?;
            }
            if self.args.rate > 0.0 {
                let mode = Mode::Rate(self.args.rate);
                let n = self.args.rate_connections;
                self.each_server(servers, n, mode, rows).await?;
            }
        }
        Ok(())
    }

    /// One step on each server in turn.
    async fn each_server(
        &mut self,
        servers: &mut Servers,
        connections: usize,
        mode: Mode,
        rows: &mut Vec<Row>,
    ) -> anyhow::Result<()> {
        for target in servers.iter_mut() {
            rows.push(self.step(target, connections, mode).await?);
        }
        Ok(())
    }

    /// One step against one server: empty inbox, warm-up + measured window, data check.
    async fn step(
        &mut self,
        target: &mut Target,
        connections: usize,
        mode: Mode,
    ) -> anyhow::Result<Row> {
        let label = step_label(target, connections, mode);
        let before = match self.args.from_empty {
            true => self.count_events().await?,
            false => {
                self.empty_inbox().await?;
                0
            }
        };
        eprint!("sume-bench: {label} ... ");
        let step = Step {
            addr: target.addr,
            connections,
            mode,
            warmup: self.args.warmup,
            duration: self.args.duration,
        };
        let analyze = self.analyze_after_warmup();
        let batches_before = self.batches(target).await;
        let cpu_before = self.cpu(target);
        let tally = load::run(&step, self.generator.clone()).await?;
        let cpu_after = self.cpu(target);
        let batches_after = self.batches(target).await;
        analyze
            .await?
            .context("analyze sume.events after the warm-up")?;
        target.proc.alive()?;
        let stored = self.count_events().await? - before;
        let memory = stack::memory(target.proc.pid()).ok();
        self.windows += 1;
        let row = Row {
            server: target.server,
            // From empty, every window is a row of its own, not a round of one median.
            label: match self.args.from_empty {
                true => format!("{} window {}", target.label, self.windows),
                false => target.label.clone(),
            },
            mode,
            connections,
            window: self.args.duration,
            cpu: cpu_cost(cpu_before, cpu_after, tally.acked_total),
            per_commit: per_commit(target.server, batches_before, batches_after),
            tally,
            memory,
        };
        print_outcome(&row, stored);
        stored_matches_acked(&label, row.tally.acked_total, stored)?;
        Ok(row)
    }

    /// What autovacuum does to a live inbox: fresh planner statistics. A step is shorter than
    /// autovacuum's one-minute nap, so it is done here, once the warm-up has filled the table
    /// (statistics survive the truncate before the next step).
    /// With `--no-analyze`, nothing: the daemons keep the plans they made on the truncated,
    /// empty inbox, as on a new database.
    fn analyze_after_warmup(&self) -> tokio::task::JoinHandle<anyhow::Result<()>> {
        let url = self.url.clone();
        let warmup = self.args.warmup;
        let skip = self.args.no_analyze || self.args.from_empty;
        tokio::spawn(async move {
            if skip {
                return anyhow::Ok(());
            }
            tokio::time::sleep(warmup).await;
            let db = connect(&url).await?;
            db.batch_execute(sql::EVENTS_ANALYZE.sql()).await?;
            anyhow::Ok(())
        })
    }

    pub(super) async fn count_events(&self) -> anyhow::Result<u64> {
        let n: i64 = self
            .db
            .query_one(sql::EVENTS_COUNT.sql(), &[])
            .await?
            .get(0);
        Ok(n as u64)
    }

    pub(super) async fn empty_inbox(&self) -> anyhow::Result<()> {
        self.db
            .batch_execute(sql::EVENTS_TRUNCATE.sql())
            .await
            .context("emptying the inbox before a step")?;
        self.db
            .batch_execute(sql::SERVER_CHECKPOINT.sql())
            .await
            .context("a checkpoint before a step")?;
        Ok(())
    }

    /// The daemon's batch-size totals, from its metrics on the admin address.
    async fn batches(&self, target: &Target) -> Option<(f64, f64)> {
        let admin = target.admin?;
        report::batch_totals(&load::get_text(admin, "/metrics").await?)
    }

    /// CPU time used so far by the server, by PostgreSQL and by this process.
    fn cpu(&self, target: &Target) -> Option<CpuTimes> {
        Some((
            stack::cpu_time(target.proc.pid(), false)?,
            stack::cluster_cpu_time(self.postmaster?)?,
            stack::cpu_time(std::process::id(), false)?,
        ))
    }
}

/// The step as its progress line and its data check name it.
fn step_label(target: &Target, connections: usize, mode: Mode) -> String {
    match mode {
        Mode::Closed => format!("{} max, {connections} conns", target.label),
        Mode::Rate(r) => format!(
            "{} {}/s, {connections} conns",
            target.label,
            report::thousands(r)
        ),
    }
}

/// CPU time per acknowledged event between two readings.
fn cpu_cost(before: Option<CpuTimes>, after: Option<CpuTimes>, events: u64) -> Option<CpuCost> {
    match (before, after) {
        (Some(before), Some(after)) => CpuCost::per_event(
            after.0 - before.0,
            after.1 - before.1,
            after.2 - before.2,
            events,
        ),
        _ => None,
    }
}

/// Deliveries per commit between two readings of the daemon's batch sizes (always 1 for the
/// baseline, which commits each delivery alone).
fn per_commit(
    server: Server,
    before: Option<(f64, f64)>,
    after: Option<(f64, f64)>,
) -> Option<f64> {
    match (server, before, after) {
        (Server::Baseline, _, _) => Some(1.0),
        (_, Some((s0, n0)), Some((s1, n1))) if n1 > n0 => Some((s1 - s0) / (n1 - n0)),
        _ => None,
    }
}

/// Ends the step's progress line with what it measured.
fn print_outcome(row: &Row, stored: u64) {
    let l = &row.tally.latency;
    eprintln!(
        "{}/s, p50 {} ms, p99 {} ms, p99.9 {} ms, {} not 2xx; stored {} of {} acked",
        report::thousands(row.per_sec()),
        report::ms(l.quantile(0.5)),
        report::ms(l.quantile(0.99)),
        report::ms(l.quantile(0.999)),
        row.tally.not_2xx + row.tally.errors,
        stored,
        row.tally.acked_total
    );
}
