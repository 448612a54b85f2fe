//! The tests of `job_fold.rs`: what each observation, and each group of observations that
//! arrived together, does to a job.

use super::*;

fn webhook(id: &str, status: &str) -> Observation {
    Observation {
        source: Source::Webhook,
        event_id: Some(id.to_owned()),
        status: Some(status.to_owned()),
        result: Some(sume_wire::JsonText::of(&serde_json::json!({"url": id}))),
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
    assert_eq!(
        job.result,
        Some(sume_wire::JsonText::of(&serde_json::json!({"url": "e2"})))
    );
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
fn two_different_terminal_states_arriving_together_close_nothing() {
    let mut job = open();
    let together = [
        webhook("e_completed", "completed"),
        webhook("e_failed", "failed"),
        webhook("e_running", "running"),
    ];
    let outcomes = job.apply_together(&together);
    assert_eq!(
        outcomes,
        [
            Outcome::Disagreement,
            Outcome::Disagreement,
            Outcome::Status
        ]
    );
    assert_eq!(job.state, JobState::Open, "neither is applied");
    assert!(job.contested && job.closed_by.is_none());
    let seen: Vec<JobState> = job.disagreements.iter().map(|d| d.seen).collect();
    assert_eq!(seen, [JobState::Completed, JobState::Failed]);
    assert!(job.disagreements.iter().all(|d| d.kept == JobState::Open));
    // Sume's answer, read by a poll, settles it through the same fold.
    assert_eq!(job.apply(&poll("failed")), Outcome::Closed);
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(job.closed_by, Some(Source::Poll));
}

#[test]
fn terminal_states_arriving_together_that_agree_close_as_usual() {
    let mut job = open();
    let together = [webhook("e1", "completed"), webhook("e2", "succeeded")];
    assert_eq!(
        job.apply_together(&together),
        [Outcome::Closed, Outcome::Ignored]
    );
    assert_eq!(job.state, JobState::Completed);
    assert!(!job.contested);
    // A job already closed by Sume's word keeps it; a contradiction is the usual one.
    let mut job = JobFold::new("j".into(), JobState::Completed, None);
    let together = [webhook("e1", "completed"), webhook("e2", "failed")];
    assert_eq!(
        job.apply_together(&together),
        [Outcome::Ignored, Outcome::Disagreement]
    );
    assert!(!job.contested && job.state == JobState::Completed);
    // A give-up is not replaced by a pair that contradicts itself.
    let mut job = JobFold::new("j".into(), JobState::Expired, None).given_up(true);
    let outcomes = job.apply_together(&together);
    assert_eq!(outcomes, [Outcome::Disagreement, Outcome::Disagreement]);
    assert!(job.contested && job.state == JobState::Expired && !job.changed());
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
