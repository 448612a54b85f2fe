//! The sweep: four services that settle what webhooks alone leave open, each a task of its own.
//!
//! - [`InboxCheck`] (`inbox_check.rs`): events that waited longer than `INBOX_GRACE` with no
//!   job row are looked up at Sume with every key; 404 from every key the fleet holds sets
//!   them aside as not ours, a key that can read the job makes it an orphan (kept, counted, logged). The verdict
//!   itself is [`crate::decisions::inbox_verdict`].
//! - [`Poll`] (`poll.rs`, its decision in [`crate::decisions::poll_decision`]): open jobs are
//!   polled `POLL_AFTER` after registration, then at growing, jittered intervals, and given up
//!   as `expired` after `POLL_GIVE_UP`.
//! - [`Recheck`] (`give_up_recheck.rs`, its decision in
//!   [`crate::decisions::recheck_decision`]): jobs given up while Sume gave no answer about
//!   them are asked about again, with the reads the polls leave, for GIVE_UP_RECHECK.
//! - [`Retention`] (`retention.rs`): removes what is old and settled.
//!
//! Each has a `run` that only schedules, logs and waits, and a `run_once` that does one pass
//! and answers what it did; tests call `run_once` with a [`Clock`] they move. The two that ask
//! Sume share one [`crate::sume_api::StatusReader`] (one budget, one lease owner); how passes
//! and claims are scheduled is `schedule.rs`. Work is claimed in bounded batches
//! (`for update skip locked`) under a lease, so instances share it without a leader and a
//! crashed instance's claims return when the lease expires; no request is sent unless it can
//! finish before its claim expires.

mod ask_again;
mod give_up_recheck;
mod inbox_check;
mod poll;
mod retention;
mod schedule;

pub use give_up_recheck::{Recheck, RecheckStats};
pub use inbox_check::{InboxCheck, InboxCheckStats};
pub use poll::{Poll, PollStats};
pub use retention::Retention;

pub use crate::db::Clock;
