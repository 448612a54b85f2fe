//! Three daemon instances on one database, and jobs racing their own deliveries: for a third
//! of the jobs the webhook comes before the job row (early), for a third after it (late), for
//! the rest at the same moment; a quarter of the terminal events are delivered two or three
//! times, half the jobs have an in-flight `running` event before their terminal one, and some
//! get a `running` event *after* it (out of order). Every delivery goes to the next instance in
//! turn, so the copies of one event land on different instances, and each is retried until it
//! is answered 2xx, as Sume does.
//!
//! Judged once everything has settled: every job is closed by its terminal event exactly once
//! (`closed_by = webhook`, `closed_event_id` its event, one `closed` outcome), in the state and
//! with the status it was sent; no disagreement; and across the instances every event was
//! stored once (`webhooks_total{outcome="stored"}` equals the distinct events).

mod judge;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use futures_util::StreamExt;
use rand::Rng;
use sume_wire::{headers, signature_header, Secret};
use tokio::time::Instant;

use crate::sql;

use super::args::ChaosArgs;
use super::world::World;

/// The daemon instances of the race.
pub const INSTANCES: usize = 3;

/// The terminal statuses jobs are closed with, in turn.
const TERMINALS: [&str; 5] = ["completed", "failed", "completed", "canceled", "expired"];

/// What the race showed.
#[derive(Debug, Clone, Default)]
pub struct RaceResult {
    /// Jobs raced.
    pub jobs: usize,
    /// Jobs whose webhooks came before the row, after it, and at the same moment.
    pub early: usize,
    /// See `early`.
    pub late: usize,
    /// See `early`.
    pub together: usize,
    /// Terminal events delivered more than once.
    pub duplicated: usize,
    /// Jobs with a `running` event delivered after their terminal one.
    pub out_of_order: usize,
    /// Distinct events sent.
    pub events: u64,
    /// Deliveries answered 2xx, and attempts that were not (then retried).
    pub acked: u64,
    /// See `acked`.
    pub retried: u64,
    /// Deliveries answered 2xx by each instance.
    pub per_instance: Vec<u64>,
    /// Jobs closed by their own terminal event exactly once, in the state it says.
    pub closed_once: usize,
    /// Rows in `sume.disagreements`.
    pub disagreements: i64,
    /// Events stored across the instances (their `stored` counters), and deliveries counted as
    /// duplicates.
    pub stored_counted: u64,
    /// See `stored_counted`.
    pub duplicates_counted: u64,
    /// From the first delivery to every job closed and every event applied.
    pub settled_in: Duration,
    /// What did not hold (empty when the race passed).
    pub problems: Vec<String>,
}

/// One job's plan.
#[derive(Debug, Clone)]
struct Plan {
    job: String,
    status: &'static str,
    timing: Timing,
    copies: usize,
    running_before: bool,
    running_after: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timing {
    Early,
    Late,
    Together,
}

fn plan(run: &str, i: usize) -> Plan {
    Plan {
        job: format!("job_{run}_{i}"),
        status: TERMINALS[i % TERMINALS.len()],
        timing: [Timing::Early, Timing::Late, Timing::Together][i % 3],
        copies: 1 + usize::from(i.is_multiple_of(4)) + usize::from(i.is_multiple_of(8)),
        running_before: i.is_multiple_of(2),
        running_after: i % 6 == 1,
    }
}

/// Sends and registers; shared by every job's task.
struct Racer {
    http: reqwest::Client,
    urls: Vec<String>,
    secret: Secret,
    next: AtomicUsize,
    per_instance: Vec<AtomicU64>,
    retried: AtomicU64,
    registrars: Vec<tokio_postgres::Client>,
    patience: Duration,
}

impl Racer {
    /// Delivers one event to the next instance, retrying (on the next ones) until 2xx.
    async fn deliver(&self, event_id: &str, body: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.patience;
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % self.urls.len();
            let ts = chrono::Utc::now().timestamp();
            let signature =
                signature_header(std::slice::from_ref(&self.secret), ts, body.as_bytes());
            let answer = self
                .http
                .post(&self.urls[i])
                .header("content-type", "application/json")
                .header(headers::EVENT_ID, event_id)
                .header(headers::TIMESTAMP, ts.to_string())
                .header(headers::SIGNATURE, signature)
                .body(body.to_owned())
                .send()
                .await;
            if matches!(&answer, Ok(r) if r.status().is_success()) {
                self.per_instance[i].fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            self.retried.fetch_add(1, Ordering::Relaxed);
            anyhow::ensure!(
                Instant::now() < deadline,
                "{event_id} not accepted within {:?}: {answer:?}",
                self.patience
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn register(&self, i: usize, job: &str) -> anyhow::Result<()> {
        let db = &self.registrars[i % self.registrars.len()];
        db.execute(sql::JOBS_REGISTER.sql(), &[&job])
            .await
            .with_context(|| format!("registering {job}"))?;
        Ok(())
    }

    async fn deliveries(&self, p: &Plan) -> anyhow::Result<()> {
        let running = event(&p.job, "running");
        if p.running_before {
            self.deliver(&running.0, &running.1).await?;
        }
        let terminal = event(&p.job, p.status);
        let copies = (0..p.copies).map(|_| self.deliver(&terminal.0, &terminal.1));
        for r in futures_util::future::join_all(copies).await {
            r?;
        }
        if p.running_after {
            self.deliver(&running.0, &running.1).await?;
        }
        Ok(())
    }

    async fn job(&self, i: usize, p: &Plan) -> anyhow::Result<()> {
        let pause = Duration::from_millis(rand::thread_rng().gen_range(0..30));
        match p.timing {
            Timing::Early => {
                self.deliveries(p).await?;
                tokio::time::sleep(pause).await;
                self.register(i, &p.job).await
            }
            Timing::Late => {
                self.register(i, &p.job).await?;
                tokio::time::sleep(pause).await;
                self.deliveries(p).await
            }
            Timing::Together => {
                let (a, b) = tokio::join!(self.register(i, &p.job), self.deliveries(p));
                a.and(b)
            }
        }
    }
}

/// `(event id, body)` of a job's event with this status, in Sume's documented envelope.
fn event(job: &str, status: &str) -> (String, String) {
    let id = format!("evt_{job}_{status}");
    let result = if status == "completed" {
        format!(r#","result":{{"images":[{{"url":"https://cdn.sume.so/o/{job}/0.png"}}]}}"#)
    } else {
        String::new()
    };
    let body = format!(
        r#"{{"id":"{id}","object":"event","type":"job.{status}","data":{{"object":{{"id":"{job}","object":"job","status":"{status}"{result}}}}}}}"#
    );
    (id, body)
}

/// Runs the race on three fresh instances and judges it.
pub(super) async fn run(world: &World, args: &ChaosArgs) -> anyhow::Result<RaceResult> {
    let url = world.database("chaos_race").await?;
    let mut daemons = Vec::new();
    for n in 0..INSTANCES {
        daemons.push(world.daemon(&url, &format!("race-{n}"), &[])?);
    }
    for d in &mut daemons {
        d.wait_ready(args.patience).await?;
    }
    eprint!(
        "sume-bench chaos: race, {} jobs over {INSTANCES} instances ... ",
        args.race_jobs
    );
    let mut registrars = Vec::new();
    for _ in 0..4 {
        registrars.push(crate::stages::client(&url).await?);
    }
    let racer = Racer {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?,
        urls: daemons
            .iter()
            .map(|d| format!("http://{}/webhooks/sume", d.listen))
            .collect(),
        secret: Secret::new(world.secret.clone()),
        next: AtomicUsize::new(0),
        per_instance: (0..INSTANCES).map(|_| AtomicU64::new(0)).collect(),
        retried: AtomicU64::new(0),
        registrars,
        patience: args.patience,
    };
    let run_id = format!("{:06x}", rand::thread_rng().gen::<u32>() & 0xff_ffff);
    let plans: Vec<Plan> = (0..args.race_jobs).map(|i| plan(&run_id, i)).collect();
    let began = Instant::now();
    let mut jobs = futures_util::stream::iter(plans.iter().enumerate())
        .map(|(i, p)| racer.job(i, p))
        .buffer_unordered(args.race_concurrency.max(1));
    while let Some(done) = jobs.next().await {
        done?;
    }
    drop(jobs);
    let db = crate::stages::client(&url).await?;
    settle(&db, args.race_jobs, args.patience).await?;
    let settled_in = began.elapsed();
    let mut result = judge::judge(&db, &plans, &racer, &daemons).await?;
    result.settled_in = settled_in;
    for d in &mut daemons {
        if d.alive().is_err() || !d.healthy().await {
            result
                .problems
                .push(format!("{} is not alive and healthy", d.log().display()));
        }
        d.stop();
    }
    eprintln!(
        "{} of {} closed once, {} disagreements, settled in {:.1} s",
        result.closed_once,
        result.jobs,
        result.disagreements,
        settled_in.as_secs_f64()
    );
    Ok(result)
}

/// Waits until every job is closed and no event waits for a row that exists.
async fn settle(
    db: &tokio_postgres::Client,
    jobs: usize,
    patience: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + patience;
    loop {
        let row = db.query_one(sql::JOBS_RACE_PROGRESS.sql(), &[]).await?;
        let (closed, all, waiting): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        if closed as usize == jobs && all as usize == jobs && waiting == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the race did not settle within {patience:?}: {closed} of {all} jobs closed \
             ({jobs} raced), {waiting} events waiting for a row that exists"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sume_wire::{dedupe_key, parse_event};

    #[test]
    fn race_events_parse_with_their_id_as_key() {
        for status in ["running", "completed", "failed", "canceled", "expired"] {
            let (id, body) = event("job_x", status);
            let parsed = parse_event(body.as_bytes()).expect(status);
            assert_eq!(parsed.job_id, "job_x");
            assert_eq!(parsed.status.as_deref(), Some(status));
            assert_eq!(dedupe_key(&parsed), id);
        }
    }

    #[test]
    fn plans_cover_every_timing_and_fault() {
        let plans: Vec<Plan> = (0..24).map(|i| plan("r", i)).collect();
        for t in [Timing::Early, Timing::Late, Timing::Together] {
            assert!(plans.iter().any(|p| p.timing == t));
        }
        assert!(plans.iter().any(|p| p.copies == 3));
        assert!(plans.iter().any(|p| p.running_after && !p.running_before));
        assert!(plans.iter().all(|p| !(p.running_after && p.running_before)));
        for s in TERMINALS {
            assert!(plans.iter().any(|p| p.status == s));
        }
    }
}
