//! Migrations against a live schema: instances that start at once while an index builds
//! concurrently, an index build cut short, found invalid and built again, and a migration held
//! behind an open transaction while ingest goes on.

use std::time::Duration;

use sume_inbox::db::migrate::{latest, migrate, migrate_with, LockWaits, Migration, MIGRATIONS};

use crate::support::*;

async fn version(db: &TestDb) -> i32 {
    db.client()
        .await
        .query_one("select max(version) from sume.schema_migrations", &[])
        .await
        .unwrap()
        .get(0)
}

/// `(valid, unique, definition)` of an index, if it exists.
async fn index(db: &TestDb, name: &str) -> Option<(bool, bool, String)> {
    db.client()
        .await
        .query_opt(
            "select indisvalid, indisunique, pg_get_indexdef(indexrelid)
             from pg_index where indexrelid = to_regclass($1)",
            &[&name],
        )
        .await
        .unwrap()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
}

#[tokio::test(flavor = "multi_thread")]
async fn instances_that_migrate_at_once_all_start_while_an_index_builds_concurrently() {
    let db = TestDb::new().await;
    // The others wait for the lock while one builds; a waiter blocked inside a statement would
    // be waited for by `create index concurrently`, a deadlock.
    let mut runs = Vec::new();
    for _ in 0..4 {
        let url = db.url.clone();
        runs.push(tokio::spawn(async move {
            let mut c = connect(&url).await;
            migrate(&mut c).await
        }));
    }
    let mut applied = Vec::new();
    for run in runs {
        // Not a speed check: a deadlocked migration never ends, and the test must say so.
        let run = tokio::time::timeout(std::time::Duration::from_secs(300), run)
            .await
            .expect("the migrations deadlocked");
        applied.extend(
            run.unwrap()
                .expect("every instance migrates or finds it done"),
        );
    }
    applied.sort();
    let all: Vec<i32> = sume_inbox::db::migrate::MIGRATIONS
        .iter()
        .map(|m| m.0)
        .collect();
    assert_eq!(applied, all, "each migration applied exactly once");
    assert_eq!(version(&db).await, latest());
    let (valid, _, _) = index(&db, "sume.jobs_order_id").await.unwrap();
    assert!(valid);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_build_cut_short_is_dropped_and_built_again() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    migrate(&mut c).await.unwrap();
    // Undo the build, then leave an invalid index under its name, as a cancelled or crashed
    // `create index concurrently` does (here: a unique build that meets a duplicate).
    c.batch_execute(
        "insert into sume.jobs (job_id, order_id) values ('job_a', 'order_1'), ('job_b', 'order_1');
         drop index sume.jobs_order_id;
         delete from sume.schema_migrations where version = 11;",
    )
    .await
    .unwrap();
    let cut = c
        .batch_execute(
            "create unique index concurrently jobs_order_id on sume.jobs (order_id)
             where order_id is not null",
        )
        .await;
    assert!(
        cut.is_err(),
        "the duplicate order id fails the unique build"
    );
    let (valid, unique, _) = index(&db, "sume.jobs_order_id").await.unwrap();
    assert!(!valid && unique, "left behind invalid");

    assert_eq!(migrate(&mut c).await.unwrap(), vec![11]);
    let (valid, unique, def) = index(&db, "sume.jobs_order_id").await.unwrap();
    assert!(valid && !unique, "{def}");
    assert!(def.contains("(order_id, job_id)"), "{def}");
    assert_eq!(version(&db).await, latest());
    // Both jobs of the order are found through it.
    let store = sume_inbox::db::Store::new(&db.url, 2).unwrap();
    let filter = sume_inbox::db::JobFilter {
        order_id: Some("order_1".into()),
        ..Default::default()
    };
    let jobs: Vec<String> = store
        .jobs_list(&filter, "", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.job_id)
        .collect();
    assert_eq!(jobs, ["job_a", "job_b"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_churning_tables_are_vacuumed_sooner_than_the_defaults() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    migrate(&mut c).await.unwrap();
    for table in ["sume.jobs", "sume.events"] {
        let options: Vec<String> = c
            .query_one(
                "select coalesce(reloptions, '{}') from pg_class where oid = $1::text::regclass",
                &[&table],
            )
            .await
            .unwrap()
            .get(0);
        for wanted in [
            "autovacuum_vacuum_scale_factor=0.02",
            "autovacuum_vacuum_insert_scale_factor=0.02",
            "autovacuum_vacuum_cost_limit=2000",
        ] {
            assert!(options.iter().any(|o| o == wanted), "{table}: {options:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_migration_held_behind_an_open_reader_never_holds_up_ingest() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    // A report left open: it holds a share lock on the inbox until it ends.
    let reader = db.client().await;
    reader
        .batch_execute("begin; select count(*) from sume.events;")
        .await
        .unwrap();
    // An upgrade whose migration changes the inbox: it needs the table to itself.
    let mut migrations: Vec<Migration> = MIGRATIONS.to_vec();
    migrations.push((
        9001,
        "held_behind_a_reader",
        "alter table sume.events add column held_behind_a_reader text",
    ));
    let waits = LockWaits {
        timeout: Duration::from_millis(200),
        first_pause: Duration::from_millis(50),
        max_pause: Duration::from_millis(200),
        ..LockWaits::default()
    };
    let runner = {
        let (url, waits) = (db.url.clone(), waits.clone());
        tokio::spawn(async move {
            let mut c = connect(&url).await;
            migrate_with(&mut c, &migrations, &waits).await
        })
    };
    // Deliveries keep coming while the migration waits, refused at lock_timeout and tried
    // again: each is answered 204 and stored (without the timeout, each would queue behind
    // the waiting `alter` until INGEST_TIMEOUT, and be answered 503).
    let mut sent = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while waits.refused() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the migration was never refused"
        );
        let d = Delivery::completed(&format!("job_during_{sent}"));
        assert_eq!(d.send(&http, &url).await.status(), 204, "delivery {sent}");
        sent += 1;
    }
    assert!(!runner.is_finished(), "the migration waits for the reader");
    eprintln!(
        "{sent} deliveries answered 204 while the migration was refused {} times",
        waits.refused()
    );
    assert_eq!(db.scalar("select count(*) from sume.events").await, sent);
    // The reader ends: the next attempt takes its locks and the migration is applied.
    reader.batch_execute("commit").await.unwrap();
    let applied = tokio::time::timeout(Duration::from_secs(60), runner)
        .await
        .expect("the migration ends once the reader has")
        .unwrap()
        .unwrap();
    assert_eq!(applied, vec![9001]);
    assert_eq!(
        db.scalar(
            "select count(*) from information_schema.columns
             where table_schema = 'sume' and column_name = 'held_behind_a_reader'"
        )
        .await,
        1
    );
    let d = Delivery::completed("job_after");
    assert_eq!(d.send(&http, &url).await.status(), 204);
    daemon.stop().await;
}
