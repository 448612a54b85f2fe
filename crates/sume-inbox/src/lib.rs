#![warn(missing_docs)]
//! sume-inbox: receives Sume's signed webhooks into a PostgreSQL inbox and applies them to jobs
//! once the job rows commit, whichever comes first.
//!
//! The actors, each a task of its own, talk over mpsc channels and share one [`db::Store`]:
//! ingest writes verified deliveries in batches and answers only after the commit; attach
//! applies waiting events to jobs whose rows exist; the sweep asks Sume about stale inbox rows
//! and open jobs within the fleet-wide read budget. [`app::run`] wires them together;
//! [`decisions::job_fold`] is the one idempotent close every observation of a job goes through.
//!
//! The tools that rehearse the daemon (the simulator's command, the demo, signed test webhooks,
//! the example submit path) live in the `sume-dev` crate, not here: this crate is what ships.
//!
//! # Layout
//!
//! | folder | role | what is there |
//! |---|---|---|
//! | `config/` | every setting | `declared/`: each setting declared once (variable, flag, default, form, description), a file per concern; `read.rs`: the [`Config`] built from them; `rules.rs`: checks between two settings; `forms.rs`: reading durations, sizes, rates... |
//! | `app/` | the wiring | [`app::run`]: opens the database, starts every actor and both servers, shuts down in order |
//! | `actors/` | the long-lived tasks | `ingest.rs` (`ingest_pace.rs`: how long a writer collects), `attach/`, `sweep/` (`inbox_check.rs`: stale inbox rows; `poll.rs`: open jobs; `retention.rs`), `close_waiters.rs`, `heartbeat.rs`; `supervision.rs`: how each starts and is watched |
//! | `decisions/` | pure decisions | `delivery.rs` (a signed request to an event), `job_fold.rs` (the one close), `poll_decision.rs`, `inbox_verdict.rs`, `backoff.rs` |
//! | `http/` | the HTTP surfaces | `server.rs` + `conns.rs` + `timed_io.rs` + `timed_body.rs` (both ports' loop, caps and timeouts), `starting.rs` (what LISTEN_ADDR answers while the daemon starts), `webhook.rs` (+ `webhook_headers.rs`, `webhook_body.rs`), `probes.rs` (`/healthz`, `/readyz`), `misrouted.rs` (other paths and methods of the public port), `admin/` (the admin API), `console/` (the operator console) |
//! | `db/` | the database | one file per table mirroring `sql/queries/`, `statement.rs` (every statement), `connection.rs`, `pools.rs` (the pool and the ingest writers' connections), `migrate/` (the migrations and their lock waits), `clock.rs` (the statements' clock), `value_names.rs` (the closed sets of values the tables hold) |
//! | `sume_api/` | the way to Sume | `status_reader.rs`, `read_budget.rs` (the fleet-wide token bucket), `key_checks.rs` (when a 404 is a verdict), `answer.rs` |
//! | `operations/` | operator actions | `replay.rs`, `reconciliation.rs` |
//! | `metrics/` | `/metrics` | the Prometheus registry |
//! | `process/` | the process | runtime, logging, traces, sockets, signals, systemd, the instance's name |
//! | `cli/` | the commands | `serve.rs`, `admin.rs`, `reconcile.rs`, `healthcheck.rs`; `render.rs`: what they print |
//!
//! To change how long a stale inbox row waits before Sume is asked: `INBOX_GRACE`, declared in
//! `config/declared/sweep.rs` and used by `actors/sweep/inbox_check.rs`.

pub mod actors;
pub mod app;
pub mod cli;
pub mod config;
pub mod db;
pub mod decisions;
pub mod http;
pub mod metrics;
pub mod operations;
pub mod process;
pub mod sume_api;

pub use app::{run, Listeners};
pub use config::Config;
