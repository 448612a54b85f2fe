//! `sume-dev demo` (what `make run` shows) converges and says so truthfully.

use std::time::Duration;

use sume_dev::demo::{run_demo, DemoArgs};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn the_demo_converges_and_reports_what_happened() {
    let db = TestDb::new().await;
    let report = run_demo(DemoArgs {
        database_url: db.url.clone(),
        jobs: 40,
        foreign_jobs: 6,
        instances: 2,
        concurrency: 8,
        slow_work_ms: 300,
        deadline: Duration::from_secs(90),
    })
    .await
    .unwrap();
    assert!(report.all_match(), "{report}");
    assert_eq!(report.submitted, 40);
    assert_eq!(
        report.closed_by_webhook + report.closed_by_poll + report.given_up,
        40
    );
    assert_eq!(report.states.iter().map(|(_, n)| n).sum::<i64>(), 40);
    // The report's numbers are the database's.
    assert_eq!(
        db.scalar("select count(*) from sume.jobs where closed_by = 'poll'")
            .await,
        report.closed_by_poll
    );
    assert_eq!(
        db.scalar("select count(*) from sume.events where set_aside_at is not null")
            .await,
        report.foreign_set_aside
    );
    assert_eq!(
        db.scalar(
            "select count(*) from sume.events where applied_at is null and set_aside_at is null"
        )
        .await,
        0
    );
    let text = report.to_string();
    assert!(
        text.contains("every job's state matches the simulator's truth: 40/40"),
        "{text}"
    );
}
