//! The one idempotent close: what an observed Sume status does to a job.
//!
//! A webhook event and a status poll are both *observations* of a job's status, and both go
//! through [`JobFold`]: the first terminal observation closes the job; the same terminal state
//! seen again changes nothing; a different terminal state is a disagreement, recorded and never
//! applied; an in-flight status only updates `sume_status` while the job is open. The fold is
//! pure, so the database code runs it under the job's row lock and writes what it says.

use serde_json::Value;
use sume_wire::{JobState, Status};

/// Who saw the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A stored webhook event, applied by attach.
    Webhook,
    /// A status read by the sweep.
    Poll,
}

impl Source {
    /// As stored in `closed_by` and `disagreements.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Webhook => "webhook",
            Source::Poll => "poll",
        }
    }
}

/// One observation of a job's status.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Who saw it.
    pub source: Source,
    /// The event it came from (webhooks only).
    pub event_id: Option<String>,
    /// The raw status string; `None` when an event carried none.
    pub status: Option<String>,
    /// The job's result, kept if this observation closes the job.
    pub result: Option<Value>,
}

/// What one observation did, as recorded on its event (`sume.events.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It closed the job.
    Closed,
    /// It updated the in-flight status of an open job.
    Status,
    /// Nothing to do: the job was already closed in the same state, or it was an in-flight
    /// status after the close, or it carried no status.
    Ignored,
    /// A terminal state other than the one the job was closed with.
    Disagreement,
}

impl Outcome {
    /// As stored in `sume.events.outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Closed => "closed",
            Outcome::Status => "status",
            Outcome::Ignored => "ignored",
            Outcome::Disagreement => "disagreement",
        }
    }
}

/// A disagreement to record.
#[derive(Debug, Clone, PartialEq)]
pub struct Disagreement {
    /// The state the job was closed with, which stays.
    pub kept: JobState,
    /// The different terminal state this observation implied.
    pub seen: JobState,
    /// Sume's status as spelt in the observation.
    pub seen_status: String,
    /// Who saw it.
    pub source: Source,
    /// The event it came from (webhooks only).
    pub event_id: Option<String>,
}

/// A job's state as observations are applied to it in order.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFold {
    /// Sume's job id.
    pub job_id: String,
    /// The job's state after the observations so far.
    pub state: JobState,
    /// Sume's last status, as spelt by Sume.
    pub sume_status: Option<String>,
    /// Set by the observation that closed the job in this fold.
    pub closed_by: Option<Source>,
    /// The event that closed the job in this fold.
    pub closed_event_id: Option<String>,
    /// The result of the observation that closed the job in this fold.
    pub result: Option<Value>,
    /// Contradicting terminal observations met in this fold, to record.
    pub disagreements: Vec<Disagreement>,
    /// The job is closed by a give-up: the daemon's guess, which Sume's own terminal status
    /// replaces.
    pub provisional: bool,
    /// This fold's close replaced a give-up.
    pub supersedes_give_up: bool,
    changed: bool,
}

impl JobFold {
    /// Starts from the job as it is stored (read under its row lock).
    pub fn new(job_id: String, state: JobState, sume_status: Option<String>) -> JobFold {
        JobFold {
            job_id,
            state,
            sume_status,
            closed_by: None,
            closed_event_id: None,
            result: None,
            disagreements: Vec::new(),
            provisional: false,
            supersedes_give_up: false,
            changed: false,
        }
    }

    /// Marks the job as closed by a give-up (`closed_by = give_up`), so that Sume's terminal
    /// status supersedes it.
    pub fn given_up(mut self, given_up: bool) -> JobFold {
        self.provisional = given_up && self.state.is_terminal();
        self
    }

    /// Applies one observation and says what it did.
    pub fn apply(&mut self, obs: &Observation) -> Outcome {
        let Some(raw) = obs.status.as_deref() else {
            return Outcome::Ignored;
        };
        match (Status::parse(raw), self.state) {
            (Status::Terminal(seen), JobState::Open) => {
                self.state = seen;
                self.sume_status = Some(raw.to_owned());
                self.closed_by = Some(obs.source);
                self.closed_event_id = obs.event_id.clone();
                self.result = obs.result.clone();
                self.changed = true;
                Outcome::Closed
            }
            (Status::Terminal(seen), _) if self.provisional => {
                // Sume's word replaces the give-up's guess; among Sume's statuses, the first
                // terminal one still wins.
                self.state = seen;
                self.sume_status = Some(raw.to_owned());
                self.closed_by = Some(obs.source);
                self.closed_event_id = obs.event_id.clone();
                self.result = obs.result.clone();
                self.provisional = false;
                self.supersedes_give_up = true;
                self.changed = true;
                Outcome::Closed
            }
            (Status::Terminal(seen), kept) if seen == kept => Outcome::Ignored,
            (Status::Terminal(seen), kept) => {
                self.disagreements.push(Disagreement {
                    kept,
                    seen,
                    seen_status: raw.to_owned(),
                    source: obs.source,
                    event_id: obs.event_id.clone(),
                });
                Outcome::Disagreement
            }
            (Status::InFlight, JobState::Open) => {
                // A status read before a newer one was written (a slow poll, a late delivery)
                // must not move the job back: `queued` never replaces a started status.
                let started = |s: &str| !s.trim().eq_ignore_ascii_case("queued");
                if self.sume_status.as_deref().is_some_and(started) && !started(raw) {
                    return Outcome::Ignored;
                }
                if self.sume_status.as_deref() != Some(raw) {
                    self.sume_status = Some(raw.to_owned());
                    self.changed = true;
                }
                Outcome::Status
            }
            (Status::InFlight, _) => Outcome::Ignored,
        }
    }

    /// Whether the job row needs writing.
    pub fn changed(&self) -> bool {
        self.changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn webhook(id: &str, status: &str) -> Observation {
        Observation {
            source: Source::Webhook,
            event_id: Some(id.to_owned()),
            status: Some(status.to_owned()),
            result: Some(serde_json::json!({"url": id})),
        }
    }

    fn poll(status: &str) -> Observation {
        Observation {
            source: Source::Poll,
            event_id: None,
            status: Some(status.to_owned()),
            result: None,
        }
    }

    fn open() -> JobFold {
        JobFold::new("job_1".into(), JobState::Open, None)
    }

    #[test]
    fn first_terminal_wins_and_later_ones_disagree() {
        let mut job = open();
        assert_eq!(job.apply(&webhook("e1", "running")), Outcome::Status);
        assert_eq!(job.apply(&webhook("e2", "succeeded")), Outcome::Closed);
        assert_eq!(job.state, JobState::Completed);
        assert_eq!(job.closed_by, Some(Source::Webhook));
        assert_eq!(job.closed_event_id.as_deref(), Some("e2"));
        assert_eq!(job.result, Some(serde_json::json!({"url": "e2"})));
        assert_eq!(job.apply(&webhook("e3", "completed")), Outcome::Ignored);
        assert_eq!(job.apply(&webhook("e4", "running")), Outcome::Ignored);
        assert_eq!(job.sume_status.as_deref(), Some("succeeded"));
        assert_eq!(job.apply(&poll("failed")), Outcome::Disagreement);
        assert_eq!(job.state, JobState::Completed, "never applied");
        assert_eq!(job.disagreements.len(), 1);
        assert_eq!(job.disagreements[0].seen, JobState::Failed);
        assert_eq!(job.disagreements[0].source, Source::Poll);
    }

    #[test]
    fn poll_closes_the_same_way() {
        let mut job = open();
        assert_eq!(job.apply(&poll("cancelled")), Outcome::Closed);
        assert_eq!(job.state, JobState::Canceled);
        assert_eq!(job.closed_by, Some(Source::Poll));
        assert_eq!(job.apply(&webhook("e1", "canceled")), Outcome::Ignored);
        assert!(job.disagreements.is_empty());
    }

    #[test]
    fn a_closed_job_loaded_from_the_database_stays_closed() {
        let mut job = JobFold::new("j".into(), JobState::Expired, Some("expired".into()));
        assert_eq!(job.apply(&webhook("e", "completed")), Outcome::Disagreement);
        assert_eq!(job.apply(&webhook("e2", "expired")), Outcome::Ignored);
        assert!(!job.changed());
        assert_eq!(job.state, JobState::Expired);
    }

    #[test]
    fn no_status_is_ignored_and_a_repeated_status_is_no_write() {
        let mut job = open();
        let mut obs = webhook("e", "x");
        obs.status = None;
        assert_eq!(job.apply(&obs), Outcome::Ignored);
        assert!(!job.changed());
        let mut job = JobFold::new("j".into(), JobState::Open, Some("running".into()));
        assert_eq!(job.apply(&poll("running")), Outcome::Status);
        assert!(!job.changed());
    }

    #[test]
    fn sumes_terminal_status_supersedes_a_give_up_once() {
        let mut f = JobFold::new("j".into(), JobState::Expired, None).given_up(true);
        assert_eq!(f.apply(&webhook("e1", "completed")), Outcome::Closed);
        assert_eq!(f.state, JobState::Completed);
        assert!(f.supersedes_give_up && f.changed());
        assert_eq!(f.closed_by, Some(Source::Webhook));
        assert_eq!(f.closed_event_id.as_deref(), Some("e1"));
        // Among Sume's statuses the first terminal one still wins.
        assert_eq!(f.apply(&webhook("e2", "failed")), Outcome::Disagreement);
        assert_eq!(f.state, JobState::Completed);
        // Sume saying `expired` replaces the guess too: it is Sume's word now.
        let mut f = JobFold::new("j".into(), JobState::Expired, None).given_up(true);
        assert_eq!(f.apply(&poll("expired")), Outcome::Closed);
        assert!(f.supersedes_give_up);
        // An in-flight status does not reopen a given-up job.
        let mut f = JobFold::new("j".into(), JobState::Expired, None).given_up(true);
        assert_eq!(f.apply(&poll("running")), Outcome::Ignored);
        assert!(!f.changed());
        // Only a closed job can be given up.
        assert!(
            !JobFold::new("j".into(), JobState::Open, None)
                .given_up(true)
                .provisional
        );
    }

    #[test]
    fn an_in_flight_status_never_moves_a_job_back_to_queued() {
        let mut f = open();
        assert_eq!(f.apply(&poll("running")), Outcome::Status);
        assert_eq!(f.apply(&poll("queued")), Outcome::Ignored);
        assert_eq!(f.sume_status.as_deref(), Some("running"));
        assert_eq!(f.apply(&poll("processing")), Outcome::Status);
        assert_eq!(f.sume_status.as_deref(), Some("processing"));
    }
}
