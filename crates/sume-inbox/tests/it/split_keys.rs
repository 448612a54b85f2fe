//! A fleet whose instances hold different Sume keys (a key per team member, a key being rolled
//! out): a key reads only its own member's jobs, so one instance's 404s say nothing of a job
//! another instance's key can read. The inbox check's "foreign" verdict waits for a 404 from
//! every key the fleet holds; a key whose holders have all been silent five minutes counts no
//! more.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use sume_inbox::actors::sweep::{Clock, InboxCheck, InboxCheckStats};
use sume_inbox::config::{ApiKey, SweepConfig};
use sume_inbox::db::Store;
use sume_inbox::metrics::Metrics;
use sume_inbox::sume_api::StatusReader;
use sume_sim::{RunningSim, SimConfig};
use sume_wire::Secret;
use tokio_util::sync::CancellationToken;

use crate::support::*;
use crate::sweep::{
    clocked_config, count, create, daemon_config, db_now, sim_config, sweep_config, wait_ended,
    MAIN_KEY,
};

/// The secret of `alt`: another member of our workspace, who cannot read `main`'s jobs.
const ALT_KEY: &str = "sk_test_alt";

fn alt_key() -> ApiKey {
    ApiKey {
        name: "alt".into(),
        key: Secret::new(ALT_KEY),
    }
}

/// The simulator of the sweep's tests, with `alt` beside `main` in our workspace.
fn split_sim_config() -> SimConfig {
    sim_config().with_key("alt", ALT_KEY, "mem_alt", "ws_ours")
}

/// An inbox check outside any daemon, as `store_url`'s role, with `keys`, on a clock stopped
/// at the database's time.
pub(crate) async fn inbox_check(
    db: &TestDb,
    store_url: &str,
    api_url: &str,
    keys: Vec<ApiKey>,
) -> (InboxCheck, Clock, SweepConfig) {
    crate::sweep::migrate(db).await;
    let config = clocked_config();
    let store = Store::new(store_url, 4).unwrap();
    let metrics = Arc::new(Metrics::new());
    let client = sume_wire::StatusClient::new(api_url, config.request_timeout).unwrap();
    let reader = StatusReader::new(
        store.clone(),
        metrics.clone(),
        client,
        keys,
        config.read_rate,
    );
    let clock = Clock::fixed(db_now(db).await);
    let check = InboxCheck::new(store, metrics, reader, config.clone(), clock.clone());
    (check, clock, config)
}

pub(crate) async fn check_once(check: &InboxCheck) -> InboxCheckStats {
    check.run_once(&CancellationToken::new()).await.unwrap()
}

/// An event of `job_id`, received at `at`, with no job row.
pub(crate) async fn waiting_event(db: &TestDb, job_id: &str, at: chrono::DateTime<chrono::Utc>) {
    db.client()
        .await
        .execute(
            "insert into sume.events (event_id, job_id, event_type, status, body, signed_at, signature, received_at)
             values ($1 || '/job.completed', $1, 'job.completed', 'completed', '\\x7b7d', 0, 'v1=0', $2)",
            &[&job_id, &at],
        )
        .await
        .unwrap();
}

/// Two daemons on one database, A holding `main`, B holding `alt`; ten of `main`'s jobs whose
/// webhooks come in with no row. B (whose passes come often) judged every job it claimed
/// foreign on `alt`'s 404 alone, setting its events aside: the recovery path of an orphan
/// (kept waiting, then a dead letter to replay) was lost. Now B leaves them to A, whose key
/// reads them: every one is an orphan.
#[tokio::test(flavor = "multi_thread")]
async fn in_a_fleet_holding_different_keys_our_jobs_are_orphans_never_foreign() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(split_sim_config()).await.unwrap();
    let a_sweep = SweepConfig {
        interval: Duration::from_secs(3),
        ..sweep_config()
    };
    let a = Daemon::start(daemon_config(&db, &sim, a_sweep)).await;
    let mut b_config = daemon_config(&db, &sim, sweep_config());
    b_config.api_keys = vec![alt_key()];
    let b = Daemon::start(b_config).await;
    wait_for("both heartbeats", Duration::from_secs(20), || async {
        count(&db, "select count(*) from sume.instances").await == 2
    })
    .await;
    let http = reqwest::Client::new();
    let mut jobs = Vec::new();
    for i in 0..10 {
        let hook = [&a, &b][i % 2].url("/webhooks/sume");
        let overrides = json!({"duration_ms": 20});
        jobs.push(create(&http, &sim, MAIN_KEY, Some(&hook), overrides).await);
    }
    wait_ended(&http, &sim, &jobs).await;
    wait_for("every check judged", Duration::from_secs(60), || async {
        count(
            &db,
            "select count(*) from sume.inbox_checks where verdict <> 'pending'",
        )
        .await
            == 10
    })
    .await;
    let c = db.client().await;
    for row in c
        .query(
            "select job_id, verdict, answers from sume.inbox_checks",
            &[],
        )
        .await
        .unwrap()
    {
        let (job, verdict, answers): (String, String, Value) = (row.get(0), row.get(1), row.get(2));
        assert_eq!(verdict, "orphan", "{job}: {answers}");
        assert_eq!(answers["main"], "200 completed", "{job}: {answers}");
    }
    assert_eq!(
        count(
            &db,
            "select count(*) from sume.events where set_aside_at is not null"
        )
        .await,
        0,
        "no event of ours set aside"
    );
    a.stop().await;
    b.stop().await;
}

/// An instance holding `alt` alone, beside another holding `main`: its 404 leaves the check to
/// `main`'s holder, and it claims the check no more; `main`'s holder stopped (a restart) still
/// counts, and once it has been silent five minutes (gone for good) `main` counts no more and
/// the job is foreign on `alt`'s 404, without asking `alt` again.
#[tokio::test(flavor = "multi_thread")]
async fn a_404_waits_for_every_key_the_fleet_holds_until_a_key_s_holders_are_gone() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(split_sim_config()).await.unwrap();
    let (check, clock, config) = inbox_check(&db, &db.url, &sim.api_url(), vec![alt_key()]).await;
    let c = db.client().await;
    c.execute(
        "insert into sume.instances (instance, hostname, pid, version, started_at, last_seen, \
         tasks, api_keys) values ('main-1', 'h', 1, 'v', now(), now(), \
         '{\"sweep\": \"running\"}', '{main}')",
        &[],
    )
    .await
    .unwrap();
    waiting_event(&db, "job_nobody_made", clock.now().unwrap()).await;
    clock.advance(config.inbox_grace + Duration::from_secs(1));
    let first = check_once(&check).await;
    let left = InboxCheckStats {
        checks_claimed: 1,
        left_to_other_keys: 1,
        requests: 1,
        ..InboxCheckStats::default()
    };
    assert_eq!(first, left);
    let answers: Value = c
        .query_one("select answers from sume.inbox_checks", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(answers, json!({"alt": "404"}));
    clock.advance(config.poll_max_interval * 2);
    assert_eq!(check_once(&check).await, InboxCheckStats::default());
    // Stopped, as in a restart: its keys still count.
    c.execute(
        "update sume.instances set tasks = '{\"sweep\": \"finished\"}'",
        &[],
    )
    .await
    .unwrap();
    clock.advance(config.poll_max_interval * 2);
    assert_eq!(check_once(&check).await, InboxCheckStats::default());
    let set_aside = "select count(*) from sume.events where set_aside_at is not null";
    assert_eq!(count(&db, set_aside).await, 0);
    // Silent five minutes: gone for good.
    c.execute(
        "update sume.instances set last_seen = now() - interval '6 minutes'",
        &[],
    )
    .await
    .unwrap();
    let judged = check_once(&check).await;
    assert_eq!(
        judged,
        InboxCheckStats {
            checks_claimed: 1,
            foreign: 1,
            events_set_aside: 1,
            ..InboxCheckStats::default()
        }
    );
    let reason: String = c
        .query_one("select set_aside_reason from sume.events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        reason,
        r#"foreign: every key the fleet holds answered 404 ({"alt":"404"})"#
    );
}

/// A job of `main`'s asked by `alt`'s holder first, then by `main`'s, at once: an orphan, with
/// both answers.
#[tokio::test(flavor = "multi_thread")]
async fn the_instance_holding_the_key_still_to_answer_finds_the_orphan() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(split_sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let job = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 20})).await;
    wait_ended(&http, &sim, std::slice::from_ref(&job)).await;
    let api = sim.api_url();
    let (alt, clock, config) = inbox_check(&db, &db.url, &api, vec![alt_key()]).await;
    let main_key = crate::sweep::main_key();
    let (main, main_clock, _) = inbox_check(&db, &db.url, &api, vec![main_key]).await;
    // Each sees the other in the fleet.
    db.client()
        .await
        .execute(
            "insert into sume.instances (instance, hostname, pid, version, started_at, \
             last_seen, tasks, api_keys) values \
             ('alt-1', 'h', 1, 'v', now(), now(), '{\"sweep\": \"running\"}', '{alt}'), \
             ('main-1', 'h', 2, 'v', now(), now(), '{\"sweep\": \"running\"}', '{main}')",
            &[],
        )
        .await
        .unwrap();
    waiting_event(&db, &job, clock.now().unwrap()).await;
    clock.advance(config.inbox_grace + Duration::from_secs(1));
    assert_eq!(check_once(&alt).await.left_to_other_keys, 1);
    main_clock.advance(config.inbox_grace + Duration::from_secs(1));
    let found = check_once(&main).await;
    assert_eq!((found.orphans, found.requests), (1, 1), "{found:?}");
    let row = db
        .client()
        .await
        .query_one("select verdict, answers from sume.inbox_checks", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "orphan");
    assert_eq!(
        row.get::<_, Value>(1),
        json!({"alt": "404", "main": "200 completed"})
    );
}
