//! What a demo run measured and how it prints: the [`Report`], taken from the daemon's rows
//! (`sume.jobs`, `sume.events`) and the simulator's own record of what it did (each job's truth,
//! every webhook attempt, the status reads of the application's key).

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sume_sim::{DeliveriesAnswer, JobTruth, JobsAnswer, RunningSim, SimStats};
use sume_wire::Status;
use tokio_postgres::Row;

use sume_inbox::db::Store;

use super::APP_KEY_NAME;
use crate::sql;

/// What a demo run did, as a newcomer reads it.
#[derive(Debug, Clone, Default)]
///
/// `duplicates_absorbed` and `foreign_set_aside` count over all of `sume.events`, so they are
/// exact only on a database that holds this run's events alone.
pub struct Report {
    /// Daemon instances that shared the database.
    pub instances: usize,
    /// Jobs the application submitted (and registered with their orders).
    pub submitted: usize,
    /// Of the submitted jobs, those closed by a webhook.
    pub closed_by_webhook: i64,
    /// Of the submitted jobs, those closed by the sweep's status read, because their webhook
    /// was dropped or late.
    pub closed_by_poll: i64,
    /// Of the submitted jobs, those the sweep gave up on (`POLL_GIVE_UP`); zero in a healthy run.
    pub given_up: i64,
    /// Each state the submitted jobs are in, with how many, most frequent first.
    pub states: Vec<(String, i64)>,
    /// Closing events that arrived before their order's transaction committed and were
    /// attached when it did.
    pub early_attached: i64,
    /// Accepted deliveries the simulator sent before its create call answered `202`.
    pub early_before_202: usize,
    /// Deliveries answered 2xx minus events stored: repeats the inbox absorbed.
    pub duplicates_absorbed: i64,
    /// Jobs created under another workspace's key, with webhooks sent to this daemon.
    pub foreign_jobs: usize,
    /// Events the daemon set aside because every key it holds reported their job unknown.
    pub foreign_set_aside: i64,
    /// Every webhook attempt the simulator made, retries included.
    pub webhook_attempts: usize,
    /// Of those, the attempts not answered 2xx (and so retried by the simulator).
    pub webhook_attempts_refused: usize,
    /// Status reads made at the simulator with the application's key (the daemon's polls).
    pub status_reads: u64,
    /// Of those, the reads answered 429, by the rate limit or an injected fault.
    pub status_429: u64,
    /// From the first submission to this measurement.
    pub converge_time: Duration,
    /// Jobs whose state matches the simulator's truth.
    pub matched: usize,
    /// One line per job that does not match: its id, its state here and Sume's.
    pub mismatches: Vec<String>,
}

impl Report {
    /// Every submitted job is in the terminal state Sume gave it; `sume-dev demo` fails
    /// otherwise.
    pub fn all_match(&self) -> bool {
        self.matched == self.submitted && self.mismatches.is_empty()
    }

    /// The last line: every job matches the simulator's truth, or the first differences.
    fn fmt_verdict(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.all_match() {
            writeln!(
                f,
                "  every job's state matches the simulator's truth: {}/{} ✓",
                self.matched, self.submitted
            )
        } else {
            writeln!(
                f,
                "  MISMATCH: {}/{} jobs match the simulator's truth; first differences: {}",
                self.matched,
                self.submitted,
                self.mismatches
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let states: Vec<String> = self
            .states
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect();
        writeln!(f)?;
        writeln!(
            f,
            "sume-dev demo: {} daemon instance(s) on one database",
            self.instances
        )?;
        row(f, "  jobs submitted", self.submitted)?;
        row(f, "    final states", states.join(", "))?;
        row(f, "  closed by webhook", self.closed_by_webhook)?;
        row(
            f,
            "  closed by poll (webhook dropped or late)",
            self.closed_by_poll,
        )?;
        if self.given_up > 0 {
            row(f, "  given up (POLL_GIVE_UP)", self.given_up)?;
        }
        row(
            f,
            "  early events attached",
            format_args!(
                "{} (arrived before the job row committed; {} even before the 202)",
                self.early_attached, self.early_before_202
            ),
        )?;
        row(
            f,
            "  duplicate deliveries absorbed",
            self.duplicates_absorbed,
        )?;
        row(
            f,
            "  foreign events set aside",
            format_args!(
                "{} (from {} jobs of another workspace)",
                self.foreign_set_aside, self.foreign_jobs
            ),
        )?;
        row(
            f,
            "  webhook attempts spent",
            format_args!(
                "{} ({} not answered 2xx)",
                self.webhook_attempts, self.webhook_attempts_refused
            ),
        )?;
        row(
            f,
            "  status reads at Sume",
            format_args!(
                "{} ({} answered 429, each waited out)",
                self.status_reads, self.status_429
            ),
        )?;
        row(
            f,
            "  time to converge",
            format_args!("{:.1}s", self.converge_time.as_secs_f64()),
        )?;
        self.fmt_verdict(f)
    }
}

/// One figure: its label, a dotted leader to the value's column, the value.
fn row(f: &mut fmt::Formatter<'_>, label: &str, value: impl fmt::Display) -> fmt::Result {
    writeln!(f, "{:.<45} {value}", format!("{label} "))
}

/// What the simulator says happened, from its `/sim/...` endpoints.
struct SimView {
    truth: JobsAnswer,
    deliveries: DeliveriesAnswer,
    stats: SimStats,
}

impl SimView {
    async fn fetch(http: &reqwest::Client, sim: &RunningSim) -> anyhow::Result<SimView> {
        let truth: JobsAnswer = http.get(sim.sim_url("jobs")).send().await?.json().await?;
        let deliveries: DeliveriesAnswer = http
            .get(sim.sim_url("deliveries"))
            .send()
            .await?
            .json()
            .await?;
        let stats: SimStats = http.get(sim.sim_url("stats")).send().await?.json().await?;
        Ok(SimView {
            truth,
            deliveries,
            stats,
        })
    }
}

impl Report {
    /// Measures the run so far: the daemon's rows for `ours` (each job id with the moment its
    /// order committed) against the simulator's view.
    pub(super) async fn measure(
        instances: usize,
        sim: &RunningSim,
        http: &reqwest::Client,
        store: &Store,
        ours: &HashMap<String, DateTime<Utc>>,
        foreign: &[String],
        elapsed: Duration,
    ) -> anyhow::Result<Report> {
        let view = SimView::fetch(http, sim).await?;
        let client = store.pool().get().await?;
        let ids: Vec<&str> = ours.keys().map(String::as_str).collect();
        let jobs = client.query(sql::JOBS_STATES.sql(), &[&ids]).await?;
        let mut report = Report {
            instances,
            submitted: ours.len(),
            foreign_jobs: foreign.len(),
            converge_time: elapsed,
            ..Report::default()
        };
        report.judge_jobs(&jobs, &view.truth);
        report
            .count_events(&client, &ids, ours, &view.deliveries)
            .await?;
        report.count_attempts_and_reads(&view);
        Ok(report)
    }

    /// Each job's state against the simulator's truth, who closed it, and the tally of states.
    fn judge_jobs(&mut self, jobs: &[Row], truth: &JobsAnswer) {
        let truth: HashMap<&str, &JobTruth> =
            truth.jobs.iter().map(|j| (j.id.as_str(), j)).collect();
        let mut states: HashMap<String, i64> = HashMap::new();
        for row in jobs {
            let (id, state, closed_by): (String, String, Option<String>) =
                (row.get(0), row.get(1), row.get(2));
            *states.entry(state.clone()).or_default() += 1;
            match closed_by.as_deref() {
                Some("webhook") => self.closed_by_webhook += 1,
                Some("poll") => self.closed_by_poll += 1,
                Some("give_up") => self.given_up += 1,
                _ => {}
            }
            let want = truth.get(id.as_str()).and_then(|t| {
                t.terminal
                    .then(|| Status::parse(&t.final_status).terminal())
                    .flatten()
            });
            match want {
                Some(w) if w.as_str() == state => self.matched += 1,
                Some(w) => self
                    .mismatches
                    .push(format!("{id}: {state}, Sume says {w}")),
                None => self
                    .mismatches
                    .push(format!("{id}: {state}, still running at Sume")),
            }
        }
        let mut states: Vec<(String, i64)> = states.into_iter().collect();
        states.sort_by_key(|s| std::cmp::Reverse(s.1));
        self.states = states;
    }

    /// The inbox's side: events that came early, duplicates it absorbed, foreign events it set
    /// aside.
    async fn count_events(
        &mut self,
        client: &deadpool_postgres::Client,
        ids: &[&str],
        ours: &HashMap<String, DateTime<Utc>>,
        deliveries: &DeliveriesAnswer,
    ) -> anyhow::Result<()> {
        // Early: the closing event arrived before the order's transaction committed.
        let events = client.query(sql::EVENTS_CLOSED.sql(), &[&ids]).await?;
        self.early_attached = events
            .iter()
            .filter(|r| {
                ours.get(&r.get::<_, String>(0))
                    .is_some_and(|c| r.get::<_, DateTime<Utc>>(1) < *c)
            })
            .count() as i64;
        self.early_before_202 = deliveries
            .deliveries
            .iter()
            .filter(|d| d.early && d.ok && ours.contains_key(&d.job_id))
            .count();
        let stored: i64 = client.query_one(sql::EVENTS_COUNT.sql(), &[]).await?.get(0);
        let ok = deliveries.deliveries.iter().filter(|d| d.ok).count() as i64;
        self.duplicates_absorbed = ok - stored;
        self.foreign_set_aside = client
            .query_one(sql::EVENTS_COUNT_SET_ASIDE.sql(), &[])
            .await?
            .get(0);
        Ok(())
    }

    /// The simulator's side: webhook attempts it spent, status reads the application's key made.
    fn count_attempts_and_reads(&mut self, view: &SimView) {
        let deliveries = &view.deliveries.deliveries;
        self.webhook_attempts = deliveries.len();
        self.webhook_attempts_refused = deliveries.iter().filter(|d| !d.ok).count();
        if let Some(k) = view.stats.keys.get(APP_KEY_NAME) {
            self.status_reads = k.counts.reads;
            self.status_429 = k.counts.rate_limited + k.counts.fault_429;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            instances: 2,
            submitted: 3,
            closed_by_webhook: 2,
            closed_by_poll: 1,
            given_up: 0,
            states: vec![("completed".to_owned(), 2), ("failed".to_owned(), 1)],
            early_attached: 1,
            early_before_202: 1,
            duplicates_absorbed: 4,
            foreign_jobs: 2,
            foreign_set_aside: 2,
            webhook_attempts: 9,
            webhook_attempts_refused: 1,
            status_reads: 5,
            status_429: 1,
            converge_time: Duration::from_millis(12_340),
            matched: 3,
            mismatches: Vec::new(),
        }
    }

    #[test]
    fn the_report_prints_every_figure_and_the_verdict() {
        let expected = "
sume-dev demo: 2 daemon instance(s) on one database
  jobs submitted ............................ 3
    final states ............................ 2 completed, 1 failed
  closed by webhook ......................... 2
  closed by poll (webhook dropped or late) .. 1
  early events attached ..................... 1 (arrived before the job row committed; 1 even before the 202)
  duplicate deliveries absorbed ............. 4
  foreign events set aside .................. 2 (from 2 jobs of another workspace)
  webhook attempts spent .................... 9 (1 not answered 2xx)
  status reads at Sume ...................... 5 (1 answered 429, each waited out)
  time to converge .......................... 12.3s
  every job's state matches the simulator's truth: 3/3 ✓
";
        assert_eq!(report().to_string(), expected);
    }

    #[test]
    fn a_mismatch_and_a_give_up_are_printed() {
        let report = Report {
            given_up: 1,
            closed_by_poll: 0,
            matched: 2,
            mismatches: (1..=7).map(|i| format!("job_{i}: running")).collect(),
            ..report()
        };
        let text = report.to_string();
        assert!(
            text.contains("\n  given up (POLL_GIVE_UP) ................... 1\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "  MISMATCH: 2/3 jobs match the simulator's truth; first differences: \
                 job_1: running; job_2: running; job_3: running; job_4: running; job_5: running\n"
            ),
            "{text}"
        );
    }
}
