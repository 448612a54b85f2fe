//! What is measured once the servers have stopped, with the machine to itself: the PostgreSQL
//! ceiling (checked like a step), then the attach and sweep stages of [`crate::stages`]. Each
//! is skipped when its size or time is 0.

use crate::ceiling::{self, Ceiling};
use crate::check::stored_matches_acked;
use crate::cli::RunArgs;
use crate::report;
use crate::stages::{AttachResult, SweepResult};

use super::Bench;

impl Bench {
    /// The same rows as the steps store, written in large transactions straight to PostgreSQL.
    pub(super) async fn ceiling(&mut self) -> anyhow::Result<Option<Ceiling>> {
        if self.args.ceiling_duration.is_zero() {
            return Ok(None);
        }
        self.empty_inbox().await?;
        eprint!(
            "sume-bench: PostgreSQL ceiling, {}-row transactions on {} connections ... ",
            self.args.ceiling_batch, self.args.ceiling_connections
        );
        let now = chrono::Utc::now().timestamp();
        let template = ceiling::template(&self.generator, self.args.ceiling_batch, now);
        let c = ceiling::measure(
            &self.url,
            template,
            self.args.ceiling_connections,
            self.args.ceiling_duration,
        )
        .await?;
        let stored = self.count_events().await?;
        eprintln!("{} rows/s", report::thousands(c.rows_per_sec()));
        stored_matches_acked("PostgreSQL ceiling", c.rows, stored)?;
        Ok(Some(c))
    }
}

/// Jobs registered over events already waiting, in a database of their own: at full speed,
/// then at a steady rate; each part `--rounds` times, keeping its round of median p99.
pub(super) async fn attach(args: &RunArgs, url: &str) -> anyhow::Result<Vec<AttachResult>> {
    let mut parts = Vec::new();
    if args.attach_jobs > 0 {
        parts.push((args.attach_jobs, None));
    }
    if args.attach_rate > 0.0 && args.attach_steady_jobs > 0 {
        parts.push((args.attach_steady_jobs, Some(args.attach_rate)));
    }
    let mut out = Vec::new();
    for (jobs, rate) in parts {
        let mut rounds = Vec::new();
        for round in 1..=args.rounds.max(1) {
            eprint!(
                "sume-bench: attach, {jobs} jobs registered {} on {} connections, round {round} ... ",
                match rate {
                    None => "at full speed".to_owned(),
                    Some(r) => format!("at {r}/s"),
                },
                args.attach_connections
            );
            let db_url = crate::stages::fresh_database(url, "bench_attach").await?;
            let a = crate::stages::attach(&db_url, jobs, args.attach_connections, rate).await?;
            eprintln!(
                "all closed in {:.2} s, p99 {:.1} ms",
                a.total.as_secs_f64(),
                a.p99_ms
            );
            rounds.push(a);
        }
        rounds.sort_by(|a, b| a.p99_ms.total_cmp(&b.p99_ms));
        out.push(rounds.swap_remove((rounds.len() - 1) / 2));
    }
    Ok(out)
}

/// One sweep pass beside many closed jobs against one beside none.
pub(super) async fn sweep(args: &RunArgs, url: &str) -> anyhow::Result<Option<SweepResult>> {
    if args.sweep_due == 0 {
        return Ok(None);
    }
    eprint!(
        "sume-bench: sweep, a pass over {} due jobs beside {} closed ones vs none ... ",
        args.sweep_due, args.sweep_closed
    );
    let sw =
        crate::stages::sweep(url, args.sweep_due, args.sweep_closed, args.rounds as usize).await?;
    eprintln!("ratio {:.2}", sw.ratio());
    Ok(Some(sw))
}
