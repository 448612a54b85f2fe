//! More than one daemon: two instances behind one address, and one instance restarted while
//! webhooks are flowing.

use std::time::Duration;

use serde_json::json;
use sume_sim::DurationRange;

use super::harness::{daemon_config, sim_config, Env, Plan, DEADLINE};
use crate::support::{wait_for, Daemon};

/// Two daemons on one database behind a round-robin proxy; a mix of early, duplicated and late
/// webhooks; a third of the jobs registered through the admin API of either daemon. Every job
/// converges, and both daemons took deliveries.
#[tokio::test(flavor = "multi_thread")]
async fn two_daemons_behind_one_address_converge_on_every_job() {
    const JOBS: usize = 150;
    let env = Env::start_fleet(sim_config(), 2).await;
    let submitted = env
        .submit_all(JOBS, |i| {
            let plan = Plan::sim(json!({
                "early": i % 4 == 1,
                "duplicate": u32::from(i % 5 == 0),
                "late_nonterminal": i % 7 == 3,
            }));
            match i % 3 {
                2 => plan.via_admin((i / 3) % 2),
                _ => plan,
            }
        })
        .await;
    env.converge(&submitted).await;

    let proxy = env.proxy.as_ref().expect("a proxy in front");
    let per_backend = proxy.connections();
    assert!(
        per_backend.iter().all(|&n| n > 0),
        "both daemons took deliveries: connections per daemon {per_backend:?}"
    );
    env.stop().await;
}

/// The daemon is stopped once a third of the webhooks are in, and a new one starts on the
/// same address after the simulator has seen ten attempts fail. With the simulator's retries
/// (100 ms doubling to 2 s, ten attempts) every job converges, and every delivery answered 2xx
/// (before, during or after the restart) is in the database.
#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_restarted_mid_run_loses_nothing_it_acknowledged() {
    const JOBS: usize = 150;
    const DOWN_FOR_FAILURES: usize = 10;
    let mut sim = sim_config();
    sim.timing.duration_short = DurationRange::millis(20, 3000);
    sim.delivery.webhook_backoff_base = Duration::from_millis(100);
    sim.delivery.webhook_backoff_factor = 2.0;
    sim.delivery.webhook_backoff_cap = Duration::from_secs(2);
    let mut env = Env::start(sim).await;
    let submissions = env.spawn_submissions(JOBS, |i| {
        Plan::sim(json!({"duplicate": u32::from(i % 5 == 0)}))
    });

    wait_for("a third of the webhooks delivered", DEADLINE, || async {
        env.deliveries().await.iter().filter(|d| d.ok).count() >= JOBS / 3
    })
    .await;
    let old = env.daemons.pop().expect("one daemon");
    let addr = old.webhook;
    old.stop().await;
    // Down for a while: until ten attempts have been refused (jobs keep ending for seconds).
    wait_for(
        "deliveries failing while no daemon listens",
        DEADLINE,
        || async { env.deliveries().await.iter().filter(|d| !d.ok).count() >= DOWN_FOR_FAILURES },
    )
    .await;
    let mut cfg = daemon_config(&env.db.url, &env.sim);
    cfg.listen_addr = addr;
    env.daemons.push(Daemon::start(cfg).await);

    let submitted = submissions.await.expect("submissions");
    let snap = env.converge(&submitted).await;
    let failed = snap.deliveries.iter().filter(|d| !d.ok).count();
    let retried = snap
        .deliveries
        .iter()
        .filter(|d| d.ok && d.attempt > 1)
        .count();
    assert!(
        failed >= DOWN_FOR_FAILURES && retried > 0,
        "the restart cost deliveries: {failed} failed attempts, {retried} retries answered 2xx"
    );
    env.stop().await;
}
