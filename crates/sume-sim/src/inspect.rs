//! The simulator's own endpoints under `/sim/`: the truth about jobs, the logs, the counters,
//! and the live fault settings. No key is needed; they are for tests and operators.
//!
//! - `GET /sim/healthz`
//! - `GET /sim/jobs[?key=&status=]`, `GET /sim/jobs/{id}`: [`JobTruth`]s
//! - `GET /sim/deliveries[?job_id=&event_id=]`: every webhook attempt
//! - `GET /sim/requests[?job_id=&key=]`: every API request
//! - `GET /sim/stats`: counters per key and per job, max in-flight reads of one job
//! - `GET /sim/faults`, `PATCH /sim/faults`: read or change fault probabilities at run time

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use crate::api::error::ApiError;
use crate::app::Shared;
use crate::faults::Faults;
use crate::job::{Job, JobTruth};
use crate::journal::{DeliveryRecord, RequestRecord};
use crate::ratelimit::WindowCount;
use crate::stats::{KeyCount, PollCount};

pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/sim/healthz", get(healthz))
        .route("/sim/jobs", get(jobs))
        .route("/sim/jobs/{id}", get(job))
        .route("/sim/deliveries", get(deliveries))
        .route("/sim/requests", get(requests))
        .route("/sim/stats", get(stats))
        .route("/sim/faults", get(faults).patch(patch_faults))
}

/// `GET /sim/jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsAnswer {
    /// How many jobs matched the filter (the length of `jobs`).
    pub count: usize,
    /// The matching jobs, in no particular order.
    pub jobs: Vec<JobTruth>,
}

/// `GET /sim/deliveries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveriesAnswer {
    /// How many kept attempts matched the filter (the length of `deliveries`).
    pub count: usize,
    /// Entries the bounded log has let go (0 unless `--log-capacity` was exceeded).
    pub dropped: u64,
    /// The matching attempts, oldest first.
    pub deliveries: Vec<DeliveryRecord>,
}

/// `GET /sim/requests`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestsAnswer {
    /// How many kept requests matched the filter (the length of `requests`).
    pub count: usize,
    /// Entries the bounded log has let go (0 unless `--log-capacity` was exceeded), whatever
    /// the filter.
    pub dropped: u64,
    /// The matching requests, oldest first.
    pub requests: Vec<RequestRecord>,
}

/// One key in `GET /sim/stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyStats {
    /// The member owning the key.
    pub member: String,
    /// The member's workspace.
    pub workspace: String,
    /// What the key's requests were answered, over the simulator's life (flattened into this
    /// object in JSON).
    #[serde(flatten)]
    pub counts: KeyCount,
    /// The most reads (allowed ones) the key made in one window.
    pub max_reads_per_window: u32,
    /// The most creates (allowed ones) the key made in one window.
    pub max_creates_per_window: u32,
    /// Every window the key was active in, oldest first.
    pub windows: Vec<WindowCount>,
}

/// `GET /sim/stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimStats {
    /// Jobs created since the simulator started.
    pub jobs: usize,
    /// Jobs by the status a read would answer now.
    pub jobs_by_status: BTreeMap<String, u64>,
    /// Jobs by where their webhook stands, keyed by [`WebhookState`](crate::WebhookState) in
    /// its JSON spelling (`delivered`, `gave_up`, ...).
    pub webhooks_by_state: BTreeMap<String, u64>,
    /// Jobs with a delivery (or a duplicate, or a late event) still to come.
    pub unsettled_jobs: u64,
    /// Webhook attempts ever made, including any the bounded log has let go.
    pub delivery_attempts: u64,
    /// API requests ever answered (under `/v1` or `/api/v1`, to a known route), including any
    /// the bounded log has let go.
    pub requests: u64,
    /// Requests with a missing or unknown key.
    pub unauthorized_requests: u64,
    /// The most reads of one job in flight at once, over all jobs, and that job.
    pub max_concurrent_status_reads: u64,
    /// The job that saw `max_concurrent_status_reads` first; `None` before any read.
    pub max_concurrent_status_reads_job: Option<String>,
    /// Every configured key by name, including keys that made no request.
    pub keys: BTreeMap<String, KeyStats>,
    /// Reads per job id.
    pub polls: BTreeMap<String, PollCount>,
}

fn truth(app: &Shared, job: &Job, now: Instant) -> JobTruth {
    let polls = app.polls.get(&job.id);
    job.truth(now, polls.reads, polls.max_in_flight)
}

async fn healthz(State(app): State<Shared>) -> Json<Value> {
    Json(serde_json::json!({ "status": "ok", "jobs": app.store.len() }))
}

#[derive(Debug, Deserialize)]
struct JobsFilter {
    key: Option<String>,
    status: Option<String>,
}

async fn jobs(State(app): State<Shared>, Query(f): Query<JobsFilter>) -> Json<JobsAnswer> {
    let now = Instant::now();
    let jobs: Vec<JobTruth> = app
        .store
        .all()
        .iter()
        .filter(|j| f.key.as_ref().is_none_or(|k| &j.owner.name == k))
        .filter(|j| f.status.as_deref().is_none_or(|s| j.status(now) == s))
        .map(|j| truth(&app, j, now))
        .collect();
    Json(JobsAnswer {
        count: jobs.len(),
        jobs,
    })
}

async fn job(
    State(app): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<JobTruth>, ApiError> {
    let job = app
        .store
        .get(&id)
        .ok_or_else(|| ApiError::not_found("job"))?;
    Ok(Json(truth(&app, &job, Instant::now())))
}

#[derive(Debug, Deserialize)]
struct DeliveriesFilter {
    job_id: Option<String>,
    event_id: Option<String>,
}

async fn deliveries(
    State(app): State<Shared>,
    Query(f): Query<DeliveriesFilter>,
) -> Json<DeliveriesAnswer> {
    let (deliveries, dropped) = app.deliveries.select(|d| {
        f.job_id.as_ref().is_none_or(|id| &d.job_id == id)
            && f.event_id.as_ref().is_none_or(|id| &d.event_id == id)
    });
    Json(DeliveriesAnswer {
        count: deliveries.len(),
        dropped,
        deliveries,
    })
}

#[derive(Debug, Deserialize)]
struct RequestsFilter {
    job_id: Option<String>,
    key: Option<String>,
}

async fn requests(
    State(app): State<Shared>,
    Query(f): Query<RequestsFilter>,
) -> Json<RequestsAnswer> {
    let (requests, dropped) = app.requests.select(|r| {
        f.job_id
            .as_ref()
            .is_none_or(|id| r.job_id.as_ref() == Some(id))
            && f.key.as_ref().is_none_or(|k| r.key.as_ref() == Some(k))
    });
    Json(RequestsAnswer {
        count: requests.len(),
        dropped,
        requests,
    })
}

async fn stats(State(app): State<Shared>) -> Json<SimStats> {
    let now = Instant::now();
    let mut jobs_by_status = BTreeMap::new();
    let mut webhooks_by_state = BTreeMap::new();
    let mut unsettled_jobs = 0;
    let all = app.store.all();
    for job in &all {
        *jobs_by_status
            .entry(job.status(now).to_owned())
            .or_insert(0) += 1;
        let progress = job.progress();
        let state = serde_json::to_value(progress.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        *webhooks_by_state.entry(state).or_insert(0) += 1;
        unsettled_jobs += u64::from(!progress.settled);
    }
    let (counts, unauthorized_requests) = app.key_counts.snapshot();
    let keys = app
        .keys
        .callers()
        .iter()
        .map(|caller| {
            let windows = app.limiter.windows(&caller.name);
            let stats = KeyStats {
                member: caller.member.clone(),
                workspace: caller.workspace.clone(),
                counts: counts.get(&caller.name).cloned().unwrap_or_default(),
                max_reads_per_window: windows.iter().map(|w| w.reads).max().unwrap_or(0),
                max_creates_per_window: windows.iter().map(|w| w.creates).max().unwrap_or(0),
                windows,
            };
            (caller.name.clone(), stats)
        })
        .collect();
    let (max_concurrent_status_reads, max_concurrent_status_reads_job) = app.polls.max();
    Json(SimStats {
        jobs: all.len(),
        jobs_by_status,
        webhooks_by_state,
        unsettled_jobs,
        delivery_attempts: app.deliveries.total(),
        requests: app.requests.total(),
        unauthorized_requests,
        max_concurrent_status_reads,
        max_concurrent_status_reads_job,
        keys,
        polls: app.polls.snapshot(),
    })
}

async fn faults(State(app): State<Shared>) -> Json<Faults> {
    Json(app.faults())
}

/// Body: any subset of the fields `GET /sim/faults` shows, e.g. `{"status_429": 1.0}`.
async fn patch_faults(
    State(app): State<Shared>,
    Json(patch): Json<Value>,
) -> Result<Json<Faults>, ApiError> {
    app.patch_faults(&patch)
        .map(Json)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", e.to_string()))
}
