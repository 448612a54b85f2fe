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

/// Jobs registered at full speed over events already waiting, in a database of their own.
pub(super) async fn attach(args: &RunArgs, url: &str) -> anyhow::Result<Option<AttachResult>> {
    if args.attach_jobs == 0 {
        return Ok(None);
    }
    eprint!(
        "sume-bench: attach, {} jobs registered on {} connections ... ",
        args.attach_jobs, args.attach_connections
    );
    let db_url = crate::stages::fresh_database(url, "bench_attach").await?;
    let a = crate::stages::attach(&db_url, args.attach_jobs, args.attach_connections).await?;
    eprintln!("all closed in {:.2} s", a.total.as_secs_f64());
    Ok(Some(a))
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
    let sw = crate::stages::sweep(url, args.sweep_due, args.sweep_closed).await?;
    eprintln!("ratio {:.2}", sw.ratio());
    Ok(Some(sw))
}
