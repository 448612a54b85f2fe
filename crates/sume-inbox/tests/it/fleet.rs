//! The fleet's picture: each instance's heartbeat and per-minute counters (one statement a
//! minute, `sume_inbox::actors::heartbeat`), shown on any instance's console overview and at
//! `GET /v1/instances`. A 401 writes nothing at request time; counts survive a database
//! outage and are never added twice; old rows are pruned.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use reqwest::StatusCode;
use serde_json::Value;
use sume_inbox::actors::heartbeat::Fleet;
use sume_inbox::actors::supervision::Health;
use sume_inbox::config::FleetConfig;
use sume_inbox::db::clock::Clock;
use sume_inbox::db::{MinuteCounts, Store};
use sume_inbox::metrics::{Metrics, WebhookOutcome};

use crate::console::{Console, OPERATOR};
use crate::support::*;

/// A signed-in console on a daemon of `config` (ADMIN_TOKEN set to [`OPERATOR`]).
pub(super) async fn console_with(mut c: sume_inbox::config::Config) -> Console {
    c.admin_token = Some(sume_wire::Secret::new(OPERATOR));
    let mut console = Console::on(c).await;
    console.sign_in().await;
    console
}

/// `GET /v1/instances` of the console's daemon.
async fn fleet_of(console: &Console) -> Value {
    let r = console
        .http
        .get(console.daemon.admin_url("/v1/instances"))
        .bearer_auth(OPERATOR)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

/// The fleet's counts over every minute stored.
/// Waits for the one instance's first heartbeat row.
pub(super) async fn first_heartbeat(db: &TestDb) {
    wait_for("the first heartbeat", Duration::from_secs(20), || async {
        db.scalar("select count(*) from sume.instances").await == 1
    })
    .await;
}

async fn stored_counts(db: &TestDb) -> [i64; 7] {
    let row = db
        .client()
        .await
        .query_one(
            "select coalesce(sum(stored), 0)::int8, coalesce(sum(duplicates), 0)::int8,
                    coalesce(sum(unauthorized), 0)::int8, coalesce(sum(unavailable), 0)::int8,
                    coalesce(sum(closed_by_webhook), 0)::int8,
                    coalesce(sum(closed_by_poll), 0)::int8, coalesce(sum(given_up), 0)::int8
             from sume.instance_minutes",
            &[],
        )
        .await
        .unwrap();
    std::array::from_fn(|i| row.get(i))
}

#[tokio::test(flavor = "multi_thread")]
async fn two_instances_on_one_database_each_show_the_whole_fleet() {
    let db = TestDb::new().await;
    let a = console_with(config(&db.url)).await;
    let b = console_with(config(&db.url)).await;
    wait_for("both heartbeats", Duration::from_secs(20), || async {
        db.scalar("select count(*) from sume.instances where tasks ? 'ingest-0'")
            .await
            == 2
    })
    .await;
    let (fa, fb) = (fleet_of(&a).await, fleet_of(&b).await);
    let (name_a, name_b) = (
        fa["this_instance"].as_str().unwrap(),
        fb["this_instance"].as_str().unwrap(),
    );
    assert_ne!(name_a, name_b);
    assert_eq!(fa["instances"].as_array().unwrap().len(), 2, "{fa}");
    assert_eq!(fa["last_hour"].as_array().unwrap().len(), 60, "{fa}");
    assert_eq!(fa["instances"][0]["tasks"]["attach"], "running", "{fa}");
    // An instance row with a hostile host and task name, silent for ten minutes.
    db.client()
        .await
        .execute(
            "insert into sume.instances (instance, hostname, pid, version, started_at, last_seen, tasks)
             values ('gone-1', '<script>alert(1)</script>', 7, '0.0.1', now() - interval '1 hour',
                     now() - interval '10 minutes', '{\"<img src=x>\": \"running\"}')",
            &[],
        )
        .await
        .unwrap();
    for console in [&a, &b] {
        let (s, _, page) = console.get("/console/overview").await;
        assert_eq!(s, 200, "{page}");
        for name in [name_a, name_b, "gone-1"] {
            assert!(page.contains(name), "{name} missing: {page}");
        }
        for task in ["attach", "ingest-0", "sweep-poll", "fleet"] {
            assert!(
                page.contains(&format!("<code>{task}</code>")),
                "{task}: {page}"
            );
        }
        assert_eq!(page.matches("this one").count(), 1, "{page}");
        assert_eq!(page.matches(">alive<").count(), 2, "{page}");
        assert_eq!(page.matches(">silent<").count(), 1, "{page}");
        assert!(
            !page.contains("<script>alert") && !page.contains("<img src=x>"),
            "{page}"
        );
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
        assert!(
            page.contains("<svg") && page.contains("<polyline"),
            "{page}"
        );
        assert!(!page.contains("style="), "no inline style: {page}");
    }
    a.daemon.stop().await;
    b.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_401_writes_nothing_and_every_count_reaches_the_overview() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    // No minute boundary inside the test: only the first and the last write happen.
    c.fleet = FleetConfig {
        interval: Duration::from_secs(86_400),
    };
    let console = console_with(c).await;
    first_heartbeat(&db).await;
    watch_every_write(&db).await;
    let http = reqwest::Client::new();
    let url = console.daemon.url("/webhooks/sume");
    forged_deliveries_write_nothing(&db, &http, &url).await;
    a_job_closed_by_its_webhook_delivered_twice(&db, &http, &url).await;
    assert_eq!(
        stored_counts(&db).await,
        [0; 7],
        "nothing written before the minute ends"
    );
    // The last write at shutdown carries the partial minute, and every task finished.
    console.daemon.stop().await;
    assert_eq!(stored_counts(&db).await, [2, 1, 20, 0, 1, 0, 0]);
    let finished = "select count(*) from sume.instances
                    where not exists (select 1 from jsonb_each_text(tasks) where value <> 'finished')";
    assert_eq!(db.scalar(finished).await, 1);
    // Another instance shows it: stopped, and its counts in the chart and its legend.
    let other = console_with(config(&db.url)).await;
    let (_, _, page) = other.get("/console/overview").await;
    assert!(page.contains(">stopped<"), "{page}");
    assert!(
        page.contains(
            "2 webhooks stored, 1 duplicates, 20 401 refused, 0 503 answered, 1 closed by webhook"
        ),
        "{page}"
    );
    other.daemon.stop().await;
}

/// Every row written to any table of the schema from now on is seen in `public.writes_seen`.
async fn watch_every_write(db: &TestDb) {
    db.client()
        .await
        .batch_execute(
            "create table public.writes_seen (tbl text, op text);
             create function public.seen() returns trigger language plpgsql as
               $$ begin insert into public.writes_seen values (tg_table_name, tg_op); return null; end $$;
             do $$ declare t record; begin
               for t in select tablename from pg_tables where schemaname = 'sume' loop
                 execute format('create trigger seen after insert or update or delete on sume.%I
                                 for each row execute function public.seen()', t.tablename);
               end loop; end $$;",
        )
        .await
        .unwrap();
}

/// Twenty deliveries signed with the wrong secret are refused (401) and write nothing; the
/// same watch sees a stored delivery's write.
async fn forged_deliveries_write_nothing(db: &TestDb, http: &reqwest::Client, url: &str) {
    for i in 0..20 {
        let mut forged = Delivery::completed(&format!("job_forged_{i}"));
        forged.secret = "not-the-secret".into();
        assert_eq!(forged.send(http, url).await.status(), 401);
    }
    assert_eq!(
        db.scalar("select count(*) from public.writes_seen").await,
        0,
        "a 401 wrote"
    );
    assert_eq!(
        Delivery::completed("job_b").send(http, url).await.status(),
        204
    );
    assert!(db.scalar("select count(*) from public.writes_seen").await > 0);
}

/// A registered job's webhook, delivered twice (one stored, one duplicate), closes it.
async fn a_job_closed_by_its_webhook_delivered_twice(
    db: &TestDb,
    http: &reqwest::Client,
    url: &str,
) {
    db.client()
        .await
        .execute("insert into sume.jobs (job_id) values ('job_a')", &[])
        .await
        .unwrap();
    for _ in 0..2 {
        assert_eq!(
            Delivery::completed("job_a").send(http, url).await.status(),
            204
        );
    }
    wait_for(
        "job_a closed by its webhook",
        Duration::from_secs(20),
        || async { job_state(db, "job_a").await.as_deref() == Some("completed") },
    )
    .await;
}

/// A migrated database of its own on the server of `url`.
async fn migrated(server: &str) -> (TestDb, Store) {
    let db = TestDb::on_server(server).await;
    sume_inbox::db::migrate::migrate(&mut db.client().await)
        .await
        .unwrap();
    let store = Store::new(&db.url, 2).unwrap();
    (db, store)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flush_during_an_outage_loses_nothing_and_a_retried_one_adds_nothing_twice() {
    let cluster = PrivateCluster::start("fleet-outage");
    let (db, store) = migrated(&cluster.url).await;
    let metrics = Arc::new(Metrics::new());
    let fleet = Fleet::new(
        store.clone(),
        metrics.clone(),
        Health::default(),
        "i-1",
        Clock::Database,
    );
    metrics.webhook(WebhookOutcome::stored);
    fleet.flush().await.unwrap();
    cluster.kill();
    metrics.webhook(WebhookOutcome::unauthorized);
    metrics.webhook(WebhookOutcome::unavailable);
    assert!(fleet.flush().await.is_err(), "the database is down");
    assert_eq!(
        fleet.unwritten(),
        MinuteCounts {
            unauthorized: 1,
            unavailable: 1,
            ..MinuteCounts::default()
        }
    );
    metrics.webhook(WebhookOutcome::duplicate);
    cluster.restart();
    wait_for(
        "the flush after the outage",
        Duration::from_secs(30),
        || async { fleet.flush().await.is_ok() },
    )
    .await;
    assert!(fleet.unwritten().is_zero());
    assert_eq!(stored_counts(&db).await, [1, 1, 1, 1, 0, 0, 0]);
    // A flush whose commit happened but whose answer was lost is sent again: its number
    // says it was applied, and nothing is added.
    let pending = [sume_inbox::db::PendingMinute {
        seq: 1_000,
        minute: Utc::now(),
        counts: MinuteCounts {
            stored: 5,
            ..MinuteCounts::default()
        },
    }];
    let beat = sume_inbox::db::Heartbeat {
        instance: "i-1".into(),
        hostname: "h".into(),
        pid: 1,
        version: "v".into(),
        started_at: Utc::now(),
        tasks: serde_json::json!({}),
        api_keys: vec![],
    };
    assert_eq!(
        store
            .instances_flush(&beat, &pending, &Clock::Database)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .instances_flush(&beat, &pending, &Clock::Database)
            .await
            .unwrap(),
        0
    );
    assert_eq!(stored_counts(&db).await, [6, 1, 1, 1, 0, 0, 0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn counts_land_in_their_minute_and_old_rows_are_pruned() {
    let (db, store) = migrated(&admin_url()).await;
    let t0 = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap();
    let clock = Clock::fixed(t0);
    let metrics = Arc::new(Metrics::new());
    let fleet = Fleet::new(
        store.clone(),
        metrics.clone(),
        Health::default(),
        "i-1",
        clock.clone(),
    );
    // A flush on the minute boundary writes the minute that just ended.
    metrics.webhook(WebhookOutcome::stored);
    clock.advance(Duration::from_secs(60));
    fleet.flush().await.unwrap();
    // A partial minute (a shutdown at 12:01:30) is that minute's.
    metrics.closed("poll", 2);
    clock.advance(Duration::from_secs(30));
    fleet.flush().await.unwrap();
    let rows = db
        .client()
        .await
        .query(
            "select to_char(minute at time zone 'UTC', 'HH24:MI'), stored, closed_by_poll
             from sume.instance_minutes order by minute",
            &[],
        )
        .await
        .unwrap();
    let rows: Vec<(String, i64, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(rows, [("12:00".into(), 1, 0), ("12:01".into(), 0, 2)]);
    let hour = store.instance_minutes_last_hour(&clock).await.unwrap();
    assert_eq!(hour.len(), 60);
    assert_eq!(
        hour.last().unwrap().minute,
        t0 + chrono::Duration::minutes(1)
    );
    assert_eq!(hour[58].counts.stored, 1);
    // Two days later: the minutes are past keeping; a week later the instance is forgotten.
    clock.advance(Duration::from_secs(49 * 3600));
    metrics.webhook(WebhookOutcome::stored);
    fleet.flush().await.unwrap();
    assert_eq!(fleet.prune().await.unwrap(), 2);
    assert_eq!(
        db.scalar("select count(*) from sume.instance_minutes")
            .await,
        1
    );
    assert_eq!(db.scalar("select count(*) from sume.instances").await, 1);
    clock.advance(Duration::from_secs(8 * 24 * 3600));
    assert_eq!(
        fleet.prune().await.unwrap(),
        2,
        "the last minute and the instance"
    );
    assert_eq!(db.scalar("select count(*) from sume.instances").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_last_hour_is_one_range_of_the_primary_key_beside_two_days_of_twenty_instances() {
    let (db, _store) = migrated(&admin_url()).await;
    let c = db.client().await;
    c.batch_execute(
        "insert into sume.instance_minutes (minute, instance, stored, unauthorized)
         select timestamptz '2026-03-01 12:00:00+00' - make_interval(mins => m), 'i-' || i, m, i
         from generate_series(0, 48 * 60 - 1) m, generate_series(1, 20) i;
         analyze sume.instance_minutes;",
    )
    .await
    .unwrap();
    let sql = sume_inbox::db::sql::INSTANCE_MINUTES_LAST_HOUR.sql();
    let at = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 30).unwrap();
    let plan: Vec<String> = c
        .query(
            &format!("explain (analyze, format text) {sql}"),
            &[&Some(at)],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let plan = plan.join("\n");
    assert!(plan.contains("instance_minutes_pkey"), "{plan}");
    assert!(!plan.contains("Seq Scan on instance_minutes"), "{plan}");
    let hour = Store::new(&db.url, 1)
        .unwrap()
        .instance_minutes_last_hour(&Clock::fixed(at))
        .await
        .unwrap();
    // Minute m ago holds m stored per instance: the oldest shown is 59 minutes ago.
    assert_eq!(hour.len(), 60);
    assert_eq!(hour[0].counts.stored, 59 * 20);
    assert_eq!(hour[59].counts.unauthorized, (1..=20).sum::<i64>());
}

/// `sume-inbox stats` and `GET /v1/stats` listed the reads of every key that ever read, among
/// them the keys of instances stopped long ago (a key since taken out of SUME_API_KEYS): now
/// only the keys a live instance holds, as `instances running` counts them.
#[tokio::test(flavor = "multi_thread")]
async fn stats_lists_the_reads_of_the_keys_live_instances_hold_only() {
    let (db, store) = migrated(&admin_url()).await;
    let beat = |instance: &str, keys: &[&str], task: &str| sume_inbox::db::Heartbeat {
        instance: instance.into(),
        hostname: "h".into(),
        pid: 1,
        version: "v".into(),
        started_at: Utc::now(),
        tasks: serde_json::json!({ "sweep": task }),
        api_keys: keys.iter().map(|k| (*k).to_owned()).collect(),
    };
    let long_ago = Clock::fixed(Utc::now() - chrono::Duration::days(2));
    let beats = [
        (beat("i-live", &["main"], "running"), Clock::Database),
        (beat("i-gone", &["old"], "running"), long_ago),
        (beat("i-stopped", &["spare"], "finished"), Clock::Database),
    ];
    for (beat, clock) in &beats {
        store.instances_flush(beat, &[], clock).await.unwrap();
    }
    db.client()
        .await
        .batch_execute(
            "insert into sume.rate_buckets (key_name, tokens, day_used)
             values ('main', 1, 3), ('old', 1, 5), ('spare', 1, 7)",
        )
        .await
        .unwrap();
    let stats = store.stats_summary().await.unwrap();
    let names: Vec<&str> = stats
        .reads_today
        .iter()
        .map(|k| k.key_name.as_str())
        .collect();
    assert_eq!(names, ["main"]);
    assert_eq!(stats.instances_live, 1);
    let text = sume_inbox::cli::render::render_stats(&stats, false);
    assert!(
        text.contains("sume reads today .... main: 3 used"),
        "{text}"
    );
    assert!(!text.contains("old:") && !text.contains("spare:"), "{text}");
}
