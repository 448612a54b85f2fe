//! Sume's 402 (out of credits) and 403 (a key without the scope) against the sweep: counted
//! by key and code, retried later, never a verdict on a job (no give-up, nothing set aside).

use std::time::Duration;

use serde_json::json;
use sume_inbox::actors::sweep::PollStats;
use sume_inbox::metrics::ApiLabels;
use sume_sim::RunningSim;

use crate::support::*;
use crate::sweep::{clocked_config, create, sim_config, wait_ended, Sweep, MAIN_KEY};

async fn set_reads(http: &reqwest::Client, sim: &RunningSim, access: &str) {
    let r = http
        .patch(sim.sim_url("keys/main"))
        .json(&json!({ "reads": access }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

fn refused(sweep: &Sweep, code: &str) -> u64 {
    sweep
        .metrics
        .sume_refused
        .get_or_create(&ApiLabels {
            key: "main".into(),
            code: code.into(),
        })
        .get()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_402_or_403_is_counted_retried_and_never_a_verdict() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    // A job Sume completed whose webhook was dropped, and an event nobody registered.
    let id = create(
        &http,
        &sim,
        MAIN_KEY,
        None,
        json!({"drop": true, "duration_ms": 1}),
    )
    .await;
    wait_ended(&http, &sim, std::slice::from_ref(&id)).await;
    db.client()
        .await
        .execute(
            "insert into sume.jobs (job_id, order_id, api_key, created_at) values ($1, 'o', 'main', $2)",
            &[&id, &sweep.now()],
        )
        .await
        .unwrap();
    db.client()
        .await
        .execute(
            "insert into sume.events (event_id, job_id, status, body, signed_at, signature, received_at)
             values ('evt_waiting', 'job_not_registered', 'completed', '\\x7b7d', 0, 'v1=00', $1)",
            &[&sweep.now()],
        )
        .await
        .unwrap();
    // The key's own check passes first, so 404s would be verdicts: what follows is the
    // refusal's doing, not a held verdict's.
    assert_eq!(sweep.poll_once().await, PollStats::default());
    for (access, code) in [("out_of_credits", "402"), ("no_scope", "403")] {
        set_reads(&http, &sim, access).await;
        let before = refused(&sweep, code);
        sweep.advance(sweep.config.poll_give_up + Duration::from_secs(3600));
        let polled = sweep.poll_once().await;
        assert_eq!(
            (polled.given_up, polled.closed_by_poll),
            (0, 0),
            "{polled:?}"
        );
        assert_eq!(polled.still_open, 1, "{polled:?}");
        let checked = sweep.check_once().await;
        assert_eq!(checked.checks_inconclusive, 1, "{checked:?}");
        assert_eq!(
            (checked.foreign, checked.events_set_aside),
            (0, 0),
            "{checked:?}"
        );
        assert_eq!(
            refused(&sweep, code),
            before + 2,
            "one poll, one inbox check"
        );
        assert_eq!(job_state(&db, &id).await.as_deref(), Some("open"));
    }
    assert_eq!(
        db.scalar("select count(*) from sume.events where set_aside_at is not null")
            .await,
        0
    );
    // Reads work again: the next poll closes the job with Sume's own word.
    set_reads(&http, &sim, "ok").await;
    sweep.advance(sweep.config.poll_max_interval * 2);
    let polled = sweep.poll_once().await;
    assert_eq!(polled.closed_by_poll, 1, "{polled:?}");
    assert_eq!(job_state(&db, &id).await.as_deref(), Some("completed"));
}
