//! The pure decisions: what an observation does, decided without the database, the network or a
//! clock of its own, so each is tested as a table of cases. The actors lock, fold and write.
//!
//! - [`delivery`]: a signed request to what it becomes (an event keyed for dedupe, or a dead
//!   letter), or why it is refused;
//! - [`reused_id`]: an event whose key is stored already: a redelivery, or another event under
//!   that id (another job, another status), kept as a dead letter;
//! - [`job_fold`]: the one close: what an observed status does to a job (the first terminal
//!   status wins; a later different one is a disagreement; two different ones stored together
//!   close nothing, and Sume's answer to a poll decides);
//! - [`poll_decision`]: what a poll's answers do (close, poll again later, give up, release);
//! - [`inbox_verdict`]: what an inbox check's answers say (foreign, orphan, ask again);
//! - [`backoff`]: how far apart the asks about one job are.

pub mod backoff;
pub mod delivery;
pub mod inbox_verdict;
pub mod job_fold;
pub mod poll_decision;
pub mod recheck_decision;
pub mod reused_id;
pub mod walk_choice;
