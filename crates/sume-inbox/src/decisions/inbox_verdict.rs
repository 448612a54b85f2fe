//! The inbox check's verdict, from the answers alone: [`CheckFold`] reads each key's answer
//! about one job id, beside those an earlier look recorded on the check (this instance's or
//! another's), and decides a [`CheckDecision`]. A key that reads the job makes it an orphan
//! (ours, with no row); 404 from every key the fleet holds is foreign (not ours); 404 from
//! every key asked while a key held by another instance has not answered 404 leaves the check
//! to that instance; anything else (429, 5xx, a timeout, a refused key) is inconclusive and
//! asked again after the poll's backoff. No database, no clock: `actors/sweep/inbox_check.rs`
//! asks, reads the fleet's keys and writes.

use std::collections::{BTreeMap, BTreeSet};
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
        /// Foreign (404 from every key the fleet holds) or orphan (a key can read it).
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
    /// Every key asked answered 404, but keys other instances hold have not: a key reads only
    /// its own member's jobs, so their 404 is still to come, or their read of the job. Record
    /// the answers and leave the check due: an instance holding those keys adds its answers
    /// to them (this one, with nothing left to ask, no longer claims it).
    LeftToOthers {
        /// Each key's answer so far.
        answers: Value,
        /// The keys whose 404 is missing.
        missing: Vec<String>,
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

/// How a key's 404 is recorded (`Answer::text` of [`Reply::NotFound`]).
const NOT_FOUND: &str = "404";

/// The answers about one job id, key by key, folded into a [`CheckDecision`]: those an earlier
/// look recorded on the check, and this look's, which replace them key by key.
#[derive(Debug, Clone, Default)]
pub struct CheckFold {
    recorded: BTreeMap<String, Value>,
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

    /// After the answers recorded on the check by earlier looks (`{"alt": "404"}`, as stored
    /// in `sume.inbox_checks.answers`; anything but an object records none).
    pub fn after(recorded: &Value) -> CheckFold {
        let recorded = match recorded {
            Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            _ => BTreeMap::new(),
        };
        CheckFold {
            recorded,
            ..CheckFold::default()
        }
    }

    /// Whether key `key_name` answered 404 about the job in an earlier look: it need not be
    /// asked again, since a key reads only its own member's jobs and a job stays its member's.
    pub fn answered_404(&self, key_name: &str) -> bool {
        self.recorded.get(key_name).and_then(Value::as_str) == Some(NOT_FOUND)
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
    /// `fleet_keys` are the names of the keys whose 404 a foreign verdict needs: this
    /// instance's and those the fleet's other instances hold.
    pub fn decide(
        self,
        fleet_keys: &BTreeSet<String>,
        attempts: i32,
        first: Duration,
        cap: Duration,
    ) -> CheckDecision {
        if self.unasked && self.answers.is_empty() {
            return CheckDecision::Release;
        }
        let next_in = backoff_base(attempts, first, cap);
        let mut all = self.recorded;
        all.extend(self.answers);
        let missing: Vec<String> = fleet_keys
            .iter()
            .filter(|k| all.get(*k).and_then(Value::as_str) != Some(NOT_FOUND))
            .cloned()
            .collect();
        if !self.found && !self.unasked && !self.inconclusive && missing.is_empty() {
            // The answers it rests on: a key no longer held said nothing that counts.
            all.retain(|k, _| fleet_keys.contains(k));
            return CheckDecision::Conclude {
                verdict: Verdict::Foreign,
                answers: Value::Object(all.into_iter().collect()),
            };
        }
        let answers = Value::Object(all.into_iter().collect());
        if self.found {
            CheckDecision::Conclude {
                verdict: Verdict::Orphan,
                answers,
            }
        } else if self.unasked || self.inconclusive {
            CheckDecision::Retry { answers, next_in }
        } else {
            CheckDecision::LeftToOthers { answers, missing }
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

    fn keys(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_key_left_unasked_after_another_answered_backs_off_not_releases() {
        let mut fold = CheckFold::new();
        fold.unasked("a");
        assert_eq!(
            fold.decide(&keys(&["a", "b"]), 0, FIRST, CAP),
            CheckDecision::Release
        );
        let mut fold = CheckFold::new();
        assert!(fold.read("a", not_found()));
        fold.unasked("b");
        assert_eq!(
            fold.decide(&keys(&["a", "b"]), 1, FIRST, CAP),
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
            fold.decide(&keys(&["a", "b"]), 0, FIRST, CAP),
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
            fold.decide(&keys(&["a", "b"]), 0, FIRST, CAP),
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
            fold.decide(&keys(&["a", "b"]), 2, FIRST, CAP),
            CheckDecision::Retry {
                answers: json!({"a": "404", "b": "429"}),
                next_in: Duration::from_secs(480),
            }
        );
        let mut fold = CheckFold::new();
        fold.read("a", answer("timeout", Reply::Failed));
        assert!(matches!(
            fold.decide(&keys(&["a"]), 20, FIRST, CAP),
            CheckDecision::Retry { next_in, .. } if next_in == CAP
        ));
    }

    #[test]
    fn a_404_from_every_key_asked_is_not_foreign_while_another_instance_s_key_has_not_answered() {
        let mut fold = CheckFold::new();
        assert!(fold.read("alt", not_found()));
        assert_eq!(
            fold.decide(&keys(&["alt", "main"]), 0, FIRST, CAP),
            CheckDecision::LeftToOthers {
                answers: json!({"alt": "404"}),
                missing: vec!["main".into()],
            }
        );
        // The other instance's look, after the first: it adds its 404, and the fleet's keys
        // have all answered.
        let mut fold = CheckFold::after(&json!({"alt": "404"}));
        assert!(fold.answered_404("alt") && !fold.answered_404("main"));
        assert!(fold.read("main", not_found()));
        assert_eq!(
            fold.decide(&keys(&["alt", "main"]), 1, FIRST, CAP),
            CheckDecision::Conclude {
                verdict: Verdict::Foreign,
                answers: json!({"alt": "404", "main": "404"}),
            }
        );
    }

    #[test]
    fn a_key_that_reads_it_after_another_s_404_makes_an_orphan_with_both_answers() {
        let mut fold = CheckFold::after(&json!({"alt": "404"}));
        let found = Reply::Found {
            status: "completed".into(),
            result: None,
        };
        assert!(!fold.read("main", answer("200 completed", found)));
        assert_eq!(
            fold.decide(&keys(&["alt", "main"]), 1, FIRST, CAP),
            CheckDecision::Conclude {
                verdict: Verdict::Orphan,
                answers: json!({"alt": "404", "main": "200 completed"}),
            }
        );
    }

    #[test]
    fn recorded_404s_need_no_new_answer_and_a_key_no_longer_held_no_longer_counts() {
        // Nothing left to ask here, and the other key is still held: left to its holder.
        let fold = CheckFold::after(&json!({"alt": "404", "main": "503"}));
        assert!(matches!(
            fold.decide(&keys(&["alt", "main"]), 3, FIRST, CAP),
            CheckDecision::LeftToOthers { missing, .. } if missing == ["main"]
        ));
        // Its holder gone for good, its key counts no more, nor does its answer.
        let fold = CheckFold::after(&json!({"alt": "404", "main": "503"}));
        assert_eq!(
            fold.decide(&keys(&["alt"]), 3, FIRST, CAP),
            CheckDecision::Conclude {
                verdict: Verdict::Foreign,
                answers: json!({"alt": "404"}),
            }
        );
        // A recorded answer that is no 404 is asked again, and this look's replaces it.
        let mut fold = CheckFold::after(&json!({"a": "429", "b": "404"}));
        assert!(!fold.answered_404("a"));
        assert!(fold.read("a", not_found()));
        assert_eq!(
            fold.decide(&keys(&["a", "b"]), 1, FIRST, CAP),
            CheckDecision::Conclude {
                verdict: Verdict::Foreign,
                answers: json!({"a": "404", "b": "404"}),
            }
        );
    }
}
