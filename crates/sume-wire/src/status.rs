//! What a Sume status string means.
//!
//! Sume's docs name `queued`, `running`, `processing` (in flight) and `completed`, `failed`,
//! `canceled`, `expired` (terminal); avatar objects say `ready` for success, and clients in the
//! wild see `succeeded`/`success`, `cancelled`, `error`/`errored`. Every spelling is mapped here,
//! once, for the webhook path and the poll path alike.

use std::fmt;
use std::str::FromStr;

/// The state of a job as this service records it. `Open` is the only non-final state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Not ended yet, as far as this service has seen: queued, running, processing, or a
    /// status it does not know.
    Open,
    /// Succeeded: `completed`, or `ready` (avatars), `succeeded`, `success`.
    Completed,
    /// Failed: `failed`, or `error`, `errored`.
    Failed,
    /// Canceled: `canceled` or `cancelled`.
    Canceled,
    /// Sume gave up on the job: `expired`.
    Expired,
}

impl JobState {
    /// Every state, `Open` first; for exhaustive loops (metrics labels, round-trip tests).
    pub const ALL: [JobState; 5] = [
        JobState::Open,
        JobState::Completed,
        JobState::Failed,
        JobState::Canceled,
        JobState::Expired,
    ];

    /// The spelling this service stores and prints (not Sume's: `Open` is `open`, never
    /// `queued`); [`FromStr`] reads it back.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Open => "open",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Canceled => "canceled",
            JobState::Expired => "expired",
        }
    }

    /// Whether the job has ended: every state but `Open` is final.
    pub fn is_terminal(self) -> bool {
        self != JobState::Open
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| format!("unknown job state {s:?}"))
    }
}

/// A status string read from an event or a status call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The job has ended; the state is final.
    Terminal(JobState),
    /// Queued, running, processing, or a status this version does not know: only recorded.
    InFlight,
}

impl Status {
    /// Maps any spelling Sume or its clients use; case and surrounding space do not matter.
    pub fn parse(raw: &str) -> Status {
        let s = raw.trim().to_ascii_lowercase();
        let terminal = match s.as_str() {
            "completed" | "complete" | "ready" | "succeeded" | "success" => JobState::Completed,
            "failed" | "error" | "errored" => JobState::Failed,
            "canceled" | "cancelled" => JobState::Canceled,
            "expired" => JobState::Expired,
            _ => return Status::InFlight,
        };
        Status::Terminal(terminal)
    }

    /// Whether `raw` is a spelling this version knows, terminal or in flight (`queued`,
    /// `running`, `processing`); case and surrounding space do not matter. [`Status::parse`]
    /// reads any other as in flight, which a caller should make visible: a new terminal
    /// spelling would keep jobs open until they are given up.
    pub fn is_known(raw: &str) -> bool {
        const IN_FLIGHT: [&str; 3] = ["queued", "running", "processing"];
        let s = raw.trim().to_ascii_lowercase();
        IN_FLIGHT.contains(&s.as_str()) || Status::parse(&s).terminal().is_some()
    }

    /// The final state, or `None` while the job is in flight.
    pub fn terminal(self) -> Option<JobState> {
        match self {
            Status::Terminal(state) => Some(state),
            Status::InFlight => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_every_documented_spelling() {
        for (raw, want) in [
            ("completed", Some(JobState::Completed)),
            ("ready", Some(JobState::Completed)),
            ("succeeded", Some(JobState::Completed)),
            ("Success", Some(JobState::Completed)),
            ("failed", Some(JobState::Failed)),
            ("error", Some(JobState::Failed)),
            ("errored", Some(JobState::Failed)),
            ("canceled", Some(JobState::Canceled)),
            (" cancelled ", Some(JobState::Canceled)),
            ("expired", Some(JobState::Expired)),
            ("queued", None),
            ("running", None),
            ("processing", None),
            ("something_new", None),
        ] {
            assert_eq!(Status::parse(raw).terminal(), want, "{raw}");
            assert_eq!(Status::is_known(raw), raw != "something_new", "{raw}");
        }
        assert!(Status::is_known(" Running "));
        assert!(!Status::is_known("done"));
        assert!(!Status::is_known(""));
    }

    #[test]
    fn state_round_trips() {
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse::<JobState>(), Ok(state));
        }
        assert!("done".parse::<JobState>().is_err());
    }
}
