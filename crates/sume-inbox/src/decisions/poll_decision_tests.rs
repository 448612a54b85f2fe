//! The tests of `poll_decision.rs`: every decision, from the answers alone.

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
            result: Some(sume_wire::JsonText::of(&serde_json::json!({"url": "u"}))),
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
fn decide(age: Duration, attempts: i32, answers: Vec<Answer>, shutting_down: bool) -> PollDecision {
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
                result: Some(sume_wire::JsonText::of(&serde_json::json!({"url": "u"}))),
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
    let PollDecision::GiveUp {
        reason,
        status,
        blind,
    } = d
    else {
        panic!("{d:?}")
    };
    assert_eq!(status.as_deref(), Some("queued"));
    assert!(
        !blind,
        "Sume answered about the job: the give-up is a verdict"
    );
    assert_eq!(
        reason,
        "no terminal status within POLL_GIVE_UP (1day); last answer: 200 queued"
    );
    let d = decide(OLD, 5, vec![failed("503")], false);
    assert!(
        matches!(&d, PollDecision::GiveUp { reason, status: None, blind: true } if reason.ends_with("last answer: 503")),
        "{d:?}"
    );
    // A 429 past the give-up does not postpone it, but leaves it blind.
    assert!(matches!(
        decide(OLD, 5, vec![limited(60)], false),
        PollDecision::GiveUp { blind: true, .. }
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
        matches!(&d, PollDecision::GiveUp { reason, status: None, blind: true } if reason.ends_with("last answer: no answer from Sume")),
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

/// A give-up is blind unless Sume said something about the job itself: `running` under a key,
/// or 404 under every key asked (a job registered without a key is asked under each).
#[test]
fn a_give_up_is_blind_unless_sume_answered_about_the_job() {
    let give_up = |keys: usize, answers: Vec<Answer>| {
        let mut fold = PollFold::new(RULES, OLD, 5).with_keys(keys);
        for a in answers {
            if !fold.read(a) {
                break;
            }
        }
        match fold.decide(false) {
            PollDecision::GiveUp { blind, .. } => blind,
            d => panic!("{d:?}"),
        }
    };
    assert!(!give_up(1, vec![not_found()]), "404 under its own key");
    assert!(
        !give_up(2, vec![not_found(), not_found()]),
        "404 under every key"
    );
    assert!(
        give_up(2, vec![not_found(), failed("503")]),
        "one key never answered"
    );
    assert!(give_up(2, vec![not_found()]), "one key was not asked");
    assert!(!give_up(2, vec![failed("503"), found("running")]));
    assert!(give_up(1, vec![failed("timeout")]));
}
