//! `POST /v1/jobs` under load and in a fleet: a burst of the same registration never starves
//! the pool, and a key name is judged against every live instance's keys, not this one's alone.

use futures_util::future::join_all;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_the_same_registration_is_answered_200_by_a_pool_of_two() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.db_pool_size = 2;
    let daemon = Daemon::start(c).await;
    let http = reqwest::Client::new();
    let first = api_register(&http, &daemon, "job_pre_1", "o").await;
    assert_eq!(first.status(), 201);
    // Each repeat once held its connection while asking the pool for a second: two at once
    // took both and waited for a third until the pool's wait ran out (503, "no database
    // connection"), and every other request waited behind them.
    let burst = (0..40).map(|_| api_register(&http, &daemon, "job_pre_1", "o"));
    let other = http.get(daemon.admin_url("/v1/jobs/job_other")).send();
    let (answers, other) = tokio::join!(join_all(burst), other);
    let statuses: Vec<u16> = answers.iter().map(|r| r.status().as_u16()).collect();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(other.unwrap().status(), 404);
    daemon.stop().await;
}
