//! What an operator runs on demand, beside the actors: [`replay`] (a stored delivery through the
//! normal path again; the CLI, the admin API and the console call it) and [`reconciliation`]
//! (`sume-inbox reconcile`: Sume's job list against the database, after a restore or failover).

pub mod reconciliation;
pub mod replay;
