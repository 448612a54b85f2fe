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
//!
//! # Where to read
//!
//! This file is the recommended path, top to bottom: [`SubmitClient::submit`] creates the job,
//! then one transaction inserts the order, does the slow work and inserts the job row. The create
//! call and its retries are in `create.rs`, the inputs ([`SubmitConfig`], [`Submission`]) in
//! `config.rs`, and the admin-API path in `admin.rs`.

use std::time::Duration;

use deadpool_postgres::{Pool, PoolError};
use rand::Rng;
use serde_json::Value;
use thiserror::Error;
use tokio::sync::OnceCell;

mod admin;
mod config;
mod create;

pub use admin::AdminApi;
pub use config::{Submission, SubmitConfig};

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
        /// The step that failed, e.g. "the create call" or "the admin registration".
        step: &'static str,
        /// What reqwest reported.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered, but not with what the step needs. For the create call this comes
    /// after the retries for a 429 or 5xx, and at once for any other status (a 401 for a wrong
    /// key, a 400 for a bad request).
    #[error("{step} answered {status}: {body}")]
    Refused {
        /// The step that was refused, e.g. "the create call".
        step: &'static str,
        /// The HTTP status of the answer.
        status: u16,
        /// The answer's body as text, for the log (Sume's error envelope, as a rule).
        body: String,
    },
    /// The create call answered 2xx without a job id.
    #[error("the create answer names no job id: {0}")]
    NoJobId(String),
    /// The admin API already holds this job id with another order or key (it answered `409`).
    /// Repeating the call cannot succeed: compare `existing` with what was sent.
    #[error("job {job_id} is registered with another order or key: {existing}")]
    Conflict {
        /// The job this submission tried to register.
        job_id: String,
        /// The registration the daemon holds, as it answered it (`null` when it sent none).
        existing: Value,
    },
    /// No connection could be taken from the application's pool.
    #[error("no database connection: {0}")]
    Pool(#[from] PoolError),
    /// A statement of the order's transaction failed, after the job was created at Sume: the
    /// transaction rolls back, so neither the order nor the job row is stored. Submitting the
    /// same order again answers the same job (the order id is the `Idempotency-Key`).
    #[error("{statement}: {source}")]
    Db {
        /// Which statement: `orders_create`, `orders_begin`, `orders_insert`, `orders_charge`,
        /// `jobs_insert` or `orders_commit`.
        statement: &'static str,
        /// What PostgreSQL reported.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The [`SubmitConfig`] or [`Submission`] cannot be used; nothing was sent.
    #[error("bad submit configuration: {0}")]
    Config(String),
}

fn db(statement: &'static str) -> impl FnOnce(tokio_postgres::Error) -> SubmitError {
    move |source| SubmitError::Db { statement, source }
}

/// How a submitted job was registered.
#[derive(Debug, Clone, PartialEq)]
pub enum Registration {
    /// In the order's transaction; `inserted` is false when the row was already there.
    InTransaction {
        /// Whether this call inserted the job row.
        inserted: bool,
    },
    /// Through `POST /v1/jobs`: `created` (201) or a repeat (200), with the job as the daemon
    /// answered it, waiting events already applied.
    Admin {
        /// Whether the daemon answered `201` (new) rather than `200` (already registered).
        created: bool,
        /// The job as the daemon answered it (`null` when the body was not JSON).
        job: Value,
    },
}

/// A job created at Sume and registered with its order.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// Sume's id of the job, from the `202`.
    pub job_id: String,
    /// The order it was submitted for ([`Submission::order_id`]).
    pub order_id: String,
    /// How long the slow work held the order's transaction open.
    pub slow_work: Duration,
    /// Which path registered the job with sume-inbox, and what it found.
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

    /// The configuration the client was made with; clone it to make a variant.
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
                    // race on the catalog, the other's table exists all the same. The loser
                    // hears of it as a unique violation in the catalog, or as the table's row
                    // type already existing, depending on where the two meet.
                    Err(e)
                        if [
                            &tokio_postgres::error::SqlState::UNIQUE_VIOLATION,
                            &tokio_postgres::error::SqlState::DUPLICATE_OBJECT,
                            &tokio_postgres::error::SqlState::DUPLICATE_TABLE,
                        ]
                        .iter()
                        .any(|c| e.code() == Some(c)) =>
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
