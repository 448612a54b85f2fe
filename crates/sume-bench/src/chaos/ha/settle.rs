//! How a failover round ends: the jobs on the primary beside the simulator's truth. After a
//! synchronous failover (and a failback) attach and the sweep must close every job Sume ended,
//! in Sume's state, with nothing else done; after an asynchronous one, what was lost is counted
//! and `sume-inbox reconcile` must bring every registered job to Sume's state.

use std::time::Duration;

use sume_sim::RunningSim;
use tokio::time::Instant;

use crate::sql;

use super::app::{self, Judgement, KEY_NAME};
use super::pair::DATABASE;
use super::{reconcile, Round};
use crate::chaos::faults::Figure;

impl Round<'_> {
    /// Waits until every job Sume ended is closed on the primary; figures: the first close by
    /// a webhook and by a poll of a job registered after the promotion, and when the last job
    /// was closed.
    pub(super) async fn settled(
        &mut self,
        sim: &RunningSim,
        promoted_at: &str,
    ) -> anyhow::Result<()> {
        let url = self.pair.node_url(self.pair.primary, DATABASE);
        let started = Instant::now();
        let judged = loop {
            let j = app::judge(sim, &url).await?;
            let done = j.open_though_ended.is_empty();
            if done || started.elapsed() > self.args.patience {
                break j;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        self.figures.push(Figure::count(
            "jobs of the application on the primary",
            judged.registered as f64,
        ));
        self.judged(&judged, "after the failover");
        let db = crate::stages::client(&url).await?;
        for row in db
            .query(
                sql::JOBS_FIRST_CLOSES_SINCE.sql(),
                &[&promoted_at, &KEY_NAME],
            )
            .await?
        {
            let (by, secs): (String, f64) = (row.get(0), row.get(1));
            let name = match by.as_str() {
                "webhook" => "from the promotion to the first job registered after it closed by its webhook (attach)",
                "poll" => "from the promotion to the first job registered after it closed by a poll (the sweep)",
                _ => continue,
            };
            self.figures
                .push(Figure::ms(name, Duration::from_secs_f64(secs.max(0.0))));
        }
        if self.scenario == crate::chaos::args::Scenario::Failover
            && !judged.closed_by.contains_key("poll")
        {
            self.checks
                .push("no job was closed by the sweep's poll on the new primary".into());
        }
        Ok(())
    }

    /// Counts what the asynchronous failover lost, runs reconcile, and checks that every job
    /// Sume ended is closed here in Sume's state.
    pub(super) async fn reconciled(
        &mut self,
        sim: &RunningSim,
        registered: &[String],
    ) -> anyhow::Result<()> {
        let url = self.pair.node_url(self.pair.primary, DATABASE);
        // Webhooks of the last jobs still in flight land first.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = app::judge(sim, &url).await?;
        self.figures.extend([
            Figure::count(
                "job rows registered (committed) but missing on the new primary",
                registered.len().saturating_sub(before.registered) as f64,
            ),
            Figure::count(
                "jobs closed before the crash, open again on the new primary (their close lost)",
                before.open_though_ended.len() as f64,
            ),
        ]);
        let r = reconcile::run(&self.world.bin(), &self.pair.url(), &sim.api_url(), "10m").await?;
        self.figures.extend([
            Figure::ms("sume-inbox reconcile --since 10m, start to exit", r.took),
            Figure::count("jobs Sume listed to reconcile", r.listed as f64),
            Figure::count("pages of Sume's list read", r.pages as f64),
            Figure::count("jobs reconcile closed", r.closed as f64),
            Figure::count(
                "jobs reconcile found closed already",
                r.already_closed as f64,
            ),
        ]);
        let after = app::judge(sim, &url).await?;
        self.judged(&after, "after reconcile");
        Ok(())
    }

    fn judged(&mut self, j: &Judgement, when: &str) {
        if !j.open_though_ended.is_empty() {
            self.checks.push(format!(
                "{} jobs Sume ended are still open on the primary {when} (e.g. {})",
                j.open_though_ended.len(),
                j.open_though_ended[0]
            ));
        }
        if !j.wrong_state.is_empty() {
            self.checks.push(format!(
                "{} jobs closed in another state than Sume's {when} (e.g. {})",
                j.wrong_state.len(),
                j.wrong_state[0]
            ));
        }
    }
}
