//! sume-bench: the reproducible benchmark behind `make bench`.
//!
//! One run measures, on the same machine and in the same minutes:
//! - sume-inbox (the release binary, a child process) under signed webhook load, as fast as it
//!   answers on 16/64/256 keep-alive connections and at a fixed rate;
//! - a per-request baseline ([`baseline`]): verify, one autocommit insert, answer;
//! - the PostgreSQL ceiling ([`ceiling`]): the same rows in 1000-row transactions;
//!
//! and fails when any server acknowledged an event it did not store ([`check`]).
//!
//! Beside ingest, [`stages`] measures attach (jobs registered at full speed over waiting events)
//! and one sweep pass beside a million closed jobs against one without. [`protocol`]
//! (`sume-bench protocol`) measures what unnamed statements cost against prepared ones.
//!
//! [`fleet`] (`sume-bench fleet`, part of `make bench`) loads 1, 2 and 4 instances on one
//! PostgreSQL, directly and through PgBouncer; [`soak`] (`make soak`) holds one daemon at a
//! fixed rate for minutes with attach, the sweep and retention running, and checks that
//! memory, latency and the tables stay flat.
//!
//! [`sweep_scale`] (`sume-bench sweep`, part of `make bench`) counts the reads the sweep
//! spends at Sume and how late it closes a job whose webhook was lost, list walks against one
//! read a job.
//!
//! [`chaos`] (`make chaos`) tries the daemon's promise against faults: `kill -9`, cut
//! connections, a locked inbox, a PostgreSQL crash, a three-instance race and stalled sockets.
//!
//! Modules: [`webhook`] makes signed deliveries, [`load`] sends them, [`stats`] counts,
//! [`stack`] runs PostgreSQL and the servers, [`report`] writes the table, [`run`] runs it all.

#![warn(missing_docs)]

pub mod baseline;
pub mod ceiling;
pub mod chaos;
pub mod check;
pub mod cli;
pub mod fleet;
pub mod load;
pub mod protocol;
pub mod report;
pub mod run;
pub mod soak;
pub mod stack;
pub mod stages;
pub mod stats;
pub mod sweep_scale;
pub mod webhook;

/// The benchmark's own named statements (`sql/*.sql` of this crate), one constant each.
pub mod sql {
    use sume_inbox::db::Statement;
    include!(concat!(env!("OUT_DIR"), "/statements.rs"));
}
