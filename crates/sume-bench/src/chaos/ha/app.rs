//! Sume and an application beside the signed load of the failover scenarios: the simulator (in
//! this process) runs jobs and sends their signed webhooks to the daemon; the application
//! creates a job at the simulator every few milliseconds and registers it in `sume.jobs`
//! through the same multi-host URL as the daemon, retrying (on a fresh connection) while the
//! database is away. Some jobs' webhooks are dropped by the simulator, so that only the sweep's
//! poll closes them.
//!
//! [`judge`] compares the jobs in the database with the simulator's truth.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::json;
use sume_sim::{JobsAnswer, RunningSim, Secret, SimConfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::sql;

/// The API key's name in `SUME_API_KEYS` and `sume.jobs.api_key`.
pub(super) const KEY_NAME: &str = "chaos";
/// The key itself, as the simulator knows it.
pub(super) const KEY_SECRET: &str = "sk_chaos_key";

/// Starts the simulator, signing webhooks with the run's secret.
pub(super) async fn start_sim(secret: &str) -> anyhow::Result<RunningSim> {
    let mut config = SimConfig::for_tests().with_key(KEY_NAME, KEY_SECRET, "mem_chaos", "ws_chaos");
    config.webhook_secrets = vec![Secret::new(secret)];
    config.log_capacity = 100_000;
    RunningSim::start(config)
        .await
        .context("starting the simulator")
}

/// The daemon's settings for talking to the simulator (the sweep every second, a poll 2 s
/// after registration when `poll` and never within the run otherwise).
pub(super) fn sume_settings(
    sim: &RunningSim,
    sume_timeout: Duration,
    poll: bool,
) -> Vec<(&'static str, String)> {
    let timeout = humantime::format_duration(sume_timeout).to_string();
    let lease = humantime::format_duration(sume_timeout * 2 + Duration::from_secs(1)).to_string();
    vec![
        ("SUME_API_URL", sim.api_url()),
        ("SUME_API_KEYS", format!("{KEY_NAME}:{KEY_SECRET}")),
        ("SUME_TIMEOUT", timeout),
        ("SWEEP_LEASE", lease),
        ("SWEEP_INTERVAL", "1s".into()),
        ("POLL_AFTER", if poll { "2s" } else { "1h" }.into()),
        ("POLL_MAX_INTERVAL", if poll { "2s" } else { "1h" }.into()),
        ("SUME_READ_RATE", "1000/1s".into()),
    ]
}

/// A list of job ids shared with the application's task.
type Ids = Arc<Mutex<Vec<String>>>;

/// The application while it runs.
pub(super) struct App {
    stop: CancellationToken,
    task: JoinHandle<()>,
    created: Arc<Mutex<Vec<String>>>,
    registered: Arc<Mutex<Vec<String>>>,
}

impl App {
    /// Creates a job every `every` at the simulator (`api_url`), its webhook to `webhook`
    /// (dropped for one job in `drop_every`, when given), and registers it on `db_url`.
    pub(super) fn start(
        api_url: String,
        webhook: SocketAddr,
        db_url: String,
        every: Duration,
        drop_every: Option<u64>,
    ) -> App {
        let stop = CancellationToken::new();
        let created = Arc::new(Mutex::new(Vec::new()));
        let registered = Arc::new(Mutex::new(Vec::new()));
        let lists = (created.clone(), registered.clone());
        let s = stop.clone();
        let hook = format!("http://{webhook}/webhooks/sume");
        let task = tokio::spawn(async move {
            run(api_url, hook, db_url, every, drop_every, s, lists).await;
        });
        App {
            stop,
            task,
            created,
            registered,
        }
    }

    /// Stops creating; answers every job created, and those whose registration committed.
    pub(super) async fn finish(self) -> (Vec<String>, Vec<String>) {
        self.stop.cancel();
        let _ = self.task.await;
        let take = |l: &Mutex<Vec<String>>| std::mem::take(&mut *l.lock().expect("list"));
        (take(&self.created), take(&self.registered))
    }
}

async fn run(
    api_url: String,
    hook: String,
    db_url: String,
    every: Duration,
    drop_every: Option<u64>,
    stop: CancellationToken,
    (created, registered): (Ids, Ids),
) {
    let http = reqwest::Client::new();
    let mut db: Option<tokio_postgres::Client> = None;
    let mut unregistered: Vec<String> = Vec::new();
    let mut ticker = tokio::time::interval(every);
    let mut n = 0u64;
    while !stop.is_cancelled() {
        ticker.tick().await;
        n += 1;
        let dropped = drop_every.is_some_and(|d| n.is_multiple_of(d));
        let body = json!({"prompt": "chaos", "webhook_url": hook,
                          "sim": {"duration_ms": 30, "drop": dropped}});
        if let Ok(Ok(r)) = tokio::time::timeout(
            Duration::from_secs(2),
            http.post(format!("{api_url}/videos/generations"))
                .bearer_auth(KEY_SECRET)
                .json(&body)
                .send(),
        )
        .await
        {
            if let Ok(v) = r.json::<serde_json::Value>().await {
                if let Some(id) = v["job_id"].as_str() {
                    unregistered.push(id.to_owned());
                    created.lock().expect("created").push(id.to_owned());
                }
            }
        }
        if !unregistered.is_empty() && register(&mut db, &db_url, &unregistered).await {
            registered
                .lock()
                .expect("registered")
                .append(&mut unregistered);
        }
    }
}

/// Registers `ids` in one statement; on any failure the connection is dropped (the next try
/// opens another: the URL finds the writable node).
async fn register(db: &mut Option<tokio_postgres::Client>, url: &str, ids: &[String]) -> bool {
    let bound = Duration::from_secs(2);
    if db.as_ref().is_none_or(|c| c.is_closed()) {
        *db = match tokio::time::timeout(bound, crate::stages::client(url)).await {
            Ok(Ok(c)) => Some(c),
            _ => return false,
        };
    }
    let client = db.as_ref().expect("connected");
    let done = tokio::time::timeout(
        bound,
        client.execute(sql::JOBS_REGISTER_MANY.sql(), &[&ids, &KEY_NAME]),
    )
    .await;
    if !matches!(done, Ok(Ok(_))) {
        *db = None;
        return false;
    }
    true
}

/// The jobs in the database beside the simulator's truth.
#[derive(Debug, Clone, Default)]
pub(super) struct Judgement {
    /// Rows of the key in the database.
    pub(super) registered: usize,
    /// Rows the simulator ended but that are open here.
    pub(super) open_though_ended: Vec<String>,
    /// Rows closed in another state than the simulator's.
    pub(super) wrong_state: Vec<String>,
    /// Closed rows by what closed them (`webhook`, `poll`, `give_up`).
    pub(super) closed_by: HashMap<String, usize>,
}

/// Reads the simulator's jobs and the database's rows of the key.
pub(super) async fn judge(sim: &RunningSim, db_url: &str) -> anyhow::Result<Judgement> {
    let truth: JobsAnswer = reqwest::get(sim.sim_url("jobs"))
        .await?
        .error_for_status()?
        .json()
        .await
        .context("the simulator's jobs")?;
    let truth: HashMap<&str, &sume_sim::JobTruth> =
        truth.jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    let db = crate::stages::client(db_url).await?;
    let rows = db.query(sql::JOBS_OF_KEY.sql(), &[&KEY_NAME]).await?;
    let mut j = Judgement {
        registered: rows.len(),
        ..Judgement::default()
    };
    for row in rows {
        let (id, state): (String, String) = (row.get(0), row.get(1));
        let closed_by: Option<String> = row.get(3);
        let Some(t) = truth.get(id.as_str()) else {
            continue;
        };
        let want = sume_wire::Status::parse(&t.final_status)
            .terminal()
            .map(|s| s.as_str().to_owned());
        match (state.as_str(), t.terminal) {
            ("open", true) => j.open_though_ended.push(id),
            ("open", false) => {}
            (closed, _) => {
                *j.closed_by
                    .entry(closed_by.unwrap_or_default())
                    .or_default() += 1;
                if want.as_deref() != Some(closed) {
                    j.wrong_state.push(id);
                }
            }
        }
    }
    Ok(j)
}
