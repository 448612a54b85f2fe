//! The poll's decision: what one poll does to an open job, given its age and attempts, the
//! timings (`POLL_AFTER`, `POLL_MAX_INTERVAL`, `POLL_GIVE_UP`) and the answers read from Sume,
//! key by key. Pure, like [`crate::decisions::job_fold::JobFold`]: [`crate::actors::sweep::Poll`] asks, folds, and performs
//! the [`PollDecision`] with the one write it names.

use std::time::Duration;

use super::backoff::{backoff_base, jitter};
use crate::config::SweepConfig;
use crate::sume_api::{Answer, Reply};

/// The timings a poll decision follows (from [`SweepConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollRules {
    /// `POLL_AFTER`: the first poll, and the first step of the backoff.
    pub poll_after: Duration,
    /// `POLL_MAX_INTERVAL`: the backoff's cap.
    pub max_interval: Duration,
    /// `POLL_GIVE_UP`: the age at which an open job is closed as `expired`.
    pub give_up: Duration,
    /// Verdicts are held (Sume's answers cannot be trusted to mean what they say): no job is
    /// given up, however old.
    pub hold_verdicts: bool,
}

impl PollRules {
    /// The rules of these settings.
    pub fn of(config: &SweepConfig) -> PollRules {
        PollRules {
            poll_after: config.poll_after,
            max_interval: config.poll_max_interval,
            give_up: config.poll_give_up,
            hold_verdicts: false,
        }
    }
}

/// When the next poll of a job still open is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextPoll {
    /// The backoff step (before its jitter); counts as an attempt.
    Backoff(Duration),
    /// Sume's `Retry-After`; not an attempt (the job was not seen).
    RetryAfter(Duration),
}

impl NextPoll {
    /// The wait to write: a backoff step jittered, a `Retry-After` as it is.
    pub fn wait(self) -> Duration {
        match self {
            NextPoll::Backoff(base) => jitter(base),
            NextPoll::RetryAfter(after) => after,
        }
    }

    /// Whether the poll counts towards the backoff.
    pub fn counts_as_attempt(self) -> bool {
        matches!(self, NextPoll::Backoff(_))
    }
}

/// What one poll does to its job.
#[derive(Debug, Clone, PartialEq)]
pub enum PollDecision {
    /// A terminal status: close through the fold (`close_by_poll`).
    Close {
        /// The terminal status as spelt by Sume.
        status: String,
        /// The job's result or error, as JSON text.
        result: Option<sume_wire::JsonText>,
        /// The answer, as recorded on the job.
        answer: String,
    },
    /// Still open: record the answer (and the in-flight status, if one was read) and poll
    /// again later.
    StillOpen {
        /// The last answer, as recorded on the job.
        answer: String,
        /// The in-flight status read, if a key could read the job.
        status: Option<String>,
        /// When to poll again.
        next: NextPoll,
    },
    /// Open past `POLL_GIVE_UP`: close as `expired` with the reason and the last status read.
    GiveUp {
        /// Why, with the last answer.
        reason: String,
        /// The last status read, if any.
        status: Option<String>,
        /// Decided without an answer about the job from Sume (no answer, a timeout, a 429, a
        /// 5xx, no budget): the job is to be asked about again (GIVE_UP_RECHECK). A give-up
        /// after Sume said `running`, or 404 under every key asked, is a verdict and is not.
        blind: bool,
    },
    /// Nothing could be asked (no budget before the lease ends, or shutdown): give the claim
    /// back untouched.
    Release,
}

/// The answers about one job, read key by key, folded into a [`PollDecision`].
#[derive(Debug, Clone)]
pub struct PollFold {
    rules: PollRules,
    attempts: i32,
    past_give_up: bool,
    last_answer: Option<String>,
    last_status: Option<String>,
    retry_in: Option<Duration>,
    /// A key answered 402 or 403: no give-up on this poll.
    refused: bool,
    /// The keys to ask about this job (its own, or every key).
    keys: usize,
    /// Keys that answered 404.
    not_found: usize,
    decided: Option<PollDecision>,
}

impl PollFold {
    /// A job `age` old (by the sweep's clock) that was polled `attempts` times before.
    pub fn new(rules: PollRules, age: Duration, attempts: i32) -> PollFold {
        PollFold {
            rules,
            attempts,
            past_give_up: age >= rules.give_up && !rules.hold_verdicts,
            last_answer: None,
            last_status: None,
            retry_in: None,
            refused: false,
            keys: 1,
            not_found: 0,
            decided: None,
        }
    }

    /// The same for a job asked about under `keys` keys (its own: 1; none named: every key).
    pub fn with_keys(self, keys: usize) -> PollFold {
        PollFold { keys, ..self }
    }

    /// Adds one key's answer; false when no further key should be asked.
    pub fn read(&mut self, answer: Answer) -> bool {
        match answer.reply {
            Reply::Found { status, result } => {
                if sume_wire::Status::parse(&status).terminal().is_some() {
                    self.decided = Some(PollDecision::Close {
                        status,
                        result,
                        answer: answer.text,
                    });
                } else if !self.past_give_up {
                    self.decided = Some(PollDecision::StillOpen {
                        answer: answer.text,
                        status: Some(status),
                        next: self.backoff(),
                    });
                } else {
                    self.last_status = Some(status);
                    self.last_answer = Some(answer.text);
                }
                false
            }
            Reply::RateLimited { retry_in } => {
                self.retry_in = Some(retry_in);
                self.last_answer = Some(answer.text);
                false
            }
            Reply::Refused => {
                self.refused = true;
                self.last_answer = Some(answer.text);
                true
            }
            Reply::NotFound => {
                self.not_found += 1;
                self.last_answer = Some(answer.text);
                true
            }
            Reply::Failed => {
                self.last_answer = Some(answer.text);
                true
            }
        }
    }

    /// The decision, once every key was asked or the asking stopped (no budget, shutdown).
    pub fn decide(mut self, shutting_down: bool) -> PollDecision {
        if let Some(decided) = self.decided.take() {
            return decided;
        }
        let Some(answer) = self.last_answer.take() else {
            if self.past_give_up && !shutting_down {
                return self.give_up("no answer from Sume", None, true);
            }
            return PollDecision::Release;
        };
        if self.past_give_up && !self.refused {
            let status = self.last_status.take();
            // Sume said something about the job itself: `running`, or 404 under every key
            // asked (verdicts are allowed, or the job would not be past its give-up).
            let answered = status.is_some() || self.not_found == self.keys;
            return self.give_up(&answer, status, !answered);
        }
        let next = match self.retry_in {
            Some(after) => NextPoll::RetryAfter(after),
            None => self.backoff(),
        };
        PollDecision::StillOpen {
            answer,
            status: None,
            next,
        }
    }

    fn backoff(&self) -> NextPoll {
        NextPoll::Backoff(backoff_base(
            self.attempts,
            self.rules.poll_after,
            self.rules.max_interval,
        ))
    }

    fn give_up(&self, last_answer: &str, status: Option<String>, blind: bool) -> PollDecision {
        PollDecision::GiveUp {
            reason: format!(
                "no terminal status within POLL_GIVE_UP ({}); last answer: {last_answer}",
                humantime::format_duration(self.rules.give_up)
            ),
            status,
            blind,
        }
    }
}

#[cfg(test)]
#[path = "poll_decision_tests.rs"]
mod tests;
