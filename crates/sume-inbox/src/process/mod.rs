//! The process: what a daemon sets up before and around its tasks, none of it specific to
//! webhooks.
//!
//! - [`runtime()`]: the allocator's options and the async runtime (WORKER_THREADS);
//! - [`logging`]: the log subscriber (LOG_FORMAT, RUST_LOG); [`log_budget`]: log lines an
//!   attacker can cause, at a bounded rate;
//! - [`sockets`]: binding the listeners with a deep accept queue; [`fd_limit`]: the open-file
//!   limit; [`memory_limit`]: the cgroup's memory limit against what clients can make it hold;
//! - [`signal`]: SIGTERM and SIGINT; [`systemd`]: `Type=notify` readiness;
//! - [`instance_name`]: this process's name on leases and in the fleet's picture;
//! - [`traces`]: optional OTLP export of spans (OTEL_*), installed with the logger.

pub mod fd_limit;
pub mod instance_name;
pub mod log_budget;
pub mod logging;
pub mod memory_limit;
pub mod runtime;
pub mod signal;
pub mod sockets;
pub mod systemd;
pub mod trace_export;
pub mod traces;

pub use runtime::{runtime, tune_allocator};
