//! The example application's submit path: what an application does to start a Sume job for
//! one of its orders, written to be read and copied. The demo (`sume-dev demo`) and the
//! end-to-end tests drive it against the simulator; sume-inbox itself never calls it.
//!
//! # The race
//!
//! Creating a job is one call to Sume (`POST {api}/videos/generations` with
//! `Authorization: Bearer`, an `Idempotency-Key` and a `webhook_url`). Sume answers `202` with
//! the job id, and from that moment it may post the job's webhook to sume-inbox, for a short job
//! often before the application has finished its own work for the order (inserting the order,
//! charging it) and committed. A webhook that names a job the database does not know yet is not
//! an error: sume-inbox stores it in its inbox and applies it the moment the job's row commits.
//! The application's only duty is to register the job, once, with its order.
//!
//! # The two registration paths
//!
//! - [`SubmitClient::submit`], the recommended one: the job row goes into `sume.jobs` in the
//!   same transaction as the order (`public.orders` here), so order and job commit together or
//!   not at all, and the commit is what lets the waiting events attach.
//! - [`SubmitClient::submit_via_admin`]: the order commits on its own, then the job is registered
//!   through the daemon's admin API (`POST /v1/jobs`, see [`SubmitClient::register_via_admin`]),
//!   for an application that cannot write to the `sume` schema. Not atomic: a crash between the
//!   two leaves an order whose job sume-inbox does not know yet.
//!
//! The SQL below is the application's own (its `public.orders` table, created on first use
//! when missing) plus the one `insert into sume.jobs` an application adds to its transaction.
//! The client owns no pool of its own: the application's [`deadpool_postgres::Pool`] is passed
//! in.

use std::ops::RangeInclusive;
use std::time::Duration;

use deadpool_postgres::{Pool, PoolError};
use rand::Rng;
use reqwest::StatusCode;
use serde_json::Value;
use sume_wire::Secret;
use thiserror::Error;
use tokio::sync::OnceCell;

/// The application's order table, created on first use when it is missing.
const ORDERS_CREATE: &str = "create table if not exists public.orders (
    order_id text primary key,
    job_id   text not null,
    charged  boolean not null
)";
const ORDERS_INSERT: &str =
    "insert into public.orders (order_id, job_id, charged) values ($1, $2, false)";
const ORDERS_CHARGE: &str = "update public.orders set charged = true where order_id = $1";
const JOBS_INSERT: &str = "insert into sume.jobs (job_id, order_id, api_key) values ($1, $2, $3)
     on conflict do nothing";

/// Why a submission failed. Each variant names the step, so a caller can tell a refused create
/// call (no job exists) from a failed commit (the job exists at Sume, its row does not).
#[derive(Debug, Error)]
pub enum SubmitError {
    /// The request could not be sent or its answer not read (connection, timeout, body).
    #[error("{step}: {source}")]
    Http {
        step: &'static str,
        #[source]
        source: reqwest::Error,
    },
    /// The server answered, but not with what the step needs.
    #[error("{step} answered {status}: {body}")]
    Refused {
        step: &'static str,
        status: u16,
        body: String,
    },
    /// The create call answered 2xx without a job id.
    #[error("the create answer names no job id: {0}")]
    NoJobId(String),
    /// The admin API already holds this job id with another order or key.
    #[error("job {job_id} is registered with another order or key: {existing}")]
    Conflict { job_id: String, existing: Value },
    #[error("no database connection: {0}")]
    Pool(#[from] PoolError),
    #[error("{statement}: {source}")]
    Db {
        statement: &'static str,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("bad submit configuration: {0}")]
    Config(String),
}

fn db(statement: &'static str) -> impl FnOnce(tokio_postgres::Error) -> SubmitError {
    move |source| SubmitError::Db { statement, source }
}

/// Where and how to create jobs.
#[derive(Debug, Clone)]
pub struct SubmitConfig {
    /// Sume's API base, e.g. `https://www.sume.so/api/v1` (no trailing slash needed).
    pub api_url: String,
    /// The key sent as `Authorization: Bearer`.
    pub api_key: Secret,
    /// The key's name in `SUME_API_KEYS`: what `sume.jobs.api_key` records, never the key.
    pub api_key_name: String,
    /// Where Sume posts this job's webhook (the daemon's `/webhooks/sume`); `None` leaves it to
    /// the integration's default.
    pub webhook_url: Option<String>,
    /// The create endpoint below `api_url`.
    pub endpoint: String,
    /// The slow work after the `202` (the "charge"), drawn uniformly per submission; the
    /// transaction holding the job row stays open that long.
    pub slow_work: RangeInclusive<Duration>,
    /// Timeout of one HTTP request.
    pub request_timeout: Duration,
    /// Attempts of the create call; transport errors, 429 and 5xx are retried with the same
    /// `Idempotency-Key`, so a retry never makes a second job.
    pub create_attempts: u32,
}

impl SubmitConfig {
    /// Video generations, no slow work, a 30 s timeout and three create attempts.
    pub fn new(
        api_url: impl Into<String>,
        api_key_name: impl Into<String>,
        api_key: Secret,
    ) -> Self {
        SubmitConfig {
            api_url: api_url.into(),
            api_key,
            api_key_name: api_key_name.into(),
            webhook_url: None,
            endpoint: "/videos/generations".to_owned(),
            slow_work: Duration::ZERO..=Duration::ZERO,
            request_timeout: Duration::from_secs(30),
            create_attempts: 3,
        }
    }

    pub fn with_webhook_url(mut self, url: impl Into<String>) -> Self {
        self.webhook_url = Some(url.into());
        self
    }

    pub fn with_slow_work(mut self, range: RangeInclusive<Duration>) -> Self {
        self.slow_work = range;
        self
    }
}

/// One order to submit.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The application's order id; also the create call's `Idempotency-Key`, so submitting the
    /// same order twice answers the same job.
    pub order_id: String,
    /// The generation request (`prompt`, ...): a JSON object. `webhook_url` and `sim` are added
    /// by the client.
    pub request: Value,
    /// The simulator's per-job overrides (`{"early": true}`, `{"outcome": "failed"}`, ...),
    /// passed through as the body's `"sim"`; the real Sume has no such field.
    pub sim: Option<Value>,
}

impl Submission {
    pub fn new(order_id: impl Into<String>, prompt: &str) -> Submission {
        Submission {
            order_id: order_id.into(),
            request: serde_json::json!({ "prompt": prompt }),
            sim: None,
        }
    }

    pub fn with_sim(mut self, sim: Value) -> Submission {
        self.sim = Some(sim);
        self
    }
}

/// The daemon's admin API.
#[derive(Debug, Clone)]
pub struct AdminApi {
    /// Its base, e.g. `http://127.0.0.1:9090`.
    pub url: String,
    /// `ADMIN_TOKEN`, when the daemon requires one.
    pub token: Option<Secret>,
}

impl AdminApi {
    pub fn new(url: impl Into<String>) -> AdminApi {
        AdminApi {
            url: url.into(),
            token: None,
        }
    }
}

/// How a submitted job was registered.
#[derive(Debug, Clone, PartialEq)]
pub enum Registration {
    /// In the order's transaction; `inserted` is false when the row was already there.
    InTransaction { inserted: bool },
    /// Through `POST /v1/jobs`: `created` (201) or a repeat (200), with the job as the daemon
    /// answered it, waiting events already applied.
    Admin { created: bool, job: Value },
}

/// A job created at Sume and registered with its order.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    pub job_id: String,
    pub order_id: String,
    /// How long the slow work held the order's transaction open.
    pub slow_work: Duration,
    pub registration: Registration,
}

/// Submits jobs for one API key. Share it behind an `Arc`.
pub struct SubmitClient {
    http: reqwest::Client,
    pool: Pool,
    config: SubmitConfig,
    orders_ready: OnceCell<()>,
}

impl std::fmt::Debug for SubmitClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubmitClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SubmitClient {
    /// A client that writes through `pool` (the application's own connections).
    pub fn new(config: SubmitConfig, pool: Pool) -> Result<SubmitClient, SubmitError> {
        if config.slow_work.start() > config.slow_work.end() {
            return Err(SubmitError::Config(
                "slow_work: the minimum is above the maximum".to_owned(),
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .build()
            .map_err(|source| SubmitError::Http {
                step: "building the HTTP client",
                source,
            })?;
        Ok(SubmitClient {
            http,
            pool,
            config,
            orders_ready: OnceCell::new(),
        })
    }

    pub fn config(&self) -> &SubmitConfig {
        &self.config
    }

    /// Creates the job, does the slow work, and commits order and job row together.
    pub async fn submit(&self, submission: &Submission) -> Result<Submitted, SubmitError> {
        let job_id = self.create_job(submission).await?;
        let (slow_work, inserted) = self
            .commit_order(&submission.order_id, &job_id, true)
            .await?;
        Ok(Submitted {
            job_id,
            order_id: submission.order_id.clone(),
            slow_work,
            registration: Registration::InTransaction { inserted },
        })
    }

    /// Creates the job, commits the order (slow work included) on its own, then registers the
    /// job through the admin API. Order and job row are not atomic on this path: a crash between
    /// the two leaves an order whose job the daemon does not know yet.
    pub async fn submit_via_admin(
        &self,
        admin: &AdminApi,
        submission: &Submission,
    ) -> Result<Submitted, SubmitError> {
        let job_id = self.create_job(submission).await?;
        let (slow_work, _) = self
            .commit_order(&submission.order_id, &job_id, false)
            .await?;
        let registration = self
            .register_via_admin(admin, &job_id, &submission.order_id)
            .await?;
        Ok(Submitted {
            job_id,
            order_id: submission.order_id.clone(),
            slow_work,
            registration,
        })
    }

    /// The create call alone: answers the job id of the `202`. Retries what is worth retrying
    /// with the same `Idempotency-Key` (the order id).
    pub async fn create_job(&self, submission: &Submission) -> Result<String, SubmitError> {
        let url = format!(
            "{}/{}",
            self.config.api_url.trim_end_matches('/'),
            self.config.endpoint.trim_start_matches('/')
        );
        let mut body = match &submission.request {
            Value::Object(fields) => fields.clone(),
            Value::Null => serde_json::Map::new(),
            _ => {
                return Err(SubmitError::Config(
                    "the generation request must be a JSON object".to_owned(),
                ))
            }
        };
        if let Some(webhook_url) = &self.config.webhook_url {
            body.insert("webhook_url".to_owned(), webhook_url.clone().into());
        }
        if let Some(sim) = &submission.sim {
            body.insert("sim".to_owned(), sim.clone());
        }
        let attempts = self.config.create_attempts.max(1);
        let mut attempt = 1;
        loop {
            let sent = self
                .http
                .post(&url)
                .bearer_auth(self.config.api_key.expose())
                .header("idempotency-key", &submission.order_id)
                .json(&body)
                .send()
                .await;
            let retry_in = match sent {
                Ok(response) if response.status().is_success() => {
                    let answer: Value =
                        response.json().await.map_err(|source| SubmitError::Http {
                            step: "reading the create answer",
                            source,
                        })?;
                    return job_id_of(&answer)
                        .ok_or_else(|| SubmitError::NoJobId(answer.to_string()));
                }
                Ok(response) if retryable(response.status()) && attempt < attempts => {
                    retry_after(&response).unwrap_or(Duration::from_millis(200) * attempt)
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let body = response.text().await.unwrap_or_default();
                    return Err(SubmitError::Refused {
                        step: "the create call",
                        status,
                        body,
                    });
                }
                Err(_) if attempt < attempts => Duration::from_millis(200) * attempt,
                Err(source) => {
                    return Err(SubmitError::Http {
                        step: "the create call",
                        source,
                    })
                }
            };
            tokio::time::sleep(retry_in).await;
            attempt += 1;
        }
    }

    /// Registers `job_id` through `POST {admin}/v1/jobs`, under this client's key name.
    pub async fn register_via_admin(
        &self,
        admin: &AdminApi,
        job_id: &str,
        order_id: &str,
    ) -> Result<Registration, SubmitError> {
        let mut request = self
            .http
            .post(format!("{}/v1/jobs", admin.url.trim_end_matches('/')))
            .json(&serde_json::json!({
                "job_id": job_id,
                "order_id": order_id,
                "api_key": self.config.api_key_name,
            }));
        if let Some(token) = &admin.token {
            request = request.bearer_auth(token.expose());
        }
        let step = "the admin registration";
        let response = request
            .send()
            .await
            .map_err(|source| SubmitError::Http { step, source })?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|source| SubmitError::Http { step, source })?;
        let json = || serde_json::from_str::<Value>(&body).unwrap_or(Value::Null);
        match status {
            StatusCode::CREATED | StatusCode::OK => Ok(Registration::Admin {
                created: status == StatusCode::CREATED,
                job: json(),
            }),
            StatusCode::CONFLICT => Err(SubmitError::Conflict {
                job_id: job_id.to_owned(),
                existing: json()["job"].clone(),
            }),
            _ => Err(SubmitError::Refused {
                step,
                status: status.as_u16(),
                body,
            }),
        }
    }

    /// The slow part: one transaction inserts the order, charges it, and (when asked) inserts
    /// the job row. Answers the time spent charging and whether the job row was new.
    async fn commit_order(
        &self,
        order_id: &str,
        job_id: &str,
        with_job_row: bool,
    ) -> Result<(Duration, bool), SubmitError> {
        self.ensure_orders_table().await?;
        let slow_work = self.draw_slow_work();
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await.map_err(db("orders_begin"))?;
        tx.execute(ORDERS_INSERT, &[&order_id, &job_id])
            .await
            .map_err(db("orders_insert"))?;
        tokio::time::sleep(slow_work).await; // charging the card
        tx.execute(ORDERS_CHARGE, &[&order_id])
            .await
            .map_err(db("orders_charge"))?;
        let inserted = if with_job_row {
            let n = tx
                .execute(
                    JOBS_INSERT,
                    &[&job_id, &order_id, &self.config.api_key_name],
                )
                .await
                .map_err(db("jobs_insert"))?;
            n == 1
        } else {
            false
        };
        tx.commit().await.map_err(db("orders_commit"))?;
        Ok((slow_work, inserted))
    }

    /// Creates `public.orders` if it is missing; once per client.
    pub async fn ensure_orders_table(&self) -> Result<(), SubmitError> {
        self.orders_ready
            .get_or_try_init(|| async {
                let client = self.pool.get().await?;
                match client.batch_execute(ORDERS_CREATE).await {
                    // Two sessions running `create table if not exists` at once: one wins the
                    // race on the catalog, the other's table exists all the same.
                    Err(e)
                        if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) =>
                    {
                        Ok(())
                    }
                    other => other.map_err(db("orders_create")),
                }
            })
            .await
            .map(|_| ())
    }

    fn draw_slow_work(&self) -> Duration {
        let (min, max) = (*self.config.slow_work.start(), *self.config.slow_work.end());
        if max <= min {
            return min;
        }
        let span = (max - min).as_micros() as u64;
        min + Duration::from_micros(rand::thread_rng().gen_range(0..=span))
    }
}

/// The job id of a create answer: `job.id`, else a top-level `job_id`.
fn job_id_of(answer: &Value) -> Option<String> {
    answer["job"]["id"]
        .as_str()
        .or_else(|| answer["job_id"].as_str())
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

fn retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// A `Retry-After` in seconds, capped so a test or a demo never stalls for long.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let secs: u64 = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs.min(30)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_id_comes_from_either_field() {
        let nested = serde_json::json!({"job": {"id": "job_1", "status": "queued"}});
        assert_eq!(job_id_of(&nested).as_deref(), Some("job_1"));
        let flat = serde_json::json!({"job_id": "job_2"});
        assert_eq!(job_id_of(&flat).as_deref(), Some("job_2"));
        assert_eq!(job_id_of(&serde_json::json!({"job": {"id": ""}})), None);
    }

    #[test]
    fn only_rate_limits_and_server_errors_are_retried() {
        assert!(retryable(StatusCode::TOO_MANY_REQUESTS));
        assert!(retryable(StatusCode::BAD_GATEWAY));
        assert!(!retryable(StatusCode::UNAUTHORIZED));
        assert!(!retryable(StatusCode::BAD_REQUEST));
    }
}
