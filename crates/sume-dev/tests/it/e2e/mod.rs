//! End to end: the simulator creates jobs and sends their webhooks, the application's submit
//! path ([`sume_dev::submit::SubmitClient`]) races them with slow work in its own
//! transaction, and one or two daemons in this process put the two together. Every scenario
//! ends by comparing the database with the simulator's truth and delivery log
//! ([`harness::Snapshot::check`]), waiting for convergence with a deadline, never a sleep.
//!
//! Jobs whose webhook is dropped need the status sweep, and are left to its own tests.

mod checks;
mod documented;
mod fleet;
mod harness;
mod outcomes;
mod submit;
mod webhooks;
