//! Faults of the database under a running daemon, as an operator could cause them: a role's
//! settings changed and reset, connections refused or cut, a table locked. The daemon recovers
//! once the fault is gone, without anyone killing its connections, and says what went wrong
//! in the server's words.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use sume_inbox::db::Store;

use crate::support::*;

/// The daemon's backends on the cluster (every connection of its pools, and its LISTENs).
const DAEMON_BACKENDS: &str =
    "select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name = 'sume-inbox'";

/// Sends fresh deliveries until one is answered `status`; panics after `deadline`.
async fn until_answered(daemon: &Daemon, status: u16, what: &str, deadline: Duration) {
    let (http, url) = (reqwest::Client::new(), daemon.url("/webhooks/sume"));
    wait_for(what, deadline, || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let job = format!("job_{}", rand::thread_rng().gen::<u32>());
            Delivery::completed(&job).send(&http, &url).await.status() == status
        }
    })
    .await;
}

/// `/readyz`'s status and body.
async fn readiness(daemon: &Daemon) -> (u16, String) {
    let r = reqwest::get(daemon.url("/readyz")).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// One fresh delivery's status, sent while `locker` holds a lock on `sume.events` for 300 ms:
/// the insert waits that long, so that a statement timeout of 1 ms fails it every time (the
/// insert alone may take less).
async fn deliver_slowly(daemon: &Daemon, locker: &mut tokio_postgres::Client) -> u16 {
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute("lock table sume.events in share mode")
        .await
        .unwrap();
    let (http, url) = (reqwest::Client::new(), daemon.url("/webhooks/sume"));
    let job = format!("job_{}", rand::thread_rng().gen::<u32>());
    let sent = tokio::spawn(async move { Delivery::completed(&job).send(&http, &url).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.rollback().await.unwrap();
    sent.await.unwrap().status().as_u16()
}

/// Delivers slowly until `done` holds of the last status; panics after `deadline`.
async fn deliver_until(
    daemon: &Daemon,
    locker: &mut tokio_postgres::Client,
    what: &str,
    mut done: impl FnMut(u16) -> bool,
) {
    let end = tokio::time::Instant::now() + Duration::from_secs(15);
    while !done(deliver_slowly(daemon, locker).await) {
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for: {what}"
        );
    }
}

/// Sets `setting` on the cluster's role (the daemon's), cuts the daemon's connections so that
/// new ones read it, waits for 503s, resets it, and expects 204s again within seconds, the
/// connections that read the setting being replaced by the daemon itself.
async fn fault_then_recovery(admin: &mut tokio_postgres::Client, daemon: &Daemon, setting: &str) {
    let name = setting.split_once('=').unwrap().0.trim();
    admin
        .batch_execute(&format!("alter role current_user set {setting}"))
        .await
        .unwrap();
    admin.batch_execute(DAEMON_BACKENDS).await.unwrap();
    // Five in a row refused: past the cut connections, the new ones hold the setting.
    let in_a_row = |status: u16| {
        let mut n = 0;
        move |s: u16| {
            n = if s == status { n + 1 } else { 0 };
            n >= 5
        }
    };
    deliver_until(daemon, admin, "503s under the setting", in_a_row(503)).await;
    admin
        .batch_execute(&format!("alter role current_user reset {name}"))
        .await
        .unwrap();
    // Five in a row stored: every connection that read the setting is gone.
    let what = format!("204s again, within seconds of resetting {name}");
    deliver_until(daemon, admin, &what, in_a_row(204)).await;
    wait_for("ready again", Duration::from_secs(5), || async {
        readiness(daemon).await.0 == 200
    })
    .await;
}

/// `default_transaction_read_only`, then `statement_timeout`, set on the daemon's role and
/// reset: before, the connections opened meanwhile kept the setting, and every webhook was
/// answered 503 until someone killed them (76 s in the probe that found it).
#[tokio::test(flavor = "multi_thread")]
async fn a_role_setting_reset_is_recovered_from_without_killing_connections() {
    let cluster = PrivateCluster::start("role-settings");
    let db = TestDb::on_server(&cluster.url).await;
    let daemon = Daemon::start(config(&db.url)).await;
    // Opened before any setting: it keeps the defaults it read.
    let mut admin = connect(&db.url).await;
    fault_then_recovery(&mut admin, &daemon, "default_transaction_read_only = on").await;
    fault_then_recovery(&mut admin, &daemon, "statement_timeout = '1ms'").await;
    daemon.stop().await;
}

/// The ingest writers' connections are their own: while theirs are read-only and the pool's
/// are not, `/readyz` said 200 and every webhook got 503. It asks on a writer's connection once
/// a batch failed for it, and is ready again once one of theirs may write.
#[tokio::test(flavor = "multi_thread")]
async fn readiness_follows_the_writers_connections_not_only_the_pools() {
    let cluster = PrivateCluster::start("writers-read-only");
    let db = TestDb::on_server(&cluster.url).await;
    let daemon = Daemon::start(config(&db.url)).await;
    until_answered(&daemon, 204, "a first delivery", Duration::from_secs(10)).await;
    let admin = connect(&cluster.url).await;
    admin
        .batch_execute("alter role current_user set default_transaction_read_only = on")
        .await
        .unwrap();
    // Only the writers' connections (their last statement the ingest insert) are replaced.
    let cut = admin
        .query_one(
            "select count(pg_terminate_backend(pid)) from pg_stat_activity
             where application_name = 'sume-inbox' and query like '%insert into sume.events%'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert!(cut >= 1, "no writer's connection found");
    until_answered(
        &daemon,
        503,
        "503s from the writers",
        Duration::from_secs(10),
    )
    .await;
    wait_for("not ready", Duration::from_secs(5), || async {
        let (status, said) = readiness(&daemon).await;
        status == 503 && said.contains("read-only")
    })
    .await;
    admin
        .batch_execute("alter role current_user reset default_transaction_read_only")
        .await
        .unwrap();
    wait_for("ready again", Duration::from_secs(5), || async {
        readiness(&daemon).await.0 == 200
    })
    .await;
    until_answered(&daemon, 204, "204s again", Duration::from_secs(10)).await;
    daemon.stop().await;
}

/// A pooled connection serves CONNECTION_LIFETIME at most, so that a changed setting of the
/// role or the database reaches it: before, a connection served for ever.
#[tokio::test]
async fn a_pooled_connection_is_replaced_once_past_its_lifetime() {
    let db = TestDb::new().await;
    let store = Store::with_lifetime(&db.url, 1, Duration::from_secs(1)).unwrap();
    let session = |store: &Store| {
        let store = store.clone();
        async move {
            let c = store.pool().get().await.unwrap();
            let row = c
                .query_one(
                    "select pg_backend_pid(), current_setting('default_transaction_read_only')",
                    &[],
                )
                .await
                .unwrap();
            (row.get::<_, i32>(0), row.get::<_, String>(1))
        }
    };
    let (first, read_only) = session(&store).await;
    assert_eq!(read_only, "off");
    let name = db.url.rsplit('/').next().unwrap().to_owned();
    db.client()
        .await
        .batch_execute(&format!(
            "alter database {name} set default_transaction_read_only = on"
        ))
        .await
        .unwrap();
    assert_eq!(session(&store).await, (first, "off".into()), "pooled again");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (later, read_only) = session(&store).await;
    assert_ne!(later, first, "replaced past its lifetime");
    assert_eq!(read_only, "on", "the new one reads the database's setting");
}

/// A connection the server refuses says why, in its words and with its SQLSTATE, or the
/// network's: before, "Error occurred while creating a new object: db error".
#[tokio::test]
async fn a_refused_connection_says_why_in_the_servers_words() {
    let db = TestDb::new().await;
    let role = format!("sume_limited_{}", rand::thread_rng().gen::<u32>());
    db.client()
        .await
        .batch_execute(&format!("create role {role} login connection limit 0"))
        .await
        .unwrap();
    let (scheme, rest) = db.url.split_once("://").unwrap();
    let host = rest.split_once('@').map_or(rest, |(_, host)| host);
    let limited = Store::new(&format!("{scheme}://{role}@{host}"), 1).unwrap();
    let said = limited.conn().await.err().expect("refused").to_string();
    assert_eq!(
        said,
        format!("no database connection: too many connections for role \"{role}\" (53300)")
    );
    let closed = Store::new(&format!("postgres://u@127.0.0.1:{}/db", free_port()), 1).unwrap();
    let said = closed.conn().await.err().expect("refused").to_string();
    assert!(
        said.starts_with("no database connection: error connecting to server: ")
            && said.contains("Connection refused"),
        "{said}"
    );
}

/// `sume-inbox serve` as a process of its own, with JSON logs kept; killed when dropped.
struct Logged {
    child: Child,
    webhook: String,
    logs: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl Logged {
    /// Started on `db` with `env` besides; returns once it is ready.
    async fn start(db: &TestDb, env: &[(&str, &str)]) -> Logged {
        let (webhook, admin) = (free_port(), free_port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
            .arg("serve")
            .env_clear()
            .env("DATABASE_URL", &db.url)
            .env("SUME_WEBHOOK_SECRET", SECRET)
            .env("SUME_API_URL", "http://127.0.0.1:9/v1")
            .env("LISTEN_ADDR", format!("127.0.0.1:{webhook}"))
            .env("ADMIN_ADDR", format!("127.0.0.1:{admin}"))
            .env("LOG_FORMAT", "json")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (stderr, kept) = (child.stderr.take().unwrap(), logs.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(line) = serde_json::from_str(&line) {
                    kept.lock().unwrap().push(line);
                }
            }
        });
        let daemon = Logged {
            child,
            webhook: format!("http://127.0.0.1:{webhook}"),
            logs,
        };
        let ready = format!("{}/readyz", daemon.webhook);
        wait_for("the daemon ready", START_DEADLINE, || async {
            matches!(reqwest::get(&ready).await, Ok(r) if r.status() == 200)
        })
        .await;
        daemon
    }

    /// The lines logged so far whose message starts with `message`.
    fn said(&self, message: &str) -> Vec<serde_json::Value> {
        let logs = self.logs.lock().unwrap();
        logs.iter()
            .filter(|l| {
                l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(message))
            })
            .cloned()
            .collect()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A lock on `sume.events` held past INGEST_TIMEOUT: every webhook is answered 503, and a
/// warning says why and where to look; before, nothing was logged.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_held_past_ingest_timeout_is_logged() {
    let db = TestDb::new().await;
    let daemon = Logged::start(&db, &[("INGEST_TIMEOUT", "1s")]).await;
    let mut locker = db.client().await;
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute("lock table sume.events in share mode")
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let url = format!("{}/webhooks/sume", daemon.webhook);
    for i in 0..3 {
        let r = Delivery::completed(&format!("job_locked_{i}"))
            .send(&http, &url)
            .await;
        assert_eq!(r.status(), 503);
    }
    let message = "webhook answered 503: its commit did not finish within INGEST_TIMEOUT";
    wait_for("the warning", Duration::from_secs(5), || {
        std::future::ready(!daemon.said(message).is_empty())
    })
    .await;
    let said = daemon.said(message);
    assert_eq!(said.len(), 1, "rate-limited: {said:?}");
    assert_eq!(said[0]["level"], "WARN");
    let text = said[0]["message"].as_str().unwrap();
    assert!(
        text.contains("pg_locks") && text.contains("sume.events"),
        "{text}"
    );
    lock.rollback().await.unwrap();
}

/// The pid and age of the daemon's LISTEN connection for job rows, if it has one.
async fn listen_backend(admin: &tokio_postgres::Client) -> Option<(i32, Duration)> {
    admin
        .query_opt(
            "select pid, extract(epoch from now() - backend_start)::float8 from pg_stat_activity
             where datname = current_database() and query like 'listen sume_jobs%'",
            &[],
        )
        .await
        .unwrap()
        .map(|r| (r.get(0), Duration::from_secs_f64(r.get(1))))
}

/// Waits until a LISTEN connection other than `before` is `age` old, then ends it from the
/// server; answers its pid.
async fn cut_listen_at(admin: &tokio_postgres::Client, age: Duration, before: i32) -> i32 {
    let pid = std::cell::Cell::new(0);
    wait_for("the LISTEN connection", Duration::from_secs(20), || async {
        match listen_backend(admin).await {
            Some((p, a)) if p != before && a >= age => {
                pid.set(p);
                true
            }
            _ => false,
        }
    })
    .await;
    admin
        .execute("select pg_terminate_backend($1)", &[&pid.get()])
        .await
        .unwrap();
    pid.get()
}

/// LISTEN's connection cut from the server: its loss is said as one, and the back-off starts
/// afresh after a connection that held; before, "cannot connect", and the back-off doubled at
/// every loss for the life of the process.
#[tokio::test(flavor = "multi_thread")]
async fn a_lost_listen_connection_is_said_lost_and_its_backoff_starts_afresh() {
    let db = TestDb::new().await;
    let daemon = Logged::start(&db, &[]).await;
    let admin = db.client().await;
    // Twice at once (250 ms, then 500 ms), then once it held six seconds.
    let mut pid = 0;
    for (n, age) in [0, 0, 6].into_iter().enumerate() {
        pid = cut_listen_at(&admin, Duration::from_secs(age), pid).await;
        wait_for("the loss logged", Duration::from_secs(5), || {
            std::future::ready(daemon.said("LISTEN connection lost").len() > n)
        })
        .await;
    }
    let lost = daemon.said("LISTEN connection lost");
    let waits: Vec<u64> = lost
        .iter()
        .map(|l| l["retry_in_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(waits, [250, 500, 250], "{lost:?}");
    let error = lost[2]["error"].as_str().unwrap();
    assert!(
        error.starts_with("connection lost: ") && error.contains("57P01"),
        "{error}"
    );
}
