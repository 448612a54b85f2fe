//! Behind PgBouncer in transaction mode (`scripts/devbouncer`, Debian's `pgbouncer`), where a
//! client holds a server connection for one transaction only: with `DB_POOLER=transaction` two
//! instances close every job, with no LISTEN and no named statement; the schema comes from a
//! direct connection; and the named statements of a plain pool do break there, which is what
//! the setting is for.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use sume_inbox::config::{Config, DatabaseRoutes, Pooler};
use sume_inbox::db::Store;
use sume_wire::Secret;

use crate::support::*;

/// A PgBouncer of the test's own in front of `make test`'s server, removed when dropped.
struct Bouncer {
    dir: PathBuf,
    url: String,
}

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/devbouncer");

impl Bouncer {
    fn start(name: &str) -> Bouncer {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{name}-{}", std::process::id()));
        let d = dir.to_str().unwrap();
        let _ = Command::new(SCRIPT).args(["destroy", d]).output();
        let out = Command::new(SCRIPT)
            .args(["start", d, &admin_url()])
            .output()
            .expect("run scripts/devbouncer");
        assert!(
            out.status.success(),
            "devbouncer: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Bouncer { dir, url }
    }

    /// The test database `db` reached through the pooler.
    fn pooled(&self, db: &TestDb) -> String {
        on_server_of(&db.url, &self.url)
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = Command::new(SCRIPT)
            .args(["destroy", self.dir.to_str().unwrap()])
            .output();
    }
}

/// A daemon whose pool goes through `bouncer` with DB_POOLER=transaction and no LISTEN;
/// migrations at start over the direct URL when `migrate` is set.
fn pooled_config(db: &TestDb, bouncer: &Bouncer, migrate: bool) -> Config {
    let mut c = config(&db.url);
    c.database_url = Secret::new(bouncer.pooled(db));
    c.database = DatabaseRoutes {
        pooler: Pooler::Transaction,
        migrate_url: migrate.then(|| Secret::new(db.url.as_str())),
        listen_url: None,
    };
    c
}

/// Two instances through one PgBouncer in transaction mode, neither with a LISTEN connection:
/// events arrive at both before and after their jobs are registered (by the application's own
/// transaction, or through either instance's admin API), some twice. Every job closes with
/// the status its webhook said, once.
#[tokio::test(flavor = "multi_thread")]
async fn two_instances_behind_pgbouncer_in_transaction_mode_close_every_job() {
    const JOBS: usize = 40;
    let db = TestDb::new().await;
    let bouncer = Bouncer::start("bouncer-fleet");
    let a = Daemon::start(pooled_config(&db, &bouncer, true)).await;
    // The second one migrates nothing: the schema is current, and it is only checked.
    let b = Daemon::start(pooled_config(&db, &bouncer, false)).await;
    let daemons = [&a, &b];
    let http = reqwest::Client::new();
    let app = app_pool(&db).await;
    let status = |i: usize| if i % 4 == 3 { "failed" } else { "completed" };
    let job = |i: usize| format!("job_pooled_{i}");
    for i in 0..JOBS {
        if i % 2 == 0 {
            let r = Delivery::status(&job(i), status(i))
                .send(&http, &daemons[i % 2].url("/webhooks/sume"))
                .await;
            assert_eq!(r.status(), 204, "early delivery of {}", job(i));
        }
    }
    for i in 0..JOBS {
        if i % 3 == 0 {
            let r = api_register(&http, daemons[(i + 1) % 2], &job(i), &format!("o{i}")).await;
            assert!(
                r.status().is_success(),
                "register {}: {}",
                job(i),
                r.status()
            );
        } else {
            app_commit_job(&app, &job(i), &format!("o{i}"), Duration::ZERO).await;
        }
    }
    for i in 0..JOBS {
        // The late ones, and the early ones again at the other instance (duplicates).
        let r = Delivery::status(&job(i), status(i))
            .send(&http, &daemons[(i + 1) % 2].url("/webhooks/sume"))
            .await;
        assert_eq!(r.status(), 204, "delivery of {}", job(i));
    }
    wait_for("every job closed", Duration::from_secs(60), || async {
        db.scalar("select count(*) from sume.jobs where state <> 'open'")
            .await
            == JOBS as i64
    })
    .await;
    for i in 0..JOBS {
        assert_eq!(
            job_state(&db, &job(i)).await.as_deref(),
            Some(status(i)),
            "{}",
            job(i)
        );
    }
    assert_eq!(
        db.scalar("select count(*) from sume.events").await,
        JOBS as i64,
        "each event stored once"
    );
    assert_eq!(
        db.scalar("select count(*) from sume.events where applied_at is null")
            .await,
        0
    );
    a.stop().await;
    b.stop().await;
}

/// The reason for DB_POOLER: tokio-postgres names its statements, and behind a transaction
/// pooler the next round trip may run on another server connection, where the name means
/// nothing. PgBouncer hands out its idle server connections last-in first-out, so while
/// another client's transaction holds the connection a statement was prepared on, running it
/// fails. The store behind the pooler runs its statements all the same.
#[tokio::test(flavor = "multi_thread")]
async fn named_statements_break_behind_the_pooler_and_the_pooled_store_does_not() {
    let db = TestDb::new().await;
    let bouncer = Bouncer::start("bouncer-named");
    sume_inbox::db::migrate::migrate(&mut db.client().await)
        .await
        .unwrap();
    let pooled = bouncer.pooled(&db);
    let one = connect(&pooled).await;
    let other = connect(&pooled).await;
    let statement = one.prepare("select 1::int").await.unwrap();
    other.batch_execute("begin").await.unwrap();
    let err = one.query(&statement, &[]).await.unwrap_err();
    assert!(
        err.to_string().contains("does not exist")
            || format!("{:?}", err.as_db_error()).contains("does not exist"),
        "{err:?}"
    );
    // While that transaction still holds the connection the pooled store prepared nothing on.
    let store = Store::new(&pooled, 4).unwrap().behind_pooler(None);
    for _ in 0..3 {
        assert_eq!(
            store.schema_migrations_version().await.unwrap(),
            sume_inbox::db::migrate::latest()
        );
        assert!(store
            .events_attachable_scan(10)
            .await
            .unwrap()
            .job_ids
            .is_empty());
    }
    other.batch_execute("commit").await.unwrap();
}

/// The binary with these variables only; answers its exit status and what it printed.
fn sume_inbox(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("run sume-inbox");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

/// Behind the pooler without MIGRATE_DATABASE_URL the daemon migrates nothing (a session
/// advisory lock cannot cross a transaction pooler): on an empty database it refuses to start,
/// naming `sume-inbox migrate`. That command refuses the pooler too, and runs over
/// MIGRATE_DATABASE_URL; then the daemon starts, and the admin commands work through the pooler.
#[tokio::test(flavor = "multi_thread")]
async fn behind_the_pooler_migrations_are_a_step_of_their_own() {
    let db = TestDb::new().await;
    let bouncer = Bouncer::start("bouncer-migrate");
    let config = pooled_config(&db, &bouncer, false);
    let listeners = sume_inbox::Listeners {
        webhook: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        admin: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let err = sume_inbox::run(config.clone(), listeners, shutdown)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("sume-inbox migrate"), "{err}");
    assert_eq!(
        db.scalar("select count(*) from pg_namespace where nspname = 'sume'")
            .await,
        0,
        "nothing was migrated through the pooler"
    );
    let pooled = bouncer.pooled(&db);
    let env = [
        ("DATABASE_URL", pooled.as_str()),
        ("DB_POOLER", "transaction"),
    ];
    let (code, text) = sume_inbox(&["migrate"], &env);
    assert_eq!(code, Some(78), "{text}");
    assert!(text.contains("MIGRATE_DATABASE_URL"), "{text}");
    let with_direct = [env[0], env[1], ("MIGRATE_DATABASE_URL", db.url.as_str())];
    let (code, text) = sume_inbox(&["migrate"], &with_direct);
    assert_eq!(code, Some(0), "{text}");
    let daemon = Daemon::start(config).await;
    let http = reqwest::Client::new();
    let r = Delivery::completed("job_after_migrate")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    assert_eq!(r.status(), 204);
    daemon.stop().await;
    // The event waits for its job row; the operator's numbers say so, read through the pooler.
    let (code, text) = sume_inbox(&["stats", "--json"], &env);
    assert_eq!(code, Some(0), "{text}");
    let stats: serde_json::Value = serde_json::from_str(&text).expect(&text);
    assert_eq!(stats["waiting"], 1, "{text}");
}

/// A connection dropped inside a transaction it opened with a plain `begin` (while learning a
/// statement's types, if its future is cancelled) is closed rather than pooled again, so no
/// later statement runs inside that transaction.
#[tokio::test(flavor = "multi_thread")]
async fn a_connection_left_inside_a_plain_transaction_is_not_pooled_again() {
    use sume_inbox::db::Session;
    let db = TestDb::new().await;
    let store = Store::new(&db.url, 2).unwrap().behind_pooler(None);
    let conn = store.conn().await.unwrap();
    conn.raw().batch_execute("begin").await.unwrap();
    conn.raw_transaction(true);
    drop(conn);
    assert_eq!(
        store.pool().status().size,
        0,
        "closed, not back in the pool"
    );
    let conn = store.conn().await.unwrap();
    conn.raw().batch_execute("begin").await.unwrap();
    conn.raw().batch_execute("commit").await.unwrap();
    conn.raw_transaction(false);
    drop(conn);
    assert_eq!(store.pool().status().size, 1, "a clean one goes back");
}

/// With LISTEN_DATABASE_URL (a direct connection) attach hears of job rows as they commit even
/// behind the pooler: with a catch-up scan an hour apart, a job row committed after its event
/// can only have been found through the notification.
#[tokio::test(flavor = "multi_thread")]
async fn behind_the_pooler_listen_goes_over_its_own_direct_connection() {
    let db = TestDb::new().await;
    let bouncer = Bouncer::start("bouncer-listen");
    let mut config = pooled_config(&db, &bouncer, true);
    config.database.listen_url = Some(Secret::new(db.url.as_str()));
    config.attach.scan_interval = Duration::from_secs(3600);
    let daemon = Daemon::start(config).await;
    let http = reqwest::Client::new();
    let app = app_pool(&db).await;
    // Once its LISTEN has run, a notification reaches the daemon.
    wait_for("the LISTEN connection", Duration::from_secs(30), || async {
        db.scalar(
            "select count(*) from pg_stat_activity
             where datname = current_database() and query ilike 'listen sume_jobs%'",
        )
        .await
            > 0
    })
    .await;
    let r = Delivery::completed("job_heard")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    assert_eq!(r.status(), 204);
    app_commit_job(&app, "job_heard", "o1", Duration::ZERO).await;
    wait_for("the job closed", Duration::from_secs(30), || async {
        job_state(&db, "job_heard").await.as_deref() == Some("completed")
    })
    .await;
    daemon.stop().await;
}
