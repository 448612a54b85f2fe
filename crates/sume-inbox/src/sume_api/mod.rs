//! The way to Sume's API, as the sweep and `reconcile` use it: one [`StatusReader`] per
//! instance (the keys, the client, the name on its leases), the fleet-wide [`read_budget`]
//! every read takes from, the keys' positive checks and the breaker ([`key_checks`]) that say
//! whether a 404 is a verdict, and the [`Answer`] each reply is read as. The wire format itself
//! (signatures, bodies, the HTTP client) is the `sume-wire` crate.

pub mod answer;
pub mod created_at;
pub mod job_reads;
pub mod key_checks;
pub mod list_reads;
pub mod read_budget;
pub mod status_reader;

pub use answer::{Answer, Reply};
pub use job_reads::Asked;
pub use key_checks::{ApiCheck, Hold};
pub use list_reads::ListAnswer;
pub use read_budget::{Budget, BudgetError};
pub use status_reader::StatusReader;

use crate::metrics::{Metrics, StatusSource};
use crate::process::log_budget::LogBudget;

/// A status this version does not know repeats on every read of its job: logged at most this
/// often, counted always.
static UNKNOWN_STATUS_LOG: LogBudget = LogBudget::new(1, std::time::Duration::from_secs(60));

/// Counts, and logs within [`UNKNOWN_STATUS_LOG`], a status Sume sent for `job_id` (in a
/// verified webhook, a status read or a list page) that this version does not know
/// ([`sume_wire::Status::is_known`]): it is read as in flight, so were it a new terminal
/// spelling, the job would stay open until given up.
pub(crate) fn note_status(metrics: &Metrics, source: StatusSource, job_id: &str, status: &str) {
    if sume_wire::Status::is_known(status) {
        return;
    }
    metrics.unknown_status(source);
    if let Some(left_out) = UNKNOWN_STATUS_LOG.allow() {
        let status: String = status.chars().take(100).collect();
        tracing::warn!(job_id, ?status, ?source, left_out, "Sume sent a job status this version does not know; it is stored and read as in flight (the job stays open until a known status or its give-up)");
    }
}
