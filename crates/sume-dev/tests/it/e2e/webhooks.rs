//! Webhooks against the submit path: early ones (before the row can exist), duplicated ones,
//! and a `job.running` arriving after the terminal event.

use serde_json::json;
use sume_dev::submit::Registration;
use sume_sim::DeliveryKind;

use super::harness::{sim_config, state_of, Env, Plan};

/// Every webhook is sent, and answered, before its create call answers: no job row can exist
/// yet. Half the jobs register in the order's transaction, half through the admin API.
#[tokio::test(flavor = "multi_thread")]
async fn early_webhooks_wait_in_the_inbox_until_their_rows_commit() {
    const JOBS: usize = 100;
    let env = Env::start(sim_config()).await;
    let submitted = env
        .submit_all(JOBS, |i| {
            let plan = Plan::sim(json!({"early": true}));
            if i % 2 == 0 {
                plan
            } else {
                plan.via_admin(0)
            }
        })
        .await;
    let snap = env.converge(&submitted).await;

    let mut acknowledged_early = 0;
    for s in &submitted {
        let truth = &snap.truth[&s.job_id];
        assert!(truth.faults.early, "{}: not early", s.job_id);
        let first = snap.deliveries_of(&s.job_id)[0];
        assert!(
            first.early && first.attempt == 1,
            "{}: the first attempt went out before the 202",
            s.job_id
        );
        // A 503 under load would be legitimate (the simulator retries); a 2xx must mean the
        // event was stored before the job row existed.
        if first.ok {
            acknowledged_early += 1;
            let event = snap
                .events_of(&s.job_id)
                .into_iter()
                .find(|e| e.event_id == truth.event_id)
                .expect("the terminal event is stored");
            let row = &snap.jobs[&s.job_id];
            assert!(
                event.received_at < row.created_at,
                "{}: the event ({}) was stored before the row existed ({})",
                s.job_id,
                event.received_at,
                row.created_at
            );
            if let Registration::Admin { created, job } = &s.registration {
                assert!(created, "{}: a first registration answers 201", s.job_id);
                assert_eq!(
                    job["state"].as_str(),
                    state_of(&truth.final_status),
                    "{}: the admin API attaches the waiting event before it answers",
                    s.job_id
                );
            }
        }
    }
    assert!(acknowledged_early > 0, "no early webhook was answered 2xx");
    env.stop().await;
}

/// Every job's terminal event is delivered three times (twice more after the first 2xx);
/// half of them early as well. One event row per event id, one close per job.
#[tokio::test(flavor = "multi_thread")]
async fn duplicate_deliveries_are_stored_once_and_close_once() {
    const JOBS: usize = 100;
    let env = Env::start(sim_config()).await;
    let submitted = env
        .submit_all(JOBS, |i| {
            Plan::sim(json!({"duplicate": 2, "early": i % 2 == 0}))
        })
        .await;
    let snap = env.converge(&submitted).await;

    for s in &submitted {
        let truth = &snap.truth[&s.job_id];
        let delivered: Vec<_> = snap
            .deliveries_of(&s.job_id)
            .into_iter()
            .filter(|d| d.ok)
            .collect();
        assert_eq!(
            delivered
                .iter()
                .filter(|d| d.kind == DeliveryKind::Duplicate)
                .count(),
            2,
            "{}: two duplicates answered 2xx",
            s.job_id
        );
        assert!(delivered.iter().all(|d| d.event_id == truth.event_id));
        let events = snap.events_of(&s.job_id);
        assert_eq!(events.len(), 1, "{}: one row for one event id", s.job_id);
        assert_eq!(events[0].outcome.as_deref(), Some("closed"));
    }
    env.stop().await;
}

/// A `job.running` (its own event id) follows every terminal event; the terminal outcomes
/// vary. The job stays in its terminal state and the running event is recorded as ignored.
#[tokio::test(flavor = "multi_thread")]
async fn a_late_running_event_never_reopens_a_job() {
    const JOBS: usize = 100;
    let outcomes = ["completed", "failed", "canceled", "expired"];
    let env = Env::start(sim_config()).await;
    let submitted = env
        .submit_all(JOBS, |i| {
            Plan::sim(json!({"late_nonterminal": true, "outcome": outcomes[i % 4]}))
        })
        .await;
    let snap = env.converge(&submitted).await;

    for s in &submitted {
        let truth = &snap.truth[&s.job_id];
        let running_id = sume_sim::event_id(&s.job_id, "job.running");
        let late = snap.deliveries_of(&s.job_id);
        assert!(
            late.iter()
                .any(|d| d.kind == DeliveryKind::Late && d.ok && d.event_id == running_id),
            "{}: the late event was delivered",
            s.job_id
        );
        let events = snap.events_of(&s.job_id);
        assert_eq!(events.len(), 2, "{}: terminal and running", s.job_id);
        let running = events
            .iter()
            .find(|e| e.event_id == running_id)
            .expect("the running event is stored");
        assert_eq!(running.status.as_deref(), Some("running"));
        assert_eq!(
            running.outcome.as_deref(),
            Some("ignored"),
            "{}: an in-flight status after the close changes nothing",
            s.job_id
        );
        let terminal = events
            .iter()
            .find(|e| e.event_id == truth.event_id)
            .expect("the terminal event is stored");
        assert_eq!(terminal.outcome.as_deref(), Some("closed"));
        let row = &snap.jobs[&s.job_id];
        assert_eq!(
            row.sume_status.as_deref(),
            Some(truth.final_status.as_str())
        );
    }
    let (stored, truth) = snap.states();
    assert_eq!(stored, truth);
    env.stop().await;
}
