//! The faults the simulator injects: what can go wrong, how often, and for which job.
//!
//! [`Faults`] holds one probability per fault (flags at start, `PATCH /sim/faults` at run
//! time); [`JobOverrides`] is the optional `"sim"` object of a create body, which forces a
//! fault on or off for that one job; [`AppliedFaults`] is what a job actually drew, kept in
//! the truth so a test can tell a fault from a bug.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::duration::{parse_duration, serde_human};
use crate::job::Outcome;

/// Why a fault setting was refused.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum FaultError {
    /// A probability outside `0..=1` (or NaN).
    #[error("{name} is {value}, but a probability lies between 0 and 1")]
    NotAProbability {
        /// The field, as [`Faults`] and the JSON of `/sim/faults` name it.
        name: &'static str,
        /// The value refused.
        value: f64,
    },
    /// `failed + canceled + expired` is above 1, which would leave `completed` a negative
    /// share; holds the sum.
    #[error("outcome probabilities add up to {0}, more than 1")]
    OutcomesOverOne(f64),
    /// The body of `PATCH /sim/faults` is JSON but not an object.
    #[error("the patch must be a JSON object of fault settings")]
    PatchNotAnObject,
    /// The patched settings do not read as [`Faults`] (an unknown field, a wrong type, an
    /// unreadable duration); holds the JSON reader's message.
    #[error("bad fault settings: {0}")]
    Unreadable(String),
}

/// A clap value parser for probabilities.
pub fn probability(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{p} is not between 0 and 1"))
    }
}

/// How often each fault happens. Every field is a probability in `0..=1` unless it is a delay.
#[derive(clap::Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[command(next_help_heading = "Faults")]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// A job ends at once and the create call answers only after the first webhook attempt.
    #[arg(long = "fault-early", env = "SIM_FAULT_EARLY", default_value_t = 0.02, value_name = "P", value_parser = probability)]
    pub early: f64,
    /// After a successful delivery the same event (same event id) is delivered once more.
    #[arg(long = "fault-duplicate", env = "SIM_FAULT_DUPLICATE", default_value_t = 0.02, value_name = "P", value_parser = probability)]
    pub duplicate: f64,
    /// The job's webhook is never sent; only polling learns the outcome.
    #[arg(long = "fault-drop", env = "SIM_FAULT_DROP", default_value_t = 0.01, value_name = "P", value_parser = probability)]
    pub drop: f64,
    /// A `job.running` event (its own event id) is delivered after the terminal one.
    #[arg(long = "fault-late-nonterminal", env = "SIM_FAULT_LATE_NONTERMINAL", default_value_t = 0.01, value_name = "P", value_parser = probability)]
    pub late_nonterminal: f64,
    /// Every attempt for the job is signed with a secret the receiver does not hold.
    #[arg(long = "fault-wrong-secret", env = "SIM_FAULT_WRONG_SECRET", default_value_t = 0.0, value_name = "P", value_parser = probability)]
    pub wrong_secret: f64,
    /// A job ends `failed` (with an error object).
    #[arg(long = "outcome-failed", env = "SIM_OUTCOME_FAILED", default_value_t = 0.05, value_name = "P", value_parser = probability)]
    pub failed: f64,
    /// A job ends `canceled`.
    #[arg(long = "outcome-canceled", env = "SIM_OUTCOME_CANCELED", default_value_t = 0.01, value_name = "P", value_parser = probability)]
    pub canceled: f64,
    /// A job ends `expired`.
    #[arg(long = "outcome-expired", env = "SIM_OUTCOME_EXPIRED", default_value_t = 0.01, value_name = "P", value_parser = probability)]
    pub expired: f64,
    /// A read of one job answers only after `status_slow_delay`.
    #[arg(long = "fault-status-slow", env = "SIM_FAULT_STATUS_SLOW", default_value_t = 0.01, value_name = "P", value_parser = probability)]
    pub status_slow: f64,
    /// How long a slow read takes.
    #[arg(long = "status-slow-delay", env = "SIM_STATUS_SLOW_DELAY", default_value = "2s", value_name = "DURATION", value_parser = parse_duration)]
    #[serde(with = "serde_human")]
    pub status_slow_delay: Duration,
    /// A read of one job answers 500, 502 or 503.
    #[arg(long = "fault-status-5xx", env = "SIM_FAULT_STATUS_5XX", default_value_t = 0.005, value_name = "P", value_parser = probability)]
    pub status_5xx: f64,
    /// A read of one job answers 429 though the key is within its limit.
    #[arg(long = "fault-status-429", env = "SIM_FAULT_STATUS_429", default_value_t = 0.0, value_name = "P", value_parser = probability)]
    pub status_429: f64,
    /// The `Retry-After` of an injected 429 (rounded up to whole seconds, at least 1).
    #[arg(long = "status-429-retry-after", env = "SIM_STATUS_429_RETRY_AFTER", default_value = "2s", value_name = "DURATION", value_parser = parse_duration)]
    #[serde(with = "serde_human")]
    pub status_429_retry_after: Duration,
    /// A page of `GET /jobs` read with a cursor answers that same cursor as `next_cursor`, with
    /// `has_more`: a list that never moves on (a client must notice, not read it for ever).
    #[arg(long = "fault-list-cursor-stuck", env = "SIM_FAULT_LIST_CURSOR_STUCK", default_value_t = 0.0, value_name = "P", value_parser = probability)]
    #[serde(default)]
    pub list_cursor_stuck: f64,
    /// A read of one job answers `307 Temporary Redirect` to the same path under `/moved` on
    /// the same host, where no route is (404 `not_found`): a proxy or CDN in front of Sume that
    /// sends a request elsewhere. What answers there says nothing about the job.
    #[arg(long = "fault-status-redirect", env = "SIM_FAULT_STATUS_REDIRECT", default_value_t = 0.0, value_name = "P", value_parser = probability)]
    #[serde(default)]
    pub status_redirect: f64,
}

impl Faults {
    /// No fault at all: every job completes, every delivery is sent once, correctly signed.
    pub fn none() -> Faults {
        Faults {
            early: 0.0,
            duplicate: 0.0,
            drop: 0.0,
            late_nonterminal: 0.0,
            wrong_secret: 0.0,
            failed: 0.0,
            canceled: 0.0,
            expired: 0.0,
            status_slow: 0.0,
            status_slow_delay: Duration::from_millis(200),
            status_5xx: 0.0,
            status_429: 0.0,
            status_429_retry_after: Duration::from_secs(1),
            list_cursor_stuck: 0.0,
            status_redirect: 0.0,
        }
    }

    /// Checks that every probability lies in `0..=1` and that the outcome shares add up to no
    /// more than 1. Flags are range-checked as they are parsed; this also covers settings built
    /// in code and patches.
    pub fn validate(&self) -> Result<(), FaultError> {
        let named = [
            ("early", self.early),
            ("duplicate", self.duplicate),
            ("drop", self.drop),
            ("late_nonterminal", self.late_nonterminal),
            ("wrong_secret", self.wrong_secret),
            ("failed", self.failed),
            ("canceled", self.canceled),
            ("expired", self.expired),
            ("status_slow", self.status_slow),
            ("status_5xx", self.status_5xx),
            ("status_429", self.status_429),
            ("list_cursor_stuck", self.list_cursor_stuck),
            ("status_redirect", self.status_redirect),
        ];
        for (name, value) in named {
            if !(0.0..=1.0).contains(&value) {
                return Err(FaultError::NotAProbability { name, value });
            }
        }
        let outcomes = self.failed + self.canceled + self.expired;
        if outcomes > 1.0 + 1e-9 {
            return Err(FaultError::OutcomesOverOne(outcomes));
        }
        Ok(())
    }

    /// These settings with the fields of `patch` (a partial JSON object) replaced.
    pub fn patched(&self, patch: &Value) -> Result<Faults, FaultError> {
        let changes = patch.as_object().ok_or(FaultError::PatchNotAnObject)?;
        let mut merged = serde_json::to_value(self).expect("faults serialize");
        let fields = merged.as_object_mut().expect("faults are an object");
        for (k, v) in changes {
            fields.insert(k.clone(), v.clone());
        }
        let next: Faults =
            serde_json::from_value(merged).map_err(|e| FaultError::Unreadable(e.to_string()))?;
        next.validate()?;
        Ok(next)
    }

    /// What one new job draws, after its overrides.
    pub fn draw_job(&self, o: &JobOverrides, rng: &mut impl Rng) -> (AppliedFaults, Outcome) {
        let early = o.early.unwrap_or_else(|| hit(rng, self.early));
        let duplicate = match &o.duplicate {
            Some(c) => c.count(),
            None => u32::from(hit(rng, self.duplicate)),
        };
        let applied = AppliedFaults {
            early,
            duplicate,
            drop: o.drop.unwrap_or_else(|| hit(rng, self.drop)),
            late_nonterminal: o
                .late_nonterminal
                .unwrap_or_else(|| hit(rng, self.late_nonterminal)),
            wrong_secret: o
                .wrong_secret
                .unwrap_or_else(|| hit(rng, self.wrong_secret)),
        };
        let outcome = o.outcome.unwrap_or_else(|| {
            let x: f64 = rng.gen();
            if x < self.failed {
                Outcome::Failed
            } else if x < self.failed + self.canceled {
                Outcome::Canceled
            } else if x < self.failed + self.canceled + self.expired {
                Outcome::Expired
            } else {
                Outcome::Completed
            }
        });
        (applied, outcome)
    }

    /// What one read of a job draws.
    pub fn draw_read(&self, rng: &mut impl Rng) -> ReadFaults {
        ReadFaults {
            slow: hit(rng, self.status_slow).then_some(self.status_slow_delay),
            server_error: hit(rng, self.status_5xx),
            rate_limited: hit(rng, self.status_429),
            redirected: hit(rng, self.status_redirect),
        }
    }

    /// Whether one list page read with a cursor answers that cursor again.
    pub fn draw_list_stuck(&self, rng: &mut impl Rng) -> bool {
        hit(rng, self.list_cursor_stuck)
    }
}

fn hit(rng: &mut impl Rng, p: f64) -> bool {
    p > 0.0 && rng.gen_bool(p.min(1.0))
}

/// The faults one read of a job drew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadFaults {
    pub slow: Option<Duration>,
    pub server_error: bool,
    pub rate_limited: bool,
    pub redirected: bool,
}

/// `true`/`false` or a count, for `"duplicate"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Count {
    /// `true` is one extra delivery, `false` none.
    Flag(bool),
    /// That many extra deliveries.
    Times(u32),
}

impl Count {
    /// The number of extra deliveries asked for.
    pub fn count(self) -> u32 {
        match self {
            Count::Flag(b) => u32::from(b),
            Count::Times(n) => n,
        }
    }
}

/// The `"sim"` object of a create body: forces faults on or off for one job, for tests.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobOverrides {
    /// `completed`, `failed`, `canceled` or `expired`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// Forces the early fault on or off (see [`Faults::early`]). Here and below, `None` leaves
    /// the fault to be drawn from [`Faults`] as usual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early: Option<bool>,
    /// Extra deliveries of the terminal event after it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<Count>,
    /// Forces the drop fault on or off (see [`Faults::drop`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop: Option<bool>,
    /// Forces the late `job.running` event on or off (see [`Faults::late_nonterminal`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_nonterminal: Option<bool>,
    /// Forces the wrong-secret fault on or off (see [`Faults::wrong_secret`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrong_secret: Option<bool>,
    /// Time from creation to the terminal status, in milliseconds, instead of a draw from
    /// [`JobTiming`](crate::JobTiming); an early job ignores it and ends at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Time spent `queued` before the in-flight status of its kind, in milliseconds (at most
    /// the duration), instead of `--queued-fraction` of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<u64>,
    /// The in-flight status, spelt as given instead of the kind's (`running`, `processing`)
    /// wherever the job reports it: rehearses a spelling nobody documented, or a hostile one,
    /// since a receiver must take whatever text Sume sends. `queued` and the terminal status
    /// are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_status: Option<String>,
}

/// What a job drew: the faults that apply to it, after its overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedFaults {
    /// The job ended at creation, and its create call answered only after the first delivery
    /// attempt had its answer (at once when no webhook was to be sent).
    pub early: bool,
    /// Extra deliveries of the terminal event, sent only once it was delivered.
    pub duplicate: u32,
    /// No webhook is sent; only polling learns the outcome.
    pub drop: bool,
    /// A `job.running` event, with its own event id, follows the terminal one.
    pub late_nonterminal: bool,
    /// Every attempt is signed with a secret the receiver does not hold.
    pub wrong_secret: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patch_replaces_only_named_fields() {
        let f = Faults::none();
        let p = f
            .patched(&json!({"status_429": 1.0, "status_slow_delay": "50ms"}))
            .unwrap();
        assert_eq!(p.status_429, 1.0);
        assert_eq!(p.status_slow_delay, Duration::from_millis(50));
        assert_eq!(p.early, 0.0);
        assert!(matches!(
            f.patched(&json!({"status_492": 1.0})),
            Err(FaultError::Unreadable(_))
        ));
        assert!(matches!(
            f.patched(&json!({"drop": 2.0})),
            Err(FaultError::NotAProbability { name: "drop", .. })
        ));
        assert!(matches!(
            f.patched(&json!({"failed": 0.6, "expired": 0.6})),
            Err(FaultError::OutcomesOverOne(_))
        ));
        assert_eq!(f.patched(&json!([])), Err(FaultError::PatchNotAnObject));
    }

    #[test]
    fn overrides_beat_probabilities() {
        let mut all = Faults::none();
        all.drop = 1.0;
        all.failed = 1.0;
        let o: JobOverrides =
            serde_json::from_value(json!({"drop": false, "duplicate": 2, "outcome": "expired"}))
                .unwrap();
        let (applied, outcome) = all.draw_job(&o, &mut rand::thread_rng());
        assert!(!applied.drop);
        assert_eq!(applied.duplicate, 2);
        assert_eq!(outcome, Outcome::Expired);
        let (applied, outcome) = all.draw_job(&JobOverrides::default(), &mut rand::thread_rng());
        assert!(applied.drop);
        assert_eq!(outcome, Outcome::Failed);
        let o: JobOverrides = serde_json::from_value(json!({"duplicate": true})).unwrap();
        assert_eq!(o.duplicate.map(Count::count), Some(1));
        assert!(serde_json::from_value::<JobOverrides>(json!({"dorp": true})).is_err());
    }
}
