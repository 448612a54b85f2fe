//! The one idempotent close: what an observed Sume status does to a job.
//!
//! A webhook event and a status poll are both *observations* of a job's status, and both go
//! through [`JobFold`]: the first terminal observation closes the job; the same terminal state
//! seen again changes nothing; a different terminal state is a disagreement, recorded and never
//! applied; an in-flight status only updates `sume_status` while the job is open. The fold is
//! pure, so the database code runs it under the job's row lock and writes what it says.
//!
//! "First" needs an order. Events stored by different ingest transactions are folded in the
//! order they were stored. Events stored by one transaction share its `received_at`, and
//! nothing else orders them either: `X-Sume-Timestamp` is not Sume's order (a retry is signed
//! afresh), and their keys' spelling is no order at all. So when such events carry two
//! different terminal states for a job that can still close ([`JobFold::apply_together`]),
//! none of them is applied: each is recorded as a disagreement (kept state `open`), the job
//! stays open and is marked [`JobFold::contested`], and the writer makes it due for a poll at
//! once. Sume's own answer then closes it through this same fold (`closed_by = poll`), as a
//! poll always does. Closing by one of them and letting the poll correct it was the other
//! way; it was not taken, because the application would act on a close that may be undone.
//! Without API keys nothing polls: the job stays open with both recorded, for an operator.

use sume_wire::{JobState, JsonText, Status};

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
    /// The job's result as JSON text, kept if this observation closes the job.
    pub result: Option<JsonText>,
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
    /// The result of the observation that closed the job in this fold, as JSON text.
    pub result: Option<JsonText>,
    /// Contradicting terminal observations met in this fold, to record.
    pub disagreements: Vec<Disagreement>,
    /// The job is closed by a give-up: the daemon's guess, which Sume's own terminal status
    /// replaces.
    pub provisional: bool,
    /// This fold's close replaced a give-up.
    pub supersedes_give_up: bool,
    /// Observations that arrived together contradicted each other and none was applied: only
    /// Sume's answer (a poll) can settle the job.
    pub contested: bool,
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
            contested: false,
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

    /// Applies observations that arrived together and so have no order among them (one
    /// ingest transaction's events of this job); answers what each did, in their order. While
    /// the job can still take a terminal state (open, or given up) and they carry two
    /// different ones, no terminal one is applied: each is a disagreement and the fold is
    /// [`JobFold::contested`]. Otherwise they are applied one by one.
    pub fn apply_together(&mut self, together: &[Observation]) -> Vec<Outcome> {
        let terminal = |o: &Observation| match Status::parse(o.status.as_deref()?) {
            Status::Terminal(state) => Some(state),
            Status::InFlight => None,
        };
        let mut states = together.iter().filter_map(terminal);
        let first = states.next();
        let split = first.is_some_and(|f| states.any(|s| s != f));
        let open = self.state == JobState::Open || self.provisional;
        if !(split && open) {
            return together.iter().map(|o| self.apply(o)).collect();
        }
        self.contested = true;
        together
            .iter()
            .map(|o| match (terminal(o), o.status.as_deref()) {
                (Some(seen), Some(raw)) => {
                    self.disagreements.push(Disagreement {
                        kept: self.state,
                        seen,
                        seen_status: raw.to_owned(),
                        source: o.source,
                        event_id: o.event_id.clone(),
                    });
                    Outcome::Disagreement
                }
                _ => self.apply(o),
            })
            .collect()
    }

    /// Whether the job row needs writing.
    pub fn changed(&self) -> bool {
        self.changed
    }
}

#[cfg(test)]
#[path = "job_fold_tests.rs"]
mod tests;
