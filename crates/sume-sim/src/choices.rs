//! Where Sume's docs leave a choice open and the simulator offers both: the webhook body's
//! shape (the guide's flat one, the docs' envelope) and the timestamp a retry is signed with.

use serde::{Deserialize, Serialize};

/// Which webhook body shape the simulator sends.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BodyShape {
    /// `{"event":"job.completed","job_id":"job_...","status":...}`.
    Guide,
    /// `{"id":"evt_...","type":"job.completed","data":{"object":{...}}}`.
    Envelope,
    /// Each job picks one of the two at random.
    Mixed,
}

/// The timestamp every retry of an event carries.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetryTimestamp {
    /// Each attempt is signed afresh with the time it is sent.
    Fresh,
    /// Every attempt repeats the first one's timestamp and signature.
    First,
}

/// The order of `GET /jobs`. Sume's docs do not state one: newest first is this project's
/// assumption, and the others rehearse a client that must not depend on it.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListOrder {
    /// Newest created first (the assumption).
    #[default]
    Newest,
    /// Oldest created first.
    Oldest,
    /// Most recently changed status first: a job moves to the head when it starts or ends, so
    /// pages read one after the other may repeat or skip jobs.
    Updated,
}
