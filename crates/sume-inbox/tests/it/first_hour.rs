//! What a new user meets in the first hour: a daemon without SUME_API_KEYS says, in the
//! console and in `stats`, that its sweep asks Sume nothing; a job row naming a key no running
//! instance has is reported (the console, `stats`, a gauge) rather than silently never polled;
//! an empty inbox shows no "oldest waiting" age.

use std::time::Duration;

use sume_inbox::cli::render::render_stats;
use sume_inbox::db::{Store, NO_KEYS};

use crate::console::{Console, OPERATOR};
use crate::fleet::{console_with, first_heartbeat};
use crate::support::*;

const DEADLINE: Duration = Duration::from_secs(20);

async fn store(db: &TestDb) -> Store {
    Store::new(&db.url, 2).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn without_api_keys_the_console_and_stats_say_the_sweep_asks_sume_nothing() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.api_keys = vec![];
    let console = console_with(c).await;
    first_heartbeat(&db).await;

    let (status, _, overview) = console.get("/console/overview").await;
    assert_eq!(status, 200);
    assert!(overview.contains(NO_KEYS), "{overview}");
    assert!(
        !overview.contains("oldest waiting"),
        "an empty inbox has no oldest event: {overview}"
    );
    let (_, _, inbox) = console.get("/console/inbox").await;
    assert!(inbox.contains(NO_KEYS), "{inbox}");
    assert!(!inbox.contains("with every key"), "{inbox}");

    let stats = store(&db).await.stats_summary().await.unwrap();
    assert!(stats.sweep_has_no_keys(), "{stats:?}");
    assert_eq!((stats.instances_live, stats.instances_with_keys), (1, 0));
    let text = render_stats(&stats, false);
    assert!(text.contains(&format!("warning: {NO_KEYS}")), "{text}");
    assert!(!text.contains("oldest"), "{text}");
    console.daemon.stop().await;

    // Stopped, the instance no longer counts: nothing is claimed about a fleet not running.
    let stats = store(&db).await.stats_summary().await.unwrap();
    assert_eq!(stats.instances_live, 0, "{stats:?}");
    assert!(!stats.sweep_has_no_keys());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_naming_a_key_no_instance_has_is_reported_not_silently_left() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.api_keys = vec![sume_inbox::config::ApiKey {
        name: "main".into(),
        key: sume_wire::Secret::new("sk_main"),
    }];
    c.fleet = sume_inbox::config::FleetConfig {
        interval: Duration::from_millis(300),
    };
    let console = console_with(c).await;
    // As README's SQL registration would, with a key name this fleet does not have.
    let app = db.client().await;
    app.execute(
        "insert into sume.jobs (job_id, order_id, api_key) values
           ('job_typo', 'o1', 'mian'), ('job_ok', 'o2', 'main'), ('job_any', 'o3', null)",
        &[],
    )
    .await
    .unwrap();

    let http = reqwest::Client::new();
    wait_for("the gauge counts the job", DEADLINE, || async {
        let m = http
            .get(console.daemon.admin_url("/metrics"))
            .bearer_auth(OPERATOR)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        m.lines().any(|l| l == "sume_inbox_open_jobs_unknown_key 1")
    })
    .await;
    let stats = store(&db).await.stats_summary().await.unwrap();
    assert_eq!(stats.open_jobs_unknown_key, 1, "{stats:?}");
    assert!(!stats.sweep_has_no_keys());
    let text = render_stats(&stats, false);
    assert!(
        text.contains("1 open jobs name an api_key no running instance has"),
        "{text}"
    );
    let (_, _, overview) = console.get("/console/overview").await;
    assert!(
        overview.contains("open jobs naming an api_key no instance has"),
        "{overview}"
    );
    assert!(!overview.contains(NO_KEYS));

    // Closed, the job is no longer reported.
    app.execute(
        "update sume.jobs set state = 'completed', closed_at = now(), closed_by = 'webhook',
                sume_status = 'completed' where job_id = 'job_typo'",
        &[],
    )
    .await
    .unwrap();
    let stats = store(&db).await.stats_summary().await.unwrap();
    assert_eq!(stats.open_jobs_unknown_key, 0, "{stats:?}");
    jobs_page_lists_with_the_apis_filters(&console).await;
    console.daemon.stop().await;
}

/// The Jobs page without a search lists jobs, filtered as `GET /v1/jobs` filters them.
async fn jobs_page_lists_with_the_apis_filters(console: &Console) {
    let (status, _, all) = console.get("/console/jobs").await;
    assert_eq!(status, 200);
    for id in ["job_typo", "job_ok", "job_any"] {
        assert!(all.contains(id), "{id} listed: {all}");
    }
    let (status, _, open) = console.get("/console/jobs?state=open&closed_by=").await;
    assert_eq!(status, 200);
    assert!(
        open.contains("job_ok") && !open.contains(">job_typo<"),
        "{open}"
    );
    let (status, _, order) = console.get("/console/jobs?order_id=o3").await;
    assert_eq!(status, 200);
    assert!(
        order.contains("job_any") && !order.contains(">job_ok<"),
        "{order}"
    );
    let (status, _, bad) = console.get("/console/jobs?state=closed").await;
    assert_eq!(status, 400);
    assert!(
        bad.contains("state must be one of open, completed"),
        "{bad}"
    );
    let (status, _, bad) = console.get("/console/jobs?created_from=yesterday").await;
    assert_eq!(status, 400);
    assert!(
        bad.contains("registered from must be an RFC 3339 time"),
        "{bad}"
    );
}
