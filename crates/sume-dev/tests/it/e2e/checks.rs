//! The end-of-run checks themselves: after a clean run they hold, and each kind of damage a
//! daemon bug would leave behind makes them fail. Without this, a vacuous check would let
//! every scenario pass.

use super::harness::{sim_config, Env, Plan};

#[tokio::test(flavor = "multi_thread")]
async fn the_checks_catch_a_lost_event_a_wrong_state_and_a_waiting_event() {
    const JOBS: usize = 12;
    let mut env = Env::start(sim_config()).await;
    let submitted = env.submit_all(JOBS, |_| Plan::default()).await;
    env.converge(&submitted).await;
    // Nothing may repair the damage before it is looked at.
    for daemon in env.daemons.drain(..) {
        daemon.stop().await;
    }
    let db = env.db.client().await;
    let fails_with = |needle: &'static str| {
        let env = &env;
        let submitted = &submitted;
        async move {
            let why = env
                .snapshot()
                .await
                .check(submitted)
                .expect_err("the damage goes unnoticed");
            assert!(why.contains(needle), "expected {needle:?} in:\n{why}");
        }
    };

    // An event acknowledged to the simulator, then lost.
    let (lost, job) = (&submitted[0].job_id, &submitted[1].job_id);
    db.execute("delete from sume.events where job_id = $1", &[lost])
        .await
        .unwrap();
    fails_with("but its event is not stored").await;
    // A job in a state the simulator never reported.
    db.execute(
        "update sume.jobs set state = 'expired', sume_status = 'expired' where job_id = $1",
        &[job],
    )
    .await
    .unwrap();
    fails_with("the simulator says completed").await;
    // An event waiting for a row that exists.
    db.execute(
        "insert into sume.events (event_id, job_id, status, body, signed_at, signature)
         values ('evt_stuck', $1, 'completed', '\\x7b7d', 0, 'v1=00')",
        &[&submitted[2].job_id],
    )
    .await
    .unwrap();
    fails_with("waits unapplied though the job row exists").await;
    env.stop().await;
}
