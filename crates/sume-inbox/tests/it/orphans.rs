//! Events that never find their job have an end: past INBOX_GRACE the sweep marks them (an
//! orphan's, or with no API key every event nobody can ask about), so the catch-up scan no
//! longer walks them; a registration still attaches them; after ORPHAN_RETENTION retention
//! moves them to the dead letters, counted, and a registration after that end gets its event
//! by `replay --dead-letters`.
//!
//! Time is the sweep's clock, which the test moves; the daemons only take deliveries, attach
//! and answer the admin API.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sume_inbox::actors::sweep::{Clock, InboxCheck, InboxCheckStats, Retention};
use sume_inbox::config::SweepConfig;
use sume_inbox::db::Store;
use sume_inbox::metrics::Metrics;
use sume_inbox::sume_api::StatusReader;
use tokio_util::sync::CancellationToken;

use crate::support::*;
use crate::sweep::{
    clocked_config, count, create, daemon_without_keys, db_now, main_key, sim_config, wait_ended,
    MAIN_KEY,
};

/// The inbox check and retention, outside any daemon, on one clock stopped at the database's
/// time; with the `main` key when `keys`, else with none.
struct Services {
    check: InboxCheck,
    retention: Retention,
    clock: Clock,
    metrics: Arc<Metrics>,
    config: SweepConfig,
}

impl Services {
    async fn new(db: &TestDb, api_url: &str, keys: bool) -> Services {
        let config = clocked_config();
        let store = Store::new(&db.url, 4).unwrap();
        let metrics = Arc::new(Metrics::new());
        let client = sume_wire::StatusClient::new(api_url, config.request_timeout).unwrap();
        let keys = if keys { vec![main_key()] } else { vec![] };
        let reader = StatusReader::new(
            store.clone(),
            metrics.clone(),
            client,
            keys,
            config.read_rate,
        );
        let clock = Clock::fixed(db_now(db).await);
        Services {
            check: InboxCheck::new(
                store.clone(),
                metrics.clone(),
                reader,
                config.clone(),
                clock.clone(),
            ),
            retention: Retention::new(store, metrics.clone(), config.clone(), clock.clone()),
            clock,
            metrics,
            config,
        }
    }

    async fn check_once(&self) -> InboxCheckStats {
        self.check
            .run_once(&CancellationToken::new())
            .await
            .unwrap()
    }
}

async fn marked(db: &TestDb, job_id: &str) -> bool {
    db.client()
        .await
        .query_one(
            "select bool_and(orphaned_at is not null) from sume.events where job_id = $1",
            &[&job_id],
        )
        .await
        .unwrap()
        .get::<_, Option<bool>>(0)
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread")]
async fn without_keys_an_event_nobody_registers_ends_as_a_dead_letter_and_replays_later() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    for job in ["job_late", "job_never"] {
        assert_eq!(
            Delivery::completed(job).send(&http, &url).await.status(),
            204
        );
    }
    let s = Services::new(&db, "http://127.0.0.1:9/v1", false).await;
    assert_eq!(
        s.check_once().await,
        InboxCheckStats::default(),
        "within the grace"
    );
    // Past the grace nobody can be asked (no key): both are marked, out of the scan's way.
    s.clock
        .advance(s.config.inbox_grace + Duration::from_secs(1));
    assert_eq!(s.check_once().await.events_orphaned, 2);
    assert!(marked(&db, "job_late").await && marked(&db, "job_never").await);
    assert_eq!(s.check_once().await.events_orphaned, 0, "marked once");
    // Before the end, retention leaves them waiting.
    s.clock
        .advance(s.config.orphan_retention - s.config.inbox_grace - Duration::from_secs(60));
    assert_eq!(s.retention.run_once().await.unwrap().orphan_events, 0);
    assert_eq!(count(&db, "select count(*) from sume.events").await, 2);
    // ORPHAN_RETENTION after their arrival they leave the inbox for the dead letters, counted.
    s.clock.advance(Duration::from_secs(120));
    let removed = s.retention.run_once().await.unwrap();
    assert_eq!(removed.orphan_events, 2);
    assert_eq!(s.metrics.orphan_events_expired.get(), 2);
    assert_eq!(count(&db, "select count(*) from sume.events").await, 0);
    let reason: String = db
        .client()
        .await
        .query_one(
            "select reason from sume.dead_letters where dead_letter_id = 'job_late/job.completed'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        reason.contains("job_late") && reason.contains("never asked about"),
        "{reason}"
    );
    assert_eq!(s.retention.run_once().await.unwrap().orphan_events, 0);
    registered_after_the_end_its_event_replays(&db, &daemon, &http).await;
    daemon.stop().await;
}

/// An instance without keys beside one with keys (a canary, a rollout) leaves the inbox to the
/// keyed one, which can ask Sume: before, it marked every event past the grace as nobody's to
/// ask about, taking them out of the checks of the whole fleet (a real orphan never counted, a
/// foreign event never set aside). Once no live instance has keys, it marks them.
#[tokio::test(flavor = "multi_thread")]
async fn an_instance_without_keys_leaves_the_inbox_to_one_with_keys() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    assert_eq!(
        Delivery::completed("job_askable")
            .send(&http, &url)
            .await
            .status(),
        204
    );
    let keyed = db.client().await;
    keyed
        .execute(
            "insert into sume.instances (instance, hostname, pid, version, started_at, last_seen, \
             tasks, api_keys) values ('keyed', 'h', 1, 'v', now(), now(), \
             '{\"sweep\": \"running\"}', '{main}')",
            &[],
        )
        .await
        .unwrap();
    let s = Services::new(&db, "http://127.0.0.1:9/v1", false).await;
    s.clock
        .advance(s.config.inbox_grace + Duration::from_secs(1));
    assert_eq!(s.check_once().await.events_orphaned, 0);
    assert!(!marked(&db, "job_askable").await);
    // The keyed instance stopped (every task finished): nobody can ask any more.
    keyed
        .execute(
            "update sume.instances set tasks = '{\"sweep\": \"finished\"}' where instance = 'keyed'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(s.check_once().await.events_orphaned, 1);
    assert!(marked(&db, "job_askable").await);
    daemon.stop().await;
}

/// A registration after the end: the job opens with nothing to attach, and a replay of the
/// dead letters brings its event back and applies it.
async fn registered_after_the_end_its_event_replays(
    db: &TestDb,
    daemon: &Daemon,
    http: &reqwest::Client,
) {
    // A registration after the end: the job opens with nothing to attach...
    assert_eq!(
        api_register(http, daemon, "job_late", "order_late")
            .await
            .status(),
        201
    );
    assert_eq!(job_state(db, "job_late").await.as_deref(), Some("open"));
    // ...and a replay of the dead letters brings its event back and applies it.
    let replayed: serde_json::Value = http
        .post(daemon.admin_url("/v1/dead-letters/replay"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let results = replayed["replayed"].to_string();
    assert!(
        results.contains("stored and applied (job job_late)"),
        "{results}"
    );
    assert!(
        results.contains("stored; waiting for its job row (job job_never)"),
        "{results}"
    );
    assert_eq!(
        job_state(db, "job_late").await.as_deref(),
        Some("completed")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_orphans_events_leave_the_inbox_after_orphan_retention_and_so_does_its_verdict() {
    let db = TestDb::new().await;
    let sim = sume_sim::RunningSim::start(sim_config()).await.unwrap();
    let daemon = Daemon::start(daemon_without_keys(&db, &sim)).await;
    let http = reqwest::Client::new();
    let orphan = create(
        &http,
        &sim,
        MAIN_KEY,
        Some(&daemon.url("/webhooks/sume")),
        json!({}),
    )
    .await;
    wait_ended(&http, &sim, std::slice::from_ref(&orphan)).await;
    wait_for("its webhook stored", Duration::from_secs(30), || async {
        count(&db, "select count(*) from sume.events").await == 1
    })
    .await;
    let s = Services::new(&db, &sim.api_url(), true).await;
    s.clock
        .advance(s.config.inbox_grace + Duration::from_secs(1));
    let stats = s.check_once().await;
    assert_eq!((stats.orphans, stats.events_orphaned), (1, 1), "{stats:?}");
    assert!(marked(&db, &orphan).await, "marked at the verdict");
    // A later delivery of the same job (another event of it) is marked once its grace passed.
    let mut late = Delivery::status(&orphan, "running");
    late.secret = sume_sim::TEST_WEBHOOK_SECRET.into();
    assert_eq!(
        late.send(&http, &daemon.url("/webhooks/sume"))
            .await
            .status(),
        204
    );
    let received: chrono::DateTime<chrono::Utc> = db
        .client()
        .await
        .query_one("select max(received_at) from sume.events", &[])
        .await
        .unwrap()
        .get(0);
    s.clock
        .set(received + chrono::Duration::from_std(s.config.inbox_grace).unwrap());
    s.clock.advance(Duration::from_secs(1));
    assert_eq!(s.check_once().await.events_orphaned, 1);
    assert!(marked(&db, &orphan).await);
    // ORPHAN_RETENTION after the last of them, both are dead letters and the verdict is gone:
    // the orphan no longer counts (nor alerts) as one, the dead letters do.
    s.clock.advance(s.config.orphan_retention);
    let removed = s.retention.run_once().await.unwrap();
    assert_eq!((removed.orphan_events, removed.orphan_checks), (2, 1));
    assert_eq!(
        count(&db, "select count(*) from sume.inbox_checks").await,
        0
    );
    let reasons: Vec<String> = db
        .client()
        .await
        .query("select reason from sume.dead_letters", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(reasons.len(), 2);
    assert!(
        reasons
            .iter()
            .all(|r| r.contains("an orphan (a key reads the job")),
        "{reasons:?}"
    );
    daemon.stop().await;
}

/// Events marked while no instance had keys are asked about once one with keys sweeps: the
/// job no key reads (Sume answers 404) is set aside as another workspace's, the one a key
/// reads is judged an orphan and keeps its mark for its job, and only its event moves to the
/// dead letters at ORPHAN_RETENTION. Before, the marks stood: neither was ever asked about,
/// and both ended as dead letters, "never asked about".
#[tokio::test(flavor = "multi_thread")]
async fn events_marked_while_no_key_could_ask_are_asked_about_once_an_instance_has_keys() {
    let db = TestDb::new().await;
    let sim = sume_sim::RunningSim::start(sim_config()).await.unwrap();
    let daemon = Daemon::start(daemon_without_keys(&db, &sim)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let orphan = create(&http, &sim, MAIN_KEY, Some(&url), json!({})).await;
    wait_ended(&http, &sim, std::slice::from_ref(&orphan)).await;
    let mut foreign = Delivery::completed("job_elsewhere");
    foreign.secret = sume_sim::TEST_WEBHOOK_SECRET.into();
    assert_eq!(foreign.send(&http, &url).await.status(), 204);
    wait_for("both events stored", Duration::from_secs(30), || async {
        count(&db, "select count(*) from sume.events").await == 2
    })
    .await;
    // No key anywhere: past the grace both are marked as nobody's to ask about.
    let keyless = Services::new(&db, &sim.api_url(), false).await;
    keyless
        .clock
        .advance(keyless.config.inbox_grace + Duration::from_secs(1));
    assert_eq!(keyless.check_once().await.events_orphaned, 2);
    assert!(marked(&db, &orphan).await && marked(&db, "job_elsewhere").await);
    // An instance with the key sweeps: both are asked about.
    let s = Services::new(&db, &sim.api_url(), true).await;
    s.clock
        .advance(s.config.inbox_grace + Duration::from_secs(1));
    let stats = s.check_once().await;
    assert_eq!(stats.events_asked_again, 2, "{stats:?}");
    assert_eq!((stats.foreign, stats.events_set_aside), (1, 1), "{stats:?}");
    assert_eq!((stats.orphans, stats.events_orphaned), (1, 1), "{stats:?}");
    let set_aside = "select count(*) from sume.events \
                     where job_id = 'job_elsewhere' and set_aside_at is not null";
    assert_eq!(count(&db, set_aside).await, 1);
    assert!(
        marked(&db, &orphan).await,
        "an orphan's event keeps its mark"
    );
    let again = s.check_once().await;
    assert_eq!((again.events_asked_again, again.checks_claimed), (0, 0));
    // At ORPHAN_RETENTION only the orphan's event is a dead letter, as an orphan's.
    s.clock.advance(s.config.orphan_retention);
    assert_eq!(s.retention.run_once().await.unwrap().orphan_events, 1);
    let reason: String = db
        .client()
        .await
        .query_one("select reason from sume.dead_letters", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        reason.contains("an orphan (a key reads the job"),
        "{reason}"
    );
    assert_eq!(
        count(&db, set_aside).await,
        1,
        "the foreign event stays set aside"
    );
    daemon.stop().await;
}
