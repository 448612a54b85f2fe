//! The inbox check's verdict, from the answers alone: [`CheckFold`] reads each key's answer
//! about one job id and decides a [`CheckDecision`]. 404 from every key is foreign (not ours),
//! a key that reads the job makes it an orphan (ours, with no row), anything else (429, 5xx, a
//! timeout, a refused key) is inconclusive and asked again after the poll's backoff. No
//! database, no clock: `actors/sweep/inbox_check.rs` asks and writes.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::db::Verdict;
use crate::decisions::backoff::backoff_base;
use crate::sume_api::{Answer, Reply};

/// What a check concludes.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckDecision {
    /// A verdict, with each key's answer (`{"main": "404"}`).
    Conclude {
        /// Foreign (404 everywhere) or orphan (a key can read it).
        verdict: Verdict,
        /// Each key's answer.
        answers: Value,
    },
    /// Inconclusive: record the answers, look again after the backoff step (before jitter).
    Retry {
        /// Each key's answer so far.
        answers: Value,
        /// When to look again, before jitter.
        next_in: Duration,
    },
    /// The first key could not be asked (no budget, shutdown): nothing was spent, so give the
    /// claim back untouched. (A key left unasked after others answered is a [`Retry`]: asking
    /// the others again at once would spend their reads on every pass.)
    ///
    /// [`Retry`]: CheckDecision::Retry
    Release,
}

/// What a key left unasked is recorded as answering.
const UNASKED: &str = "not asked: no read left for this key";

/// The answers about one job id, key by key, folded into a [`CheckDecision`].
#[derive(Debug, Clone, Default)]
pub struct CheckFold {
    answers: BTreeMap<String, Value>,
    found: bool,
    inconclusive: bool,
    unasked: bool,
}

impl CheckFold {
    /// No answer yet.
    pub fn new() -> CheckFold {
        CheckFold::default()
    }

    /// Adds the answer of key `key_name`; false when no further key should be asked.
    pub fn read(&mut self, key_name: &str, answer: Answer) -> bool {
        self.answers
            .insert(key_name.to_owned(), Value::String(answer.text));
        match answer.reply {
            Reply::Found { .. } => {
                self.found = true;
                false
            }
            Reply::NotFound => true,
            Reply::RateLimited { .. } | Reply::Refused | Reply::Failed => {
                self.inconclusive = true;
                true
            }
        }
    }

    /// Key `key_name` was left unasked (no budget before the lease ends, or shutdown).
    pub fn unasked(&mut self, key_name: &str) {
        self.unasked = true;
        if !self.answers.is_empty() {
            self.answers
                .insert(key_name.to_owned(), Value::String(UNASKED.to_owned()));
        }
    }

    /// The decision for a check tried `attempts` times before, with the poll's timings.
    pub fn decide(self, attempts: i32, first: Duration, cap: Duration) -> CheckDecision {
        if self.unasked && self.answers.is_empty() {
            return CheckDecision::Release;
        }
        let answers = Value::Object(self.answers.into_iter().collect());
        match (self.found, self.inconclusive) {
            (true, _) => CheckDecision::Conclude {
                verdict: Verdict::Orphan,
                answers,
            },
            (false, _) if self.unasked => CheckDecision::Retry {
                answers,
                next_in: backoff_base(attempts, first, cap),
            },
            (false, false) => CheckDecision::Conclude {
                verdict: Verdict::Foreign,
                answers,
            },
            (false, true) => CheckDecision::Retry {
                answers,
                next_in: backoff_base(attempts, first, cap),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FIRST: Duration = Duration::from_secs(120);
    const CAP: Duration = Duration::from_secs(1800);

    fn answer(text: &str, reply: Reply) -> Answer {
        Answer {
            text: text.into(),
            reply,
        }
    }

    fn not_found() -> Answer {
        answer("404", Reply::NotFound)
    }

    #[test]
    fn a_key_left_unasked_after_another_answered_backs_off_not_releases() {
        let mut fold = CheckFold::new();
        fold.unasked("a");
        assert_eq!(fold.decide(0, FIRST, CAP), CheckDecision::Release);
        let mut fold = CheckFold::new();
        assert!(fold.read("a", not_found()));
        fold.unasked("b");
        assert_eq!(
            fold.decide(1, FIRST, CAP),
            CheckDecision::Retry {
                answers: json!({"a": "404", "b": UNASKED}),
                next_in: Duration::from_secs(240),
            }
        );
    }

    #[test]
    fn every_key_404_is_foreign() {
        let mut fold = CheckFold::new();
        assert!(fold.read("a", not_found()));
        assert!(fold.read("b", not_found()));
        assert_eq!(
            fold.decide(0, FIRST, CAP),
            CheckDecision::Conclude {
                verdict: Verdict::Foreign,
                answers: json!({"a": "404", "b": "404"}),
            }
        );
    }

    #[test]
    fn a_key_that_reads_it_makes_an_orphan_and_stops_the_asking() {
        let mut fold = CheckFold::new();
        assert!(fold.read("a", answer("503", Reply::Failed)));
        let found = Reply::Found {
            status: "completed".into(),
            result: None,
        };
        assert!(!fold.read("b", answer("200 completed", found)));
        assert_eq!(
            fold.decide(0, FIRST, CAP),
            CheckDecision::Conclude {
                verdict: Verdict::Orphan,
                answers: json!({"a": "503", "b": "200 completed"}),
            }
        );
    }

    #[test]
    fn a_404_beside_a_429_or_timeout_is_inconclusive_and_backs_off() {
        let mut fold = CheckFold::new();
        fold.read("a", not_found());
        let limited = Reply::RateLimited {
            retry_in: Duration::from_secs(5),
        };
        assert!(fold.read("b", answer("429", limited)));
        assert_eq!(
            fold.decide(2, FIRST, CAP),
            CheckDecision::Retry {
                answers: json!({"a": "404", "b": "429"}),
                next_in: Duration::from_secs(480),
            }
        );
        let mut fold = CheckFold::new();
        fold.read("a", answer("timeout", Reply::Failed));
        assert!(matches!(
            fold.decide(20, FIRST, CAP),
            CheckDecision::Retry { next_in, .. } if next_in == CAP
        ));
    }
}
