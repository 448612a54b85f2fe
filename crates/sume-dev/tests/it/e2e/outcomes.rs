//! How jobs end: every terminal status the simulator can draw, and deliveries the daemon must
//! refuse (signed with a secret it does not hold).

use std::collections::BTreeMap;

use serde_json::json;
use sume_sim::{BodyShape, WebhookState};

use super::harness::{sim_config, Env, Plan};

/// A quarter of the jobs each completes, fails, is canceled and expires, in both webhook body
/// shapes: every job ends in the simulator's true state, with its outcome stored.
#[tokio::test(flavor = "multi_thread")]
async fn failed_canceled_and_expired_jobs_end_as_the_simulator_says() {
    const JOBS: usize = 120;
    let outcomes = ["completed", "failed", "canceled", "expired"];
    let mut sim = sim_config();
    sim.body_shape = BodyShape::Mixed;
    let env = Env::start(sim).await;
    let submitted = env
        .submit_all(JOBS, |i| Plan::sim(json!({"outcome": outcomes[i % 4]})))
        .await;
    let snap = env.converge(&submitted).await;

    let (stored, truth) = snap.states();
    assert_eq!(stored, truth);
    let expected: BTreeMap<String, usize> =
        outcomes.iter().map(|o| (o.to_string(), JOBS / 4)).collect();
    assert_eq!(stored, expected, "each outcome a quarter of the jobs");
    for s in &submitted {
        let truth = &snap.truth[&s.job_id];
        let row = &snap.jobs[&s.job_id];
        let result = row
            .result
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no result stored", s.job_id))
            .to_string();
        if truth.final_status == "completed" {
            assert!(result.contains(&s.job_id), "{}: the output URLs", s.job_id);
        } else {
            assert!(result.contains("\"error\""), "{}: the error", s.job_id);
        }
    }
    let shapes: std::collections::HashSet<&str> =
        snap.truth.values().map(|t| t.body_shape.as_str()).collect();
    assert_eq!(shapes.len(), 2, "both body shapes were sent: {shapes:?}");
    env.stop().await;
}

/// Every third job's webhook is signed with a secret nobody holds: the daemon answers 401 to
/// each of its ten attempts and stores nothing for it, while the other jobs are unaffected.
#[tokio::test(flavor = "multi_thread")]
async fn wrongly_signed_deliveries_spend_every_attempt_and_store_nothing() {
    const JOBS: usize = 90;
    let env = Env::start(sim_config()).await;
    let submitted = env
        .submit_all(JOBS, |i| Plan::sim(json!({"wrong_secret": i % 3 == 0})))
        .await;
    let snap = env.converge(&submitted).await;

    let mut refused = 0;
    for s in &submitted {
        let truth = &snap.truth[&s.job_id];
        if !truth.faults.wrong_secret {
            assert_eq!(truth.webhook.state, WebhookState::Delivered);
            continue;
        }
        refused += 1;
        assert_eq!(truth.webhook.state, WebhookState::GaveUp, "{}", s.job_id);
        let attempts = snap.deliveries_of(&s.job_id);
        assert_eq!(attempts.len(), 10, "{}: all ten attempts spent", s.job_id);
        for d in &attempts {
            assert!(d.wrong_secret, "{}: attempt {}", s.job_id, d.attempt);
            assert_eq!(
                d.http_status,
                Some(401),
                "{}: attempt {} answered {}",
                s.job_id,
                d.attempt,
                d.answer
            );
        }
        assert!(
            snap.events_of(&s.job_id).is_empty(),
            "{}: no event",
            s.job_id
        );
        let row = &snap.jobs[&s.job_id];
        assert_ne!(row.closed_by.as_deref(), Some("webhook"), "{}", s.job_id);
    }
    assert_eq!(refused, JOBS / 3);
    env.stop().await;
}
