//! The end-to-end harness: a simulator, one or more daemons (two behind a round-robin TCP
//! proxy when asked), the application's submit path ([`SubmitClient`]) for N concurrent jobs,
//! and the checks every scenario ends with.
//!
//! Every scenario compares the database with the simulator's truth (`/sim/jobs`) and its
//! delivery log (`/sim/deliveries`) once the run has converged: [`Env::converge`] waits, with
//! a deadline, until [`Snapshot::check`] holds, and answers the snapshot it held on.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use serde_json::Value;
use sume_dev::submit::{AdminApi, Submission, SubmitClient, SubmitConfig, Submitted};
use sume_inbox::config::{ApiKey, Config, SweepConfig};
use sume_sim::{
    DeliveriesAnswer, DeliveryRecord, JobTruth, JobsAnswer, RunningSim, SimConfig, WebhookState,
    TEST_WEBHOOK_SECRET,
};
use sume_wire::{Secret, Status};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::support::{config, connect, Daemon, TestDb};

/// The simulator's API key the application submits with, and its name in `SUME_API_KEYS`.
pub const KEY_NAME: &str = "app";
pub const KEY: &str = "sk_test_e2e_app";

/// How long a run may take to converge before the test fails. Runs normally converge in a
/// few seconds; the margin is for a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The application's connections: each submission holds one through its slow work.
const APP_POOL_SIZE: usize = 20;

/// The slow work of every submission: the window in which the webhook beats the row.
pub fn slow_work() -> RangeInclusive<Duration> {
    Duration::ZERO..=Duration::from_millis(500)
}

/// What every scenario starts from: job durations of 20-100 ms, no faults, retries after
/// 5, 10, 20, 40, 50, 50 ... ms, and a per-attempt timeout long enough for a loaded machine.
pub fn sim_config() -> SimConfig {
    let mut c = SimConfig::for_tests().with_key(KEY_NAME, KEY, "mem_e2e", "ws_e2e");
    c.delivery.webhook_timeout = Duration::from_secs(10);
    c
}

/// A daemon's configuration: the test defaults, verifying with the simulator's secret and
/// reading its API with the application's key. The status sweep keeps its production timings,
/// so it polls nothing during a run of a few seconds: these scenarios test the webhook path.
pub fn daemon_config(db_url: &str, sim: &RunningSim) -> Config {
    let mut cfg = config(db_url);
    cfg.sweep = SweepConfig::default();
    cfg.webhook_secrets = vec![Secret::new(TEST_WEBHOOK_SECRET)];
    cfg.sume_api_url = sim.api_url();
    cfg.api_keys = vec![ApiKey {
        name: KEY_NAME.to_owned(),
        key: Secret::new(KEY),
    }];
    cfg
}

/// How one job of a run is submitted.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The simulator's per-job overrides (the create body's `"sim"`).
    pub sim: Option<Value>,
    /// Register through this daemon's admin API instead of in the order's transaction.
    pub admin: Option<usize>,
}

impl Plan {
    pub fn sim(sim: Value) -> Plan {
        Plan {
            sim: Some(sim),
            admin: None,
        }
    }

    pub fn via_admin(mut self, daemon: usize) -> Plan {
        self.admin = Some(daemon);
        self
    }
}

/// One scenario's world.
pub struct Env {
    pub db: TestDb,
    pub sim: RunningSim,
    pub daemons: Vec<Daemon>,
    pub proxy: Option<Proxy>,
    /// The application's submit path; its webhook URL is the daemon, or the proxy in front
    /// of the daemons.
    pub client: Arc<SubmitClient>,
    http: reqwest::Client,
    inspect: tokio_postgres::Client,
}

impl Env {
    /// The simulator and one daemon.
    pub async fn start(sim: SimConfig) -> Env {
        Env::build(sim, 1, false).await
    }

    /// The simulator and `daemons` daemons on one database, behind one round-robin address.
    pub async fn start_fleet(sim: SimConfig, daemons: usize) -> Env {
        Env::build(sim, daemons, true).await
    }

    async fn build(sim: SimConfig, daemons: usize, proxied: bool) -> Env {
        let db = TestDb::new().await;
        let sim = RunningSim::start(sim).await.expect("simulator starts");
        let mut started = Vec::new();
        for _ in 0..daemons {
            started.push(Daemon::start(daemon_config(&db.url, &sim)).await);
        }
        let proxy = if proxied {
            Some(Proxy::start(started.iter().map(|d| d.webhook).collect()).await)
        } else {
            None
        };
        let front = proxy.as_ref().map_or(started[0].webhook, |p| p.addr);
        let webhook_url = format!("http://{front}/webhooks/sume");
        let submit = SubmitConfig::new(sim.api_url(), KEY_NAME, Secret::new(KEY))
            .with_webhook_url(&webhook_url)
            .with_slow_work(slow_work());
        let client = SubmitClient::new(submit, app_pool(&db.url)).expect("submit client");
        let inspect = connect(&db.url).await;
        Env {
            db,
            sim,
            daemons: started,
            proxy,
            client: Arc::new(client),
            http: reqwest::Client::new(),
            inspect,
        }
    }

    /// Submits `n` jobs at once, job `i` as `plan(i)`; answers them in submission order.
    pub async fn submit_all(&self, n: usize, plan: impl Fn(usize) -> Plan) -> Vec<Submitted> {
        self.spawn_submissions(n, plan).await.expect("submissions")
    }

    /// Like [`Env::submit_all`], in the background, so the scenario can act meanwhile.
    pub fn spawn_submissions(
        &self,
        n: usize,
        plan: impl Fn(usize) -> Plan,
    ) -> JoinHandle<Vec<Submitted>> {
        let admins: Vec<AdminApi> = self
            .daemons
            .iter()
            .map(|d| AdminApi::new(d.admin_url("")))
            .collect();
        let mut tasks = JoinSet::new();
        for i in 0..n {
            let plan = plan(i);
            let client = self.client.clone();
            let admin = plan.admin.map(|d| admins[d].clone());
            let mut submission = Submission::new(format!("order-{i}"), "a lighthouse at dusk");
            submission.sim = plan.sim;
            tasks.spawn(async move {
                let submitted = match &admin {
                    Some(admin) => client.submit_via_admin(admin, &submission).await,
                    None => client.submit(&submission).await,
                };
                let submitted =
                    submitted.unwrap_or_else(|e| panic!("submitting {}: {e}", submission.order_id));
                (i, submitted)
            });
        }
        tokio::spawn(async move {
            let mut done: Vec<(usize, Submitted)> = tasks.join_all().await.into_iter().collect();
            done.sort_by_key(|(i, _)| *i);
            done.into_iter().map(|(_, s)| s).collect()
        })
    }

    async fn sim_get<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let url = self.sim.sim_url(path);
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(
            response.status().is_success(),
            "{url}: {}",
            response.status()
        );
        response.json().await.expect("inspection JSON")
    }

    /// The simulator's delivery log.
    pub async fn deliveries(&self) -> Vec<DeliveryRecord> {
        let answer: DeliveriesAnswer = self.sim_get("deliveries").await;
        assert_eq!(answer.dropped, 0, "the delivery log overflowed");
        answer.deliveries
    }

    /// Everything the checks compare, read simulator first: once every simulated job has
    /// settled, the database is read after the last delivery was answered.
    pub async fn snapshot(&self) -> Snapshot {
        let truth: JobsAnswer = self.sim_get("jobs").await;
        let deliveries = self.deliveries().await;
        let jobs = self
            .inspect
            .query(
                "select job_id, state, sume_status, closed_by, closed_event_id, result, created_at
                 from sume.jobs",
                &[],
            )
            .await
            .expect("reading sume.jobs")
            .iter()
            .map(|r| {
                let row = JobRow {
                    state: r.get("state"),
                    sume_status: r.get("sume_status"),
                    closed_by: r.get("closed_by"),
                    closed_event_id: r.get("closed_event_id"),
                    result: r.get("result"),
                    created_at: r.get("created_at"),
                };
                (r.get("job_id"), row)
            })
            .collect();
        let events = self
            .inspect
            .query(
                "select event_id as key, coalesce(header_event_id, event_id) as event_id, job_id,
                        status, outcome, applied_at is not null as applied, received_at
                 from sume.events order by received_at, event_id",
                &[],
            )
            .await
            .expect("reading sume.events")
            .iter()
            .map(|r| EventRow {
                key: r.get("key"),
                event_id: r.get("event_id"),
                job_id: r.get("job_id"),
                status: r.get("status"),
                outcome: r.get("outcome"),
                applied: r.get("applied"),
                received_at: r.get("received_at"),
            })
            .collect();
        let count = |sql: &'static str| async move {
            self.inspect
                .query_one(sql, &[])
                .await
                .expect(sql)
                .get::<_, i64>(0)
        };
        Snapshot {
            truth: truth.jobs.into_iter().map(|t| (t.id.clone(), t)).collect(),
            deliveries,
            jobs,
            events,
            dead_letters: count("select count(*) from sume.dead_letters").await,
            disagreements: count("select count(*) from sume.disagreements").await,
        }
    }

    /// Waits until the run has converged ([`Snapshot::check`] holds for these submissions) and
    /// answers the snapshot; fails with what still did not hold after [`DEADLINE`].
    pub async fn converge(&self, submitted: &[Submitted]) -> Snapshot {
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let snapshot = self.snapshot().await;
            match snapshot.check(submitted) {
                Ok(()) => return snapshot,
                Err(why) if tokio::time::Instant::now() > end => {
                    panic!("the run did not converge within {DEADLINE:?}:\n{why}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Stops the simulator first (no delivery in flight), then the proxy and the daemons.
    pub async fn stop(self) {
        self.sim.stop().await.expect("simulator stops");
        drop(self.proxy);
        for daemon in self.daemons {
            daemon.stop().await;
        }
    }
}

/// The application's own pool: no wait timeout, since a run queues more submissions than it
/// has connections.
fn app_pool(url: &str) -> Pool {
    let pg: tokio_postgres::Config = url.parse().expect("database URL");
    let manager = Manager::from_config(
        pg,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(APP_POOL_SIZE)
        .runtime(Runtime::Tokio1)
        .build()
        .expect("application pool")
}

/// A row of `sume.jobs`.
#[derive(Debug, Clone)]
pub struct JobRow {
    pub state: String,
    pub sume_status: Option<String>,
    pub closed_by: Option<String>,
    pub closed_event_id: Option<String>,
    pub result: Option<Value>,
    pub created_at: DateTime<Utc>,
}

/// A row of `sume.events`.
#[derive(Debug, Clone)]
pub struct EventRow {
    /// The dedupe key the daemon derived from the signed body.
    pub key: String,
    /// The `X-Sume-Event-Id` it was first delivered with: the simulator's name for the event.
    pub event_id: String,
    pub job_id: String,
    pub status: Option<String>,
    pub outcome: Option<String>,
    pub applied: bool,
    pub received_at: DateTime<Utc>,
}

/// The simulator's truth and log beside the database, at one moment.
#[derive(Debug)]
pub struct Snapshot {
    pub truth: HashMap<String, JobTruth>,
    pub deliveries: Vec<DeliveryRecord>,
    pub jobs: HashMap<String, JobRow>,
    /// Oldest first.
    pub events: Vec<EventRow>,
    pub dead_letters: i64,
    pub disagreements: i64,
}

/// The job state a Sume status ends in (`None` for an in-flight status).
pub fn state_of(status: &str) -> Option<&'static str> {
    match Status::parse(status) {
        Status::Terminal(state) => Some(state.as_str()),
        Status::InFlight => None,
    }
}

impl Snapshot {
    pub fn events_of(&self, job_id: &str) -> Vec<&EventRow> {
        self.events.iter().filter(|e| e.job_id == job_id).collect()
    }

    pub fn deliveries_of(&self, job_id: &str) -> Vec<&DeliveryRecord> {
        self.deliveries
            .iter()
            .filter(|d| d.job_id == job_id)
            .collect()
    }

    /// What must hold at the end of every run (jobs with the wrong-secret fault aside, whose
    /// webhook can never be accepted):
    /// - the simulator made exactly the submitted jobs, all settled, none dropped;
    /// - every job's webhook was delivered (a wrong-secret job's given up after every attempt);
    /// - every delivery the simulator saw answered 2xx has its event in `sume.events`, under its
    ///   job;
    /// - every submitted job has its row, in the simulator's true final state, closed once;
    /// - no event waits unapplied for a job whose row exists;
    /// - nothing was stored for a wrongly signed delivery; no dead letter, no disagreement.
    pub fn check(&self, submitted: &[Submitted]) -> Result<(), String> {
        let mut problems: Vec<String> = Vec::new();
        self.check_jobs_made(submitted, &mut problems);
        self.check_acknowledged_deliveries_stored(&mut problems);
        let closes = self.check_events_applied(&mut problems);
        for s in submitted {
            self.check_job(&s.job_id, &closes, &mut problems);
        }
        if self.dead_letters != 0 {
            problems.push(format!("{} dead letters", self.dead_letters));
        }
        if self.disagreements != 0 {
            problems.push(format!("{} disagreements", self.disagreements));
        }
        if problems.is_empty() {
            return Ok(());
        }
        let total = problems.len();
        problems.truncate(15);
        if total > problems.len() {
            problems.push(format!("... {} more", total - problems.len()));
        }
        Err(problems.join("\n"))
    }

    /// The simulator made exactly the submitted jobs, each once.
    fn check_jobs_made(&self, submitted: &[Submitted], problems: &mut Vec<String>) {
        let ids: HashSet<&str> = submitted.iter().map(|s| s.job_id.as_str()).collect();
        if ids.len() != submitted.len() {
            problems.push(format!(
                "{} submissions made only {} distinct jobs",
                submitted.len(),
                ids.len()
            ));
        }
        for id in self.truth.keys() {
            if !ids.contains(id.as_str()) {
                problems.push(format!("the simulator has a job nobody submitted: {id}"));
            }
        }
    }

    /// Every delivery answered 2xx has its event stored, under its job.
    fn check_acknowledged_deliveries_stored(&self, problems: &mut Vec<String>) {
        let stored: HashMap<&str, &EventRow> = self
            .events
            .iter()
            .map(|e| (e.event_id.as_str(), e))
            .collect();
        for d in self.deliveries.iter().filter(|d| d.ok) {
            match stored.get(d.event_id.as_str()) {
                None => problems.push(format!(
                    "delivery {} of {} ({}, attempt {}) was answered {} but its event is not stored",
                    d.seq, d.job_id, d.event_id, d.attempt, d.answer
                )),
                Some(e) if e.job_id != d.job_id => problems.push(format!(
                    "event {} is stored under {}, delivered for {}",
                    d.event_id, e.job_id, d.job_id
                )),
                Some(_) => {}
            }
        }
    }

    /// No event waits unapplied for a job whose row exists; answers how many events closed
    /// each job.
    fn check_events_applied(&self, problems: &mut Vec<String>) -> HashMap<&str, usize> {
        let mut closes: HashMap<&str, usize> = HashMap::new();
        for e in &self.events {
            if !e.applied && self.jobs.contains_key(&e.job_id) {
                problems.push(format!(
                    "event {} of {} waits unapplied though the job row exists",
                    e.event_id, e.job_id
                ));
            }
            if e.outcome.as_deref() == Some("closed") {
                *closes.entry(e.job_id.as_str()).or_default() += 1;
            }
        }
        closes
    }

    /// One submitted job: settled, not dropped, its row in the simulator's final state, closed
    /// once by its terminal event (or by a poll, by no event); a wrongly signed one left to
    /// the poll.
    fn check_job(&self, id: &str, closes: &HashMap<&str, usize>, problems: &mut Vec<String>) {
        let Some(t) = self.truth.get(id) else {
            problems.push(format!("{id}: the simulator does not know it"));
            return;
        };
        if !t.webhook.settled {
            problems.push(format!("{id}: deliveries not settled yet"));
            return;
        }
        if t.faults.drop {
            problems.push(format!(
                "{id}: drew the drop fault, which this suite excludes"
            ));
        }
        let Some(row) = self.jobs.get(id) else {
            problems.push(format!("{id}: no job row"));
            return;
        };
        if t.faults.wrong_secret {
            self.check_wrongly_signed(id, t, row, problems);
            return;
        }
        if t.webhook.state != WebhookState::Delivered {
            problems.push(format!(
                "{id}: webhook {:?} after {} attempts",
                t.webhook.state, t.webhook.attempts
            ));
            return;
        }
        let want = state_of(&t.final_status);
        if Some(row.state.as_str()) != want {
            problems.push(format!(
                "{id}: state {} (sume_status {:?}), the simulator says {}",
                row.state, row.sume_status, t.final_status
            ));
            return;
        }
        if row.sume_status.as_deref() != Some(t.final_status.as_str()) {
            problems.push(format!(
                "{id}: sume_status {:?}, the simulator says {}",
                row.sume_status, t.final_status
            ));
        }
        let closed = closes.get(id).copied().unwrap_or(0);
        self.check_closed_once(id, t, row, closed, problems);
    }

    /// A wrongly signed job's webhook was given up, stored nothing and closed nothing.
    fn check_wrongly_signed(
        &self,
        id: &str,
        t: &JobTruth,
        row: &JobRow,
        problems: &mut Vec<String>,
    ) {
        if t.webhook.state != WebhookState::GaveUp {
            problems.push(format!(
                "{id}: wrongly signed, yet its webhook is {:?}",
                t.webhook.state
            ));
        }
        if !self.events_of(id).is_empty() {
            problems.push(format!("{id}: wrongly signed, yet an event is stored"));
        }
        if row.closed_by.as_deref() == Some("webhook") {
            problems.push(format!("{id}: wrongly signed, yet closed by a webhook"));
        }
    }

    /// Closed by its terminal event, which alone closed it, or by a poll and no event.
    fn check_closed_once(
        &self,
        id: &str,
        t: &JobTruth,
        row: &JobRow,
        closed: usize,
        problems: &mut Vec<String>,
    ) {
        match row.closed_by.as_deref() {
            Some("webhook") => {
                // The job names its closing event by key; the simulator by the id it sent.
                let sent = row.closed_event_id.as_deref().and_then(|key| {
                    self.events
                        .iter()
                        .find(|e| e.key == key)
                        .map(|e| e.event_id.as_str())
                });
                if sent != Some(t.event_id.as_str()) {
                    problems.push(format!(
                        "{id}: closed by event {:?}, its terminal event is {}",
                        row.closed_event_id, t.event_id
                    ));
                }
                if closed != 1 {
                    problems.push(format!("{id}: {closed} events closed it"));
                }
            }
            // Polling may only close a job its webhook had not closed yet.
            Some("poll") if closed == 0 => {}
            other => problems.push(format!("{id}: closed_by {other:?}, {closed} closes")),
        }
    }

    /// Jobs per final status, as the database holds them and as the simulator says.
    pub fn states(&self) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
        let mut stored = BTreeMap::new();
        for row in self.jobs.values() {
            *stored.entry(row.state.clone()).or_default() += 1;
        }
        let mut truth = BTreeMap::new();
        for t in self.truth.values() {
            let state = state_of(&t.final_status).unwrap_or("open").to_owned();
            *truth.entry(state).or_default() += 1;
        }
        (stored, truth)
    }
}

/// A round-robin TCP proxy: each accepted connection goes to the next backend, bytes copied
/// both ways. A backend that refuses is not retried: the client sees its connection close,
/// as it would behind a real balancer, and retries the delivery.
pub struct Proxy {
    pub addr: SocketAddr,
    connections: Arc<Vec<AtomicUsize>>,
    stop: CancellationToken,
}

impl Proxy {
    pub async fn start(backends: Vec<SocketAddr>) -> Proxy {
        assert!(!backends.is_empty(), "a proxy needs a backend");
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("proxy binds");
        let addr = listener.local_addr().unwrap();
        let connections: Arc<Vec<AtomicUsize>> =
            Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
        let stop = CancellationToken::new();
        let (counts, until) = (connections.clone(), stop.clone());
        tokio::spawn(async move {
            let mut next = 0;
            loop {
                let accepted = tokio::select! {
                    _ = until.cancelled() => break,
                    accepted = listener.accept() => accepted,
                };
                let Ok((mut inbound, _)) = accepted else {
                    continue;
                };
                let i = next % backends.len();
                next += 1;
                let (backend, counts, until) = (backends[i], counts.clone(), until.clone());
                tokio::spawn(async move {
                    let Ok(mut upstream) = TcpStream::connect(backend).await else {
                        return;
                    };
                    counts[i].fetch_add(1, Ordering::Relaxed);
                    let _ = inbound.set_nodelay(true);
                    let _ = upstream.set_nodelay(true);
                    tokio::select! {
                        _ = until.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut upstream) => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            connections,
            stop,
        }
    }

    /// Connections handed to each backend so far, in backend order.
    pub fn connections(&self) -> Vec<usize> {
        self.connections
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
