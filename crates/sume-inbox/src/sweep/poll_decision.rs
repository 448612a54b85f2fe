//! The poll's decision: what one poll does to an open job, given its age and attempts, the
//! timings (`POLL_AFTER`, `POLL_MAX_INTERVAL`, `POLL_GIVE_UP`) and the answers read from Sume,
//! key by key. Pure, like [`crate::close::JobFold`]: [`super::Poll`] asks, folds, and performs
//! the [`PollDecision`] with the one write it names.

use std::time::Duration;

use serde_json::Value;

use super::{backoff_base, jitter, Answer, Reply};
use crate::config::SweepConfig;

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
        /// The job's result or error.
        result: Option<Value>,
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
            decided: None,
        }
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
            Reply::NotFound | Reply::Failed => {
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
                return self.give_up("no answer from Sume", None);
            }
            return PollDecision::Release;
        };
        if self.past_give_up && !self.refused {
            let status = self.last_status.take();
            return self.give_up(&answer, status);
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

    fn give_up(&self, last_answer: &str, status: Option<String>) -> PollDecision {
        PollDecision::GiveUp {
            reason: format!(
                "no terminal status within POLL_GIVE_UP ({}); last answer: {last_answer}",
                humantime::format_duration(self.rules.give_up)
            ),
            status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: PollRules = PollRules {
        poll_after: Duration::from_secs(120),
        max_interval: Duration::from_secs(1800),
        give_up: Duration::from_secs(86_400),
        hold_verdicts: false,
    };
    const YOUNG: Duration = Duration::from_secs(600);
    const OLD: Duration = Duration::from_secs(86_400);

    fn found(status: &str) -> Answer {
        Answer {
            text: format!("200 {status}"),
            reply: Reply::Found {
                status: status.to_owned(),
                result: Some(serde_json::json!({"url": "u"})),
            },
        }
    }

    fn not_found() -> Answer {
        Answer {
            text: "404".into(),
            reply: Reply::NotFound,
        }
    }

    fn failed(text: &str) -> Answer {
        Answer {
            text: text.into(),
            reply: Reply::Failed,
        }
    }

    fn limited(secs: u64) -> Answer {
        Answer {
            text: "429".into(),
            reply: Reply::RateLimited {
                retry_in: Duration::from_secs(secs),
            },
        }
    }

    /// Folds `answers` as the service would: stops asking when the fold says so.
    fn decide(
        age: Duration,
        attempts: i32,
        answers: Vec<Answer>,
        shutting_down: bool,
    ) -> PollDecision {
        let mut fold = PollFold::new(RULES, age, attempts);
        for a in answers {
            if !fold.read(a) {
                break;
            }
        }
        fold.decide(shutting_down)
    }

    #[test]
    fn a_terminal_status_closes_even_past_give_up() {
        for age in [YOUNG, OLD] {
            assert_eq!(
                decide(
                    age,
                    3,
                    vec![not_found(), found("succeeded"), failed("timeout")],
                    false
                ),
                PollDecision::Close {
                    status: "succeeded".into(),
                    result: Some(serde_json::json!({"url": "u"})),
                    answer: "200 succeeded".into(),
                }
            );
        }
    }

    #[test]
    fn a_402_or_403_is_never_a_give_up() {
        for code in ["402", "403"] {
            let refused = Answer {
                text: code.into(),
                reply: Reply::Refused,
            };
            let d = decide(OLD, 3, vec![refused.clone(), not_found()], false);
            assert!(
                matches!(
                    d,
                    PollDecision::StillOpen {
                        next: NextPoll::Backoff(_),
                        ..
                    }
                ),
                "{d:?}"
            );
        }
        assert!(matches!(
            decide(OLD, 3, vec![failed("503")], false),
            PollDecision::GiveUp { .. }
        ));
    }

    #[test]
    fn an_in_flight_status_backs_off_and_counts() {
        let d = decide(YOUNG, 2, vec![found("running")], false);
        assert_eq!(
            d,
            PollDecision::StillOpen {
                answer: "200 running".into(),
                status: Some("running".into()),
                next: NextPoll::Backoff(Duration::from_secs(480)),
            }
        );
        let PollDecision::StillOpen { next, .. } = d else {
            unreachable!()
        };
        assert!(next.counts_as_attempt());
        let w = next.wait();
        assert!(w >= Duration::from_secs(384) && w <= Duration::from_secs(576));
        let capped = decide(YOUNG, 10, vec![found("queued")], false);
        assert!(matches!(
            capped,
            PollDecision::StillOpen { next: NextPoll::Backoff(d), .. } if d == RULES.max_interval
        ));
    }

    #[test]
    fn a_429_waits_its_retry_after_and_is_no_attempt() {
        let d = decide(YOUNG, 1, vec![limited(7), found("succeeded")], false);
        assert_eq!(
            d,
            PollDecision::StillOpen {
                answer: "429".into(),
                status: None,
                next: NextPoll::RetryAfter(Duration::from_secs(7)),
            }
        );
        assert!(!NextPoll::RetryAfter(Duration::from_secs(7)).counts_as_attempt());
        assert_eq!(
            NextPoll::RetryAfter(Duration::from_secs(7)).wait(),
            Duration::from_secs(7)
        );
    }

    #[test]
    fn not_found_and_errors_ask_the_next_key_and_keep_the_last_answer() {
        let mut fold = PollFold::new(RULES, YOUNG, 0);
        assert!(fold.read(not_found()));
        assert!(fold.read(failed("timeout")));
        assert_eq!(
            fold.decide(false),
            PollDecision::StillOpen {
                answer: "timeout".into(),
                status: None,
                next: NextPoll::Backoff(RULES.poll_after),
            }
        );
    }

    #[test]
    fn past_give_up_an_open_job_is_given_up_with_its_last_status() {
        let d = decide(OLD, 5, vec![found("queued")], false);
        let PollDecision::GiveUp { reason, status } = d else {
            panic!("{d:?}")
        };
        assert_eq!(status.as_deref(), Some("queued"));
        assert_eq!(
            reason,
            "no terminal status within POLL_GIVE_UP (1day); last answer: 200 queued"
        );
        let d = decide(OLD, 5, vec![failed("503")], false);
        assert!(
            matches!(&d, PollDecision::GiveUp { reason, status: None } if reason.ends_with("last answer: 503")),
            "{d:?}"
        );
        // A 429 past the give-up does not postpone it.
        assert!(matches!(
            decide(OLD, 5, vec![limited(60)], false),
            PollDecision::GiveUp { .. }
        ));
        // Just under the give-up it is still polled.
        assert!(matches!(
            decide(
                OLD - Duration::from_secs(1),
                5,
                vec![found("queued")],
                false
            ),
            PollDecision::StillOpen { .. }
        ));
    }

    #[test]
    fn nothing_asked_releases_the_claim_unless_past_give_up() {
        assert_eq!(decide(YOUNG, 0, vec![], false), PollDecision::Release);
        assert_eq!(decide(YOUNG, 0, vec![], true), PollDecision::Release);
        let d = decide(OLD, 0, vec![], false);
        assert!(
            matches!(&d, PollDecision::GiveUp { reason, status: None } if reason.ends_with("last answer: no answer from Sume")),
            "{d:?}"
        );
        assert_eq!(
            decide(OLD, 0, vec![], true),
            PollDecision::Release,
            "never given up on the way out"
        );
    }

    #[test]
    fn while_verdicts_are_held_nothing_is_given_up() {
        let held = PollRules {
            hold_verdicts: true,
            ..RULES
        };
        let mut fold = PollFold::new(held, OLD, 5);
        assert!(fold.read(not_found()));
        assert!(matches!(fold.decide(false), PollDecision::StillOpen { .. }));
        // A terminal status is Sume's word: it still closes.
        let mut fold = PollFold::new(held, OLD, 5);
        fold.read(found("completed"));
        assert!(matches!(fold.decide(false), PollDecision::Close { .. }));
    }
}
