//! What asking again about a blind give-up does: a give-up decided while Sume gave no answer
//! about the job is the daemon's guess, so the job is asked about again (GIVE_UP_RECHECK) until
//! Sume says something about it. Pure, like [`super::poll_decision`]: the sweep's recheck
//! service asks, folds, and performs the [`RecheckDecision`].
//!
//! - a terminal status supersedes the give-up (through the same fold as a poll);
//! - `running` (or any in-flight status) lets the give-up stand: it is a real verdict now;
//! - 404 under every key asked, while verdicts are allowed (the keys are known to work), lets
//!   it stand too;
//! - anything else (no answer, a timeout, 429, 5xx, 402/403) is asked again later, at a cadence
//!   from `POLL_MAX_INTERVAL` doubling up to [`RECHECK_CAP`], until the recheck's end.

use std::time::Duration;

use super::backoff::backoff_base;
use crate::sume_api::{Answer, Reply};

/// The longest wait between two rechecks of one job.
pub const RECHECK_CAP: Duration = Duration::from_secs(6 * 3600);

/// What one recheck does.
#[derive(Debug, Clone, PartialEq)]
pub enum RecheckDecision {
    /// Sume's terminal status: it supersedes the give-up.
    Supersede {
        /// The status as spelt by Sume.
        status: String,
        /// The job's result or error, as JSON text.
        result: Option<sume_wire::JsonText>,
        /// The answer, as recorded.
        answer: String,
    },
    /// Sume answered about the job without ending it (`running`, or 404 under every key that
    /// works): the give-up stands, and the asking ends.
    Stands {
        /// The answer, as recorded.
        answer: String,
    },
    /// Still no answer about the job: ask again after `next` (before jitter).
    Again {
        /// The last answer, as recorded.
        answer: String,
        /// The wait before the next recheck.
        next: Duration,
    },
    /// Nothing was asked (no read to spare now, or shutdown): give the claim back untouched.
    Release,
}

/// The answers about one given-up job, key by key.
#[derive(Debug, Clone)]
pub struct RecheckFold {
    keys: usize,
    verdicts_allowed: bool,
    attempts: i32,
    first: Duration,
    not_found: usize,
    other: usize,
    last_answer: Option<String>,
    decided: Option<RecheckDecision>,
}

impl RecheckFold {
    /// A job to ask about under `keys` keys, rechecked `attempts` times before; `first` is the
    /// first wait (POLL_MAX_INTERVAL); `verdicts_allowed` says whether a 404 means what it says.
    pub fn new(keys: usize, verdicts_allowed: bool, attempts: i32, first: Duration) -> RecheckFold {
        RecheckFold {
            keys,
            verdicts_allowed,
            attempts,
            first,
            not_found: 0,
            other: 0,
            last_answer: None,
            decided: None,
        }
    }

    /// Adds one key's answer; false when no further key should be asked.
    pub fn read(&mut self, answer: Answer) -> bool {
        match answer.reply {
            Reply::Found { status, result } => {
                let terminal = sume_wire::Status::parse(&status).terminal().is_some();
                self.decided = Some(if terminal {
                    RecheckDecision::Supersede {
                        status,
                        result,
                        answer: answer.text,
                    }
                } else {
                    RecheckDecision::Stands {
                        answer: answer.text,
                    }
                });
                false
            }
            Reply::NotFound => {
                self.not_found += 1;
                self.last_answer = Some(answer.text);
                true
            }
            Reply::RateLimited { .. } => {
                self.other += 1;
                self.last_answer = Some(answer.text);
                false
            }
            Reply::Refused | Reply::Failed => {
                self.other += 1;
                self.last_answer = Some(answer.text);
                true
            }
        }
    }

    /// The decision, once every key was asked or the asking stopped.
    pub fn decide(mut self) -> RecheckDecision {
        if let Some(decided) = self.decided.take() {
            return decided;
        }
        let Some(answer) = self.last_answer.take() else {
            return RecheckDecision::Release;
        };
        if self.verdicts_allowed && self.other == 0 && self.not_found == self.keys {
            return RecheckDecision::Stands { answer };
        }
        RecheckDecision::Again {
            answer,
            next: backoff_base(self.attempts, self.first, RECHECK_CAP.max(self.first)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: Duration = Duration::from_secs(1800);

    fn answer(text: &str, reply: Reply) -> Answer {
        Answer {
            text: text.into(),
            reply,
        }
    }

    fn found(status: &str) -> Answer {
        answer(
            &format!("200 {status}"),
            Reply::Found {
                status: status.into(),
                result: None,
            },
        )
    }

    fn fold(keys: usize, allowed: bool, answers: Vec<Answer>) -> RecheckDecision {
        let mut f = RecheckFold::new(keys, allowed, 0, FIRST);
        for a in answers {
            if !f.read(a) {
                break;
            }
        }
        f.decide()
    }

    #[test]
    fn sumes_terminal_status_supersedes_and_running_lets_the_give_up_stand() {
        assert!(matches!(
            fold(1, true, vec![found("completed")]),
            RecheckDecision::Supersede { status, .. } if status == "completed"
        ));
        assert!(matches!(
            fold(
                2,
                false,
                vec![answer("503", Reply::Failed), found("failed")]
            ),
            RecheckDecision::Supersede { .. }
        ));
        assert_eq!(
            fold(1, true, vec![found("running")]),
            RecheckDecision::Stands {
                answer: "200 running".into()
            }
        );
    }

    #[test]
    fn a_404_stands_only_under_every_key_while_the_keys_are_known_to_work() {
        let nf = || answer("404", Reply::NotFound);
        assert!(matches!(
            fold(2, true, vec![nf(), nf()]),
            RecheckDecision::Stands { .. }
        ));
        assert!(matches!(
            fold(2, false, vec![nf(), nf()]),
            RecheckDecision::Again { .. }
        ));
        assert!(matches!(
            fold(2, true, vec![nf(), answer("timeout", Reply::Failed)]),
            RecheckDecision::Again { .. }
        ));
        assert!(matches!(
            fold(2, true, vec![nf()]),
            RecheckDecision::Again { .. }
        ));
    }

    #[test]
    fn no_answer_asks_again_later_and_nothing_asked_releases() {
        let limited = answer(
            "429",
            Reply::RateLimited {
                retry_in: Duration::from_secs(5),
            },
        );
        assert_eq!(
            fold(1, true, vec![limited]),
            RecheckDecision::Again {
                answer: "429".into(),
                next: FIRST
            }
        );
        let mut later = RecheckFold::new(1, true, 10, FIRST);
        later.read(answer("503", Reply::Failed));
        assert!(
            matches!(later.decide(), RecheckDecision::Again { next, .. } if next == RECHECK_CAP)
        );
        assert_eq!(fold(1, true, vec![]), RecheckDecision::Release);
    }
}
