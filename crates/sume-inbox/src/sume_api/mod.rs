//! The way to Sume's API, as the sweep and `reconcile` use it: one [`StatusReader`] per
//! instance (the keys, the client, the name on its leases), the fleet-wide [`read_budget`]
//! every read takes from, the keys' positive checks and the breaker ([`key_checks`]) that say
//! whether a 404 is a verdict, and the [`Answer`] each reply is read as. The wire format itself
//! (signatures, bodies, the HTTP client) is the `sume-wire` crate.

pub mod answer;
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
