//! sume-dev: the tools for rehearsing sume-inbox, kept out of the daemon's binary.
//!
//! - [`demo`]: `sume-dev demo`, the whole story on one machine (what `make run` shows);
//! - [`sign`]: `sume-dev sign`, a correctly signed test webhook, as headers or a curl command;
//! - [`submit`]: the example application's submit path that races its own webhook, the code
//!   users copy into their application, and what the demo and the end-to-end tests drive;
//! - [`cli`]: the command line, including `sume-dev sim` (the simulator of the `sume-sim`
//!   crate, with its flags and `SIM_...` variables);
//! - [`sql`]: the demo's own statements (`sql/*.sql` of this crate); the submit path keeps its
//!   SQL inline, as the application's own code.

#![warn(missing_docs)]

pub mod cli;
pub mod demo;
pub mod sign;
pub mod submit;

/// The demo's own named statements (`sql/*.sql` of this crate), one constant each.
pub mod sql {
    use sume_inbox::db::Statement;
    include!(concat!(env!("OUT_DIR"), "/statements.rs"));
}
