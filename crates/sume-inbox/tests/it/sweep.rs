//! The status sweep against the simulator: dropped webhooks closed by poll, backoff and give-up,
//! foreign events set aside, orphans kept, Retry-After honoured, leases shared and recovered,
//! one close per job.
//!
//! What depends on elapsed time (POLL_AFTER, the backoff, POLL_GIVE_UP, INBOX_GRACE) is driven
//! through the services' `run_once` with a clock the test moves; daemons and waiting loops are
//! kept for what concurrency itself decides (two instances, a crashed instance's leases,
//! webhook and poll racing, Retry-After across requests).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sume_inbox::actors::sweep::{
    Clock, InboxCheck, InboxCheckStats, Poll, PollStats, Recheck, RecheckStats,
};
use sume_inbox::config::{ApiKey, Rate, SweepConfig};
use sume_inbox::db::Store;
use sume_inbox::metrics::Metrics;
use sume_inbox::sume_api::StatusReader;
use sume_sim::{Faults, JobsAnswer, RequestsAnswer, RunningSim, SimConfig, SimStats};
use sume_wire::Secret;
use tokio_util::sync::CancellationToken;

use crate::support::*;

pub(crate) const MAIN_KEY: &str = "sk_test_main";
pub(crate) const FOREIGN_KEY: &str = "sk_test_foreign";

pub(crate) fn sim_config() -> SimConfig {
    SimConfig::for_tests()
        .with_key("main", MAIN_KEY, "mem_main", "ws_ours")
        .with_key("foreign", FOREIGN_KEY, "mem_other", "ws_theirs")
}

pub(crate) fn sweep_config() -> SweepConfig {
    SweepConfig {
        interval: Duration::from_millis(100),
        inbox_grace: Duration::from_millis(500),
        poll_after: Duration::from_millis(200),
        poll_max_interval: Duration::from_secs(1),
        poll_give_up: Duration::from_secs(3600),
        batch: 50,
        lease: Duration::from_secs(5),
        concurrency: 4,
        read_rate: Rate {
            count: 1000,
            per: Duration::from_secs(1),
        },
        request_timeout: Duration::from_secs(1),
        ..SweepConfig::default()
    }
}

pub(crate) fn main_key() -> ApiKey {
    ApiKey {
        name: "main".into(),
        key: Secret::new(MAIN_KEY),
    }
}

/// A daemon pointed at the simulator, knowing only the `main` key.
pub(crate) fn daemon_config(
    db: &TestDb,
    sim: &RunningSim,
    sweep: SweepConfig,
) -> sume_inbox::Config {
    let mut c = config(&db.url);
    c.webhook_secrets = vec![Secret::new(sume_sim::TEST_WEBHOOK_SECRET)];
    c.sume_api_url = sim.api_url();
    c.api_keys = vec![main_key()];
    c.sweep = sweep;
    c
}

/// A daemon that receives and attaches webhooks but asks Sume nothing (no API key): the
/// test's own [`Sweep`] does that, on its clock.
pub(crate) fn daemon_without_keys(db: &TestDb, sim: &RunningSim) -> sume_inbox::Config {
    let mut c = daemon_config(db, sim, SweepConfig::default());
    c.api_keys = vec![];
    c
}

/// The settings of the clock-driven tests: production timings, a quick budget.
pub(crate) fn clocked_config() -> SweepConfig {
    SweepConfig {
        batch: 50,
        lease: Duration::from_secs(5),
        concurrency: 4,
        read_rate: Rate {
            count: 1000,
            per: Duration::from_secs(1),
        },
        request_timeout: Duration::from_secs(1),
        ..SweepConfig::default()
    }
}

pub(crate) async fn migrate(db: &TestDb) {
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
}

pub(crate) async fn db_now(db: &TestDb) -> DateTime<Utc> {
    db.client()
        .await
        .query_one("select now()", &[])
        .await
        .unwrap()
        .get(0)
}

/// The sweep's services that ask Sume, outside any daemon, with the `main` key and a clock
/// stopped at the database's time when they were made.
pub(crate) struct Sweep {
    inbox_check: InboxCheck,
    poll: Poll,
    recheck: Recheck,
    clock: Clock,
    pub(crate) config: SweepConfig,
    pub(crate) metrics: Arc<Metrics>,
}

impl Sweep {
    pub(crate) async fn new(db: &TestDb, sim: &RunningSim, config: SweepConfig) -> Sweep {
        Sweep::at(db, &sim.api_url(), config).await
    }

    /// The same against `api_url`, a SUME_API_URL that may be wrong.
    pub(crate) async fn at(db: &TestDb, api_url: &str, config: SweepConfig) -> Sweep {
        Sweep::with_keys(db, api_url, config, vec![main_key()]).await
    }

    /// The same with these keys.
    pub(crate) async fn with_keys(
        db: &TestDb,
        api_url: &str,
        config: SweepConfig,
        keys: Vec<ApiKey>,
    ) -> Sweep {
        migrate(db).await;
        let store = Store::new(&db.url, 4).unwrap();
        let metrics = Arc::new(Metrics::new());
        let client = sume_wire::StatusClient::new(api_url, config.request_timeout).unwrap();
        let reader = StatusReader::new(
            store.clone(),
            metrics.clone(),
            client,
            keys,
            config.read_rate,
        )
        .with_daily_reads(config.daily_reads);
        let clock = Clock::fixed(db_now(db).await);
        Sweep {
            inbox_check: InboxCheck::new(
                store.clone(),
                metrics.clone(),
                reader.clone(),
                config.clone(),
                clock.clone(),
            ),
            poll: Poll::new(
                store.clone(),
                metrics.clone(),
                reader.clone(),
                config.clone(),
                clock.clone(),
            ),
            recheck: Recheck::new(
                store,
                metrics.clone(),
                reader,
                config.clone(),
                clock.clone(),
            ),
            clock,
            config,
            metrics,
        }
    }

    pub(crate) async fn poll_once(&self) -> PollStats {
        self.poll.run_once(&CancellationToken::new()).await.unwrap()
    }

    pub(crate) async fn recheck_once(&self) -> RecheckStats {
        self.recheck
            .run_once(&CancellationToken::new())
            .await
            .unwrap()
    }

    pub(crate) async fn check_once(&self) -> InboxCheckStats {
        self.inbox_check
            .run_once(&CancellationToken::new())
            .await
            .unwrap()
    }

    pub(crate) fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    pub(crate) fn set(&self, to: DateTime<Utc>) {
        self.clock.set(to);
    }

    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now().unwrap()
    }
}

/// Waits until the simulator reports every one of these jobs ended.
pub(crate) async fn wait_ended(http: &reqwest::Client, sim: &RunningSim, jobs: &[String]) {
    wait_for(
        "the simulator ended the jobs",
        Duration::from_secs(30),
        || async {
            let truth: JobsAnswer = sim_get(http, sim, "jobs").await;
            jobs.iter()
                .all(|id| truth.jobs.iter().any(|j| &j.id == id && j.terminal))
        },
    )
    .await;
}

/// Creates a job at the simulator; answers its id.
pub(crate) async fn create(
    http: &reqwest::Client,
    sim: &RunningSim,
    key: &str,
    webhook: Option<&str>,
    overrides: Value,
) -> String {
    let mut body = json!({ "prompt": "a fox at dawn", "sim": overrides });
    if let Some(url) = webhook {
        body["webhook_url"] = json!(url);
    }
    let r = http
        .post(format!("{}/videos/generations", sim.api_url()))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.unwrap();
    v["job_id"].as_str().unwrap().to_owned()
}

pub(crate) async fn sim_get<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    sim: &RunningSim,
    path: &str,
) -> T {
    http.get(sim.sim_url(path))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub(crate) async fn register(db: &TestDb, job_id: &str) {
    db.client()
        .await
        .execute(
            "insert into sume.jobs (job_id, order_id, api_key) values ($1, $1, 'main')",
            &[&job_id],
        )
        .await
        .unwrap();
}

pub(crate) async fn count(db: &TestDb, sql: &str) -> i64 {
    db.scalar(sql).await
}

/// Every job's state equals the simulator's truth.
pub(crate) async fn assert_matches_truth(
    http: &reqwest::Client,
    sim: &RunningSim,
    db: &TestDb,
    jobs: &[String],
) {
    let truth: JobsAnswer = sim_get(http, sim, "jobs").await;
    for id in jobs {
        let t = truth.jobs.iter().find(|j| &j.id == id).unwrap();
        let want = sume_wire::Status::parse(&t.final_status)
            .terminal()
            .unwrap();
        assert_eq!(
            job_state(db, id).await.as_deref(),
            Some(want.as_str()),
            "{id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dropped_webhooks_are_closed_by_poll() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    let jobs = jobs_whose_webhooks_are_dropped(&http, &sim, &db).await;
    // Read one by one (a walk of the list settles them too: tests/it/walks.rs).
    let one_by_one = SweepConfig {
        list_walks: false,
        ..clocked_config()
    };
    let sweep = Sweep::new(&db, &sim, one_by_one).await;
    assert_eq!(
        sweep.poll_once().await,
        PollStats::default(),
        "nothing is polled before POLL_AFTER"
    );
    wait_ended(&http, &sim, &jobs).await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    let stats = sweep.poll_once().await;
    assert_eq!(
        stats,
        PollStats {
            jobs_claimed: 20,
            closed_by_poll: 20,
            requests: 20,
            ..PollStats::default()
        }
    );
    assert_closed_by_poll_alone(&db, 20).await;
    assert_matches_truth(&http, &sim, &db, &jobs).await;
    let deliveries: sume_sim::DeliveriesAnswer = sim_get(&http, &sim, "deliveries").await;
    assert_eq!(deliveries.count, 0);
    sweep.advance(sweep.config.poll_max_interval * 2);
    assert_eq!(
        sweep.poll_once().await,
        PollStats::default(),
        "a closed job is never polled again"
    );
}

/// Twenty registered jobs of every outcome whose webhooks the simulator drops.
async fn jobs_whose_webhooks_are_dropped(
    http: &reqwest::Client,
    sim: &RunningSim,
    db: &TestDb,
) -> Vec<String> {
    // Nothing listens there, and the simulator is told to drop every webhook anyway.
    let hook = "http://127.0.0.1:9/webhooks/sume";
    let mut jobs = Vec::new();
    for (i, outcome) in ["completed", "failed", "canceled", "expired"]
        .iter()
        .cycle()
        .take(20)
        .enumerate()
    {
        let id = create(
            http,
            sim,
            MAIN_KEY,
            Some(hook),
            json!({"drop": true, "outcome": outcome, "duration_ms": 50 + i * 10}),
        )
        .await;
        register(db, &id).await;
        jobs.push(id);
    }
    jobs
}

/// `closed` jobs were closed by poll, each once in the feed, with no event and no lease left.
async fn assert_closed_by_poll_alone(db: &TestDb, closed: i64) {
    assert_eq!(
        count(
            db,
            "select count(*) from sume.jobs where closed_by = 'poll'"
        )
        .await,
        closed
    );
    assert_eq!(
        count(
            db,
            "select count(*) from sume.job_closes where closed_by = 'poll'"
        )
        .await,
        closed,
        "each poll close is an entry of the feed"
    );
    assert_eq!(
        count(db, "select count(*) from sume.events").await,
        0,
        "no webhook ever came"
    );
    assert_eq!(
        count(
            db,
            "select count(*) from sume.jobs where lease_owner is not null"
        )
        .await,
        0,
        "every lease released"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn foreign_events_are_set_aside_after_the_grace_period() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let daemon = Daemon::start(daemon_without_keys(&db, &sim)).await;
    let foreign = foreign_webhooks_beside_one_of_ours(&db, &sim, &daemon).await;
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    assert_eq!(
        sweep.check_once().await,
        InboxCheckStats::default(),
        "nothing is checked within INBOX_GRACE"
    );
    sweep.advance(sweep.config.inbox_grace + Duration::from_secs(1));
    assert_eq!(
        sweep.check_once().await,
        InboxCheckStats {
            checks_claimed: 5,
            foreign: 5,
            events_set_aside: 5,
            requests: 5,
            ..InboxCheckStats::default()
        }
    );
    assert_set_aside_as_foreign(&db, &sweep, &foreign).await;
    sweep.advance(sweep.config.poll_max_interval * 2);
    assert_eq!(
        sweep.check_once().await,
        InboxCheckStats::default(),
        "a verdict is never checked again"
    );
    a_late_event_of_a_foreign_job_is_set_aside_without_asking(&db, &sweep, &foreign[0]).await;
    daemon.stop().await;
}

/// Five jobs of another workspace whose webhooks come here (a shared endpoint, a copied URL),
/// and one of ours, registered: answers the foreign jobs once every webhook is stored and ours
/// is completed.
async fn foreign_webhooks_beside_one_of_ours(
    db: &TestDb,
    sim: &RunningSim,
    daemon: &Daemon,
) -> Vec<String> {
    let http = reqwest::Client::new();
    let hook = daemon.url("/webhooks/sume");
    let mut foreign = Vec::new();
    for _ in 0..5 {
        foreign.push(create(&http, sim, FOREIGN_KEY, Some(&hook), json!({})).await);
    }
    let ours = create(&http, sim, MAIN_KEY, Some(&hook), json!({})).await;
    register(db, &ours).await;
    wait_for("every webhook stored", Duration::from_secs(30), || async {
        count(db, "select count(distinct job_id) from sume.events").await == 6
    })
    .await;
    wait_for("our job completed", Duration::from_secs(10), || async {
        job_state(db, &ours).await.as_deref() == Some("completed")
    })
    .await;
    foreign
}

/// Each foreign job's event is set aside, kept and never applied, with the verdict, the
/// answers seen and the sweep's clock; our job was never checked.
async fn assert_set_aside_as_foreign(db: &TestDb, sweep: &Sweep, foreign: &[String]) {
    let c = db.client().await;
    for id in foreign {
        let row = c
            .query_one(
                "select e.set_aside_reason, e.applied_at is null, c.verdict, c.answers,
                        e.set_aside_at, c.checked_at
                 from sume.events e join sume.inbox_checks c using (job_id) where e.job_id = $1",
                &[id],
            )
            .await
            .unwrap();
        assert!(
            row.get::<_, String>(0).starts_with("foreign"),
            "reason kept"
        );
        assert!(row.get::<_, bool>(1), "never applied, never deleted");
        assert_eq!(row.get::<_, String>(2), "foreign");
        assert_eq!(
            row.get::<_, Value>(3),
            json!({"main": "404"}),
            "the answers seen"
        );
        let set_aside_at: DateTime<Utc> = row.get(4);
        let checked_at: DateTime<Utc> = row.get(5);
        assert_eq!(set_aside_at, sweep.now(), "set aside at the sweep's clock");
        assert_eq!(checked_at, sweep.now(), "checked at the sweep's clock");
    }
    assert_eq!(
        count(
            db,
            "select count(*) from sume.events where set_aside_at is not null"
        )
        .await,
        5
    );
    assert_eq!(
        count(db, "select count(*) from sume.inbox_checks").await,
        5,
        "ours was never checked"
    );
}

/// A late event of a job already judged foreign is settled like the first, after the grace and
/// without asking Sume again.
async fn a_late_event_of_a_foreign_job_is_set_aside_without_asking(
    db: &TestDb,
    sweep: &Sweep,
    job_id: &str,
) {
    let c = db.client().await;
    c.execute(
        "insert into sume.events (event_id, job_id, status, body, signed_at, signature, received_at)
         values ('evt_late_foreign', $1, 'running', '\\x7b7d', 0, 'v1=00', $2)",
        &[&job_id, &sweep.now()],
    )
    .await
    .unwrap();
    assert_eq!(
        sweep.check_once().await,
        InboxCheckStats::default(),
        "not within INBOX_GRACE"
    );
    sweep.advance(sweep.config.inbox_grace + Duration::from_secs(1));
    assert_eq!(
        sweep.check_once().await,
        InboxCheckStats {
            events_set_aside: 1,
            ..InboxCheckStats::default()
        }
    );
    let reason: String = c
        .query_one(
            "select set_aside_reason from sume.events where event_id = 'evt_late_foreign'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(reason.starts_with("foreign: judged before"), "{reason}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_orphan_is_kept_reported_and_attached_when_its_row_returns() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let daemon = Daemon::start(daemon_without_keys(&db, &sim)).await;
    let http = reqwest::Client::new();
    // Our own job, but the row was lost (a deploy, a rolled-back transaction).
    let orphan = create(
        &http,
        &sim,
        MAIN_KEY,
        Some(&daemon.url("/webhooks/sume")),
        json!({}),
    )
    .await;
    wait_for("its webhook stored", Duration::from_secs(30), || async {
        count(&db, "select count(*) from sume.events").await == 1
    })
    .await;
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    assert_eq!(sweep.check_once().await, InboxCheckStats::default());
    sweep.advance(sweep.config.inbox_grace + Duration::from_secs(1));
    assert_eq!(
        sweep.check_once().await,
        InboxCheckStats {
            checks_claimed: 1,
            orphans: 1,
            events_orphaned: 1,
            requests: 1,
            ..InboxCheckStats::default()
        }
    );
    let c = db.client().await;
    let row = c
        .query_one(
            "select applied_at is null, set_aside_at is null, orphaned_at is not null
             from sume.events where job_id = $1",
            &[&orphan],
        )
        .await
        .unwrap();
    assert!(
        row.get::<_, bool>(0) && row.get::<_, bool>(1),
        "kept waiting, not set aside"
    );
    assert!(
        row.get::<_, bool>(2),
        "marked: out of the catch-up scan's way"
    );
    let answers: Value = c
        .query_one(
            "select answers from sume.inbox_checks where job_id = $1 and verdict = 'orphan'",
            &[&orphan],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(answers, json!({"main": "200 completed"}));
    // The row is restored: the waiting event applies.
    register(&db, &orphan).await;
    wait_for("orphan completed", Duration::from_secs(10), || async {
        job_state(&db, &orphan).await.as_deref() == Some("completed")
    })
    .await;
    assert_eq!(
        sweep.check_once().await,
        InboxCheckStats {
            orphans_resolved: 1,
            ..InboxCheckStats::default()
        }
    );
    assert_eq!(
        count(&db, "select count(*) from sume.inbox_checks").await,
        0,
        "the orphan verdict is dropped"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_after_is_honoured_by_every_request() {
    let db = TestDb::new().await;
    let mut sc = sim_config();
    sc.faults = Faults {
        status_429: 1.0,
        status_429_retry_after: Duration::from_secs(1),
        ..Faults::none()
    };
    let sim = RunningSim::start(sc).await.unwrap();
    // One call in flight at a time, so that every request after a 429 was sent after the 429
    // was seen (with several in flight, one may already be on its way: that is not a breach).
    let mut sweep = sweep_config();
    sweep.concurrency = 1;
    // Each job read by itself: the injected 429s answer job reads.
    sweep.list_walks = false;
    let daemon = Daemon::start(daemon_config(&db, &sim, sweep)).await;
    let http = reqwest::Client::new();
    let mut jobs = Vec::new();
    for _ in 0..8 {
        let id = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 20})).await;
        register(&db, &id).await;
        jobs.push(id);
    }
    wait_for("a few 429s", Duration::from_secs(30), || async {
        let stats: SimStats = sim_get(&http, &sim, "stats").await;
        stats
            .keys
            .get("main")
            .map(|k| k.counts.fault_429)
            .unwrap_or(0)
            >= 3
    })
    .await;
    let r = http
        .patch(sim.sim_url("faults"))
        .json(&json!({"status_429": 0.0}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    wait_for(
        "every job closed by poll",
        Duration::from_secs(30),
        || async {
            count(
                &db,
                "select count(*) from sume.jobs where state = 'completed'",
            )
            .await
                == 8
        },
    )
    .await;
    let log: RequestsAnswer = sim_get(&http, &sim, "requests?key=main").await;
    let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap();
    let mut checked = 0;
    for limited in log.requests.iter().filter(|r| r.status == 429) {
        let answered = at(&limited.at) + chrono::Duration::milliseconds(limited.latency_ms as i64);
        let until = answered + chrono::Duration::seconds(1);
        // The daemon's job reads only: the test's own creates may still be on their way, and
        // the keys' checks (`GET /jobs?limit=1`) are made by the inbox check's pass too,
        // concurrently with the poll's, so one may have left before the 429 came.
        let job_reads = log
            .requests
            .iter()
            .filter(|r| r.method == "GET" && r.route != "/v1/jobs");
        for later in job_reads.filter(|r| at(&r.at) > answered) {
            assert!(
                at(&later.at) >= until - chrono::Duration::milliseconds(20),
                "request at {} came before the Retry-After of the 429 answered at {answered} ran out",
                later.at
            );
        }
        checked += 1;
    }
    assert!(checked >= 3);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_instances_share_the_sweep_within_one_budget() {
    let db = TestDb::new().await;
    let mut sc = sim_config();
    sc.limits.reads_per_window = 50;
    sc.limits.rate_window = Duration::from_secs(1);
    sc.faults = Faults {
        status_slow: 0.3,
        status_slow_delay: Duration::from_millis(150),
        ..Faults::none()
    };
    let sim = RunningSim::start(sc).await.unwrap();
    let mut sweep = sweep_config();
    sweep.poll_after = Duration::from_millis(100);
    sweep.poll_max_interval = Duration::from_millis(300);
    sweep.read_rate = Rate {
        count: 40,
        per: Duration::from_secs(1),
    };
    // Jobs read one by one, so that each is polled repeatedly.
    sweep.list_walks = false;
    let a = Daemon::start(daemon_config(&db, &sim, sweep.clone())).await;
    let b = Daemon::start(daemon_config(&db, &sim, sweep)).await;
    let http = reqwest::Client::new();
    let mut jobs = Vec::new();
    for i in 0..30 {
        let id = create(
            &http,
            &sim,
            MAIN_KEY,
            None,
            json!({"duration_ms": 1000 + i * 40}),
        )
        .await;
        register(&db, &id).await;
        jobs.push(id);
    }
    wait_for(
        "every job closed by poll",
        Duration::from_secs(60),
        || async {
            count(
                &db,
                "select count(*) from sume.jobs where state = 'completed'",
            )
            .await
                == 30
        },
    )
    .await;
    let stats: SimStats = sim_get(&http, &sim, "stats").await;
    assert!(
        stats.requests > 40,
        "jobs were polled repeatedly ({} reads)",
        stats.requests
    );
    assert_eq!(
        stats.max_concurrent_status_reads, 1,
        "no job polled by two instances at once"
    );
    let main = &stats.keys["main"];
    assert_eq!(
        main.counts.rate_limited, 0,
        "the fleet never went over Sume's limit"
    );
    assert!(
        main.max_reads_per_window <= 40 + 4,
        "within the budget: {}",
        main.max_reads_per_window
    );
    let owners = count(
        &db,
        "select count(distinct last_poll_answer) from sume.jobs",
    )
    .await;
    assert!(owners >= 1);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_instances_leases_are_recovered() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let mut jobs = Vec::new();
    for _ in 0..10 {
        let id = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 20})).await;
        jobs.push(id);
    }
    // The schema exists once a daemon has started; start one that polls nothing yet.
    let mut quiet = sweep_config();
    quiet.poll_after = Duration::from_secs(3600);
    let first = Daemon::start(daemon_config(&db, &sim, quiet)).await;
    first.stop().await;
    for id in &jobs {
        register(&db, id).await;
    }
    // An instance claimed them all, then died: its lease holds for two more seconds.
    db.client()
        .await
        .execute(
            "update sume.jobs set lease_owner = 'crashed-instance', lease_until = now() + interval '2 seconds'",
            &[],
        )
        .await
        .unwrap();
    let lease_until: chrono::DateTime<chrono::Utc> = db
        .client()
        .await
        .query_one("select max(lease_until) from sume.jobs", &[])
        .await
        .unwrap()
        .get(0);
    let daemon = Daemon::start(daemon_config(&db, &sim, sweep_config())).await;
    wait_for(
        "claims recovered and jobs closed",
        Duration::from_secs(30),
        || async {
            count(
                &db,
                "select count(*) from sume.jobs where state = 'completed' and closed_by = 'poll'",
            )
            .await
                == 10
        },
    )
    .await;
    let log: RequestsAnswer = sim_get(&http, &sim, "requests?key=main").await;
    // Every status read of a job (the key checks, `GET /jobs?limit=1`, name none).
    for r in log
        .requests
        .iter()
        .filter(|r| r.method == "GET" && r.job_id.is_some())
    {
        let at = chrono::DateTime::parse_from_rfc3339(&r.at).unwrap();
        assert!(
            at >= lease_until - chrono::Duration::milliseconds(20),
            "polled at {at} under a live lease"
        );
    }
    assert_eq!(
        count(
            &db,
            "select count(*) from sume.jobs where lease_owner is not null"
        )
        .await,
        0
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn webhook_and_poll_racing_close_each_job_once() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let mut sweep = sweep_config();
    sweep.poll_after = Duration::from_millis(60);
    sweep.interval = Duration::from_millis(30);
    sweep.poll_max_interval = Duration::from_millis(60);
    let daemon = Daemon::start(daemon_config(&db, &sim, sweep)).await;
    let http = reqwest::Client::new();
    let hook = daemon.url("/webhooks/sume");
    let mut jobs = Vec::new();
    for i in 0..60 {
        let id = create(
            &http,
            &sim,
            MAIN_KEY,
            Some(&hook),
            json!({"duration_ms": 40 + (i % 7) * 15}),
        )
        .await;
        register(&db, &id).await;
        jobs.push(id);
    }
    wait_every_job_closed_and_event_applied(&db, 60).await;
    let (by_webhook, by_poll) = assert_each_job_closed_once(&db, 60).await;
    assert_matches_truth(&http, &sim, &db, &jobs).await;
    eprintln!("closed by webhook: {by_webhook}, by poll: {by_poll}");
    daemon.stop().await;
}

async fn wait_every_job_closed_and_event_applied(db: &TestDb, jobs: i64) {
    wait_for(
        "every job closed, every event applied",
        Duration::from_secs(30),
        || async {
            count(
                db,
                "select count(*) from sume.jobs where state = 'completed'",
            )
            .await
                == jobs
                && count(
                    db,
                    "select count(*) from sume.events where applied_at is null",
                )
                .await
                    == 0
                && count(db, "select count(*) from sume.events").await == jobs
        },
    )
    .await;
}

/// Every job was closed by its webhook or by a poll, once, and the other path then changed
/// nothing; answers how many each path closed.
async fn assert_each_job_closed_once(db: &TestDb, jobs: i64) -> (i64, i64) {
    let by_webhook = count(
        db,
        "select count(*) from sume.jobs where closed_by = 'webhook'",
    )
    .await;
    let by_poll = count(
        db,
        "select count(*) from sume.jobs where closed_by = 'poll'",
    )
    .await;
    assert_eq!(by_webhook + by_poll, jobs);
    assert_eq!(
        count(db, "select count(*) from sume.job_closes").await,
        jobs,
        "one feed entry per job, whichever path closed it"
    );
    assert_eq!(
        count(
            db,
            "select count(*) from sume.events where outcome = 'closed'"
        )
        .await,
        by_webhook,
        "an event closed exactly the jobs closed by webhook"
    );
    assert_eq!(
        count(
            db,
            "select count(*) from sume.jobs j where closed_by = 'poll'
             and exists (select 1 from sume.events e where e.job_id = j.job_id and e.outcome <> 'ignored')"
        )
        .await,
        0,
        "after a poll closed a job, its webhook was a no-op"
    );
    assert_eq!(
        count(db, "select count(*) from sume.disagreements").await,
        0
    );
    (by_webhook, by_poll)
}

/// Seconds from the sweep's clock to the job's next poll, and its attempts so far.
async fn next_poll(db: &TestDb, sweep: &Sweep) -> (f64, i32) {
    let row = db
        .client()
        .await
        .query_one(
            "select extract(epoch from next_poll_at - $1)::float8, poll_attempts from sume.jobs",
            &[&sweep.now()],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_job_is_polled_with_backoff_then_given_up_as_expired() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    let id = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 600_000})).await;
    register(&db, &id).await;
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    let still_open = PollStats {
        jobs_claimed: 1,
        still_open: 1,
        requests: 1,
        ..PollStats::default()
    };
    // POLL_AFTER (2 min): the first poll; the next one a backoff step later (±20%).
    sweep.advance(sweep.config.poll_after);
    assert_eq!(sweep.poll_once().await, still_open);
    let (next, attempts) = next_poll(&db, &sweep).await;
    assert!((96.0..=144.0).contains(&next), "next poll in {next}s");
    assert_eq!(attempts, 1);
    assert_eq!(job_state(&db, &id).await.as_deref(), Some("open"));
    assert_eq!(
        sweep.poll_once().await,
        PollStats::default(),
        "not due again yet"
    );
    // The second step doubles.
    sweep.advance(Duration::from_secs(145));
    assert_eq!(sweep.poll_once().await, still_open);
    let (next, attempts) = next_poll(&db, &sweep).await;
    assert!((192.0..=288.0).contains(&next), "next poll in {next}s");
    assert_eq!(attempts, 2);
    // POLL_GIVE_UP (a day) after registration it is closed as expired.
    sweep.advance(sweep.config.poll_give_up);
    assert_eq!(
        sweep.poll_once().await,
        PollStats {
            jobs_claimed: 1,
            given_up: 1,
            requests: 1,
            ..PollStats::default()
        }
    );
    let row = db
        .client()
        .await
        .query_one(
            "select closed_by, close_reason, sume_status, state, closed_at from sume.jobs",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "give_up");
    assert!(row.get::<_, String>(1).contains("POLL_GIVE_UP"));
    assert_eq!(
        row.get::<_, Option<String>>(2).as_deref(),
        Some("queued"),
        "the last status read"
    );
    assert_eq!(row.get::<_, String>(3), "expired");
    assert_eq!(row.get::<_, DateTime<Utc>>(4), sweep.now());
    assert_eq!(
        count(
            &db,
            "select count(*) from sume.job_closes where closed_by = 'give_up' and state = 'expired'"
        )
        .await,
        1,
        "the give-up is an entry of the feed"
    );
    sweep.advance(sweep.config.poll_max_interval * 2);
    assert_eq!(sweep.poll_once().await, PollStats::default());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_api_url_sets_nothing_aside_and_gives_nothing_up() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    // SUME_API_URL without its `/v1`: every path answers 404, as from a wrong deployment.
    let wrong = sim.api_url().trim_end_matches("/v1").to_owned();
    let sweep = Sweep::at(&db, &wrong, clocked_config()).await;
    let c = db.client().await;
    c.execute(
        "insert into sume.events (event_id, job_id, status, body, signed_at, signature, received_at)
         values ('evt_waiting', 'job_unregistered', 'completed', '\\x7b7d', 0, 'v1=00', $1)",
        &[&sweep.now()],
    )
    .await
    .unwrap();
    c.execute(
        "insert into sume.jobs (job_id, order_id, api_key, created_at) values ('job_old', 'o', 'main', $1)",
        &[&sweep.now()],
    )
    .await
    .unwrap();
    sweep.advance(sweep.config.poll_give_up + Duration::from_secs(1));
    assert_eq!(
        sweep.check_once().await,
        InboxCheckStats::default(),
        "no check while the key's own check fails"
    );
    let polled = sweep.poll_once().await;
    assert_eq!(polled.given_up, 0, "{polled:?}");
    assert_eq!(job_state(&db, "job_old").await.as_deref(), Some("open"));
    assert_eq!(
        count(
            &db,
            "select count(*) from sume.events where set_aside_at is not null"
        )
        .await,
        0
    );

    // With the right URL the same answers are verdicts again.
    let right = Sweep::at(&db, &sim.api_url(), clocked_config()).await;
    right.clock.set(sweep.now());
    let checked = right.check_once().await;
    assert_eq!(checked.foreign, 1, "{checked:?}");
    right.advance(sweep.config.poll_max_interval * 2);
    assert_eq!(right.poll_once().await.given_up, 1);
    assert_eq!(job_state(&db, "job_old").await.as_deref(), Some("expired"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_day_s_read_allowance_is_never_exceeded() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let mut jobs = Vec::new();
    for _ in 0..6 {
        jobs.push(create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 20})).await);
    }
    wait_ended(&http, &sim, &jobs).await;
    // Four reads a day: the key's check, then three polls; the other jobs wait for tomorrow.
    let config = SweepConfig {
        daily_reads: 4,
        list_walks: false,
        ..clocked_config()
    };
    let sweep = Sweep::new(&db, &sim, config).await;
    for id in &jobs {
        register(&db, id).await;
    }
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    let stats = sweep.poll_once().await;
    assert_eq!(stats.closed_by_poll, 3, "{stats:?}");
    assert_eq!(stats.deferred, 3, "{stats:?}");
    let reads: RequestsAnswer = sim_get(&http, &sim, "requests?key=main").await;
    let gets = reads.requests.iter().filter(|r| r.method == "GET").count();
    assert_eq!(gets, 4, "the key's check and three polls");
    let used: i32 = db
        .client()
        .await
        .query_one(
            "select day_used from sume.rate_buckets where key_name = 'main'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(used, 4);
}
