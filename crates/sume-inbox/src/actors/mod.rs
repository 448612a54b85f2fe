//! The actors: the daemon's long-lived tasks, each a struct holding what it needs and a `run`
//! loop, talking over channels and sharing one [`crate::db::Store`].
//!
//! - [`ingest`]: the writers that store verified deliveries in batches and answer after the
//!   commit;
//! - [`attach`]: applies waiting events to jobs whose rows exist (LISTEN/NOTIFY, ingest's
//!   hints, a catch-up scan);
//! - [`sweep`]: the inbox check, the poll and retention, which ask Sume and clean up;
//! - [`close_waiters`]: wakes the requests waiting for a job to close (`?wait=`);
//! - [`heartbeat`]: writes this instance's heartbeat and per-minute counts for the fleet's
//!   picture;
//! - [`supervision`]: how every one of them is started and watched (one `Actor`
//!   trait, one `Tasks` to spawn on, each task's liveness for `/healthz`).

pub mod attach;
pub mod close_waiters;
pub mod heartbeat;
pub mod ingest;
mod ingest_pace;
pub mod supervision;
pub mod sweep;
