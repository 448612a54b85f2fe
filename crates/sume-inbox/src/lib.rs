#![warn(missing_docs)]
//! sume-inbox: receives Sume's signed webhooks into a PostgreSQL inbox and applies them to jobs
//! once the job rows commit, whichever comes first.
//!
//! The actors, each a task of its own:
//! - [`ingest`]: writes verified deliveries in batches and answers only after the commit;
//! - [`attach`]: applies waiting events to jobs whose rows exist (LISTEN/NOTIFY + catch-up);
//! - [`sweep`]: checks stale inbox rows and polls open jobs at Sume, within the fleet-wide
//!   [`budget`], and removes what retention allows (three services, three tasks);
//!
//! talking over mpsc channels and sharing one [`db::Store`]. [`app::run`] wires them together;
//! [`close`] is the one idempotent close every observation of a job goes through.
//!
//! The tools that rehearse the daemon (the simulator's command, the demo, signed test webhooks,
//! the example submit path) live in the `sume-dev` crate, not here: this crate is what ships.

pub mod app;
pub mod attach;
pub mod budget;
pub mod cli;
pub mod clock;
pub mod close;
pub mod config;
pub mod db;
pub mod delivery;
pub mod fd_limit;
pub mod fleet;
pub mod health;
pub mod http;
pub mod ingest;
pub mod listen;
pub mod metrics;
pub mod notify;
pub mod ops;
pub mod process;
pub mod ratelog;
pub mod reconcile;
pub mod secrets_from_files;
pub mod signal;
pub mod sweep;
pub mod telemetry;
pub mod waiters;

pub use app::{run, Listeners};
pub use config::Config;
