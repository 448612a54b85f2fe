//! The health checks on the public port cost the database nothing per request: anyone can
//! call them, as often as they like.

use std::time::Duration;

use crate::support::*;

/// Transactions the test database has seen, as PostgreSQL's statistics tell (they are flushed
/// by each backend about once a second, hence the pauses around each reading).
async fn transactions(db: &TestDb) -> i64 {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let c = db.client().await;
    c.batch_execute("select pg_stat_clear_snapshot()")
        .await
        .unwrap();
    c.query_one(
        "select (xact_commit + xact_rollback)::int8 from pg_stat_database
         where datname = current_database()",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_readiness_checks_costs_the_database_nothing_per_request() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/readyz");
    assert_eq!(http.get(&url).send().await.unwrap().status(), 200);

    // The daemon's own background work over a quiet while, for comparison.
    let quiet_start = transactions(&db).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let quiet = transactions(&db).await - quiet_start;

    let flood_start = transactions(&db).await;
    let started = tokio::time::Instant::now();
    let checks = futures_util::future::join_all((0..16).map(|_| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let mut n = 0;
            while started.elapsed() < Duration::from_secs(2) {
                let r = http.get(&url).send().await.unwrap();
                assert_eq!(r.status(), 200);
                n += 1;
            }
            n
        }
    }))
    .await
    .into_iter()
    .sum::<i64>();
    let flood = transactions(&db).await - flood_start;
    assert!(checks >= 1_000, "only {checks} checks were answered");
    // A handful of cached checks (one a second) beside the background work; one per request
    // would be thousands. The statistics of idle connections reach pg_stat_database up to
    // seconds late, so the background work of other moments (start-up, the fleet's write)
    // may land in either window: the bound is a tenth of the checks, not the quiet window.
    assert!(
        flood * 10 < checks,
        "{checks} readiness checks cost {flood} transactions (quiet: {quiet})"
    );
    daemon.stop().await;
}

/// A database that takes no writes (a hot standby after a failover, a URL naming the wrong
/// host; here `default_transaction_read_only`) stores no webhook: `/readyz` says so, naming what
/// to fix, so that a load balancer stops sending to an instance that can only answer 503.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_database_is_not_ready() {
    let db = TestDb::new().await;
    let c = db.client().await;
    let mut migrating = db.client().await;
    sume_inbox::db::migrate::migrate(&mut migrating)
        .await
        .unwrap();
    c.batch_execute(
        "do $$ begin
           execute format('alter database %I set default_transaction_read_only = on',
                          current_database());
         end $$",
    )
    .await
    .unwrap();
    let daemon = Daemon::serving(config(&db.url)).await;
    let http = reqwest::Client::new();
    let ready = http.get(daemon.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let said = ready.text().await.unwrap();
    assert!(
        said.contains("read-only") && said.contains("target_session_attrs=read-write"),
        "{said}"
    );
    let refused = Delivery::completed("job_read_only")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    assert_eq!(refused.status(), 503);
    daemon.stop().await;
}
