//! What the integration tests of sume-inbox and sume-dev share: a fresh database on the
//! PostgreSQL that `make test` started, a daemon in the test's process on port-0 listeners,
//! waiting for a condition with a deadline, and the outside tools that read the OpenAPI
//! document ([`openapi_tools`]). Each crate's `tests/it/support.rs` re-exports this and adds
//! what only its own tests need.

#![warn(missing_docs)]

mod tools;
pub use tools::openapi_tools;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use rand::Rng;
use sume_inbox::config::{Config, DatabaseRoutes, Pooler};
use sume_inbox::{run, Listeners};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The webhook secret of [`config`].
pub const SECRET: &str = "whsec_test_secret";

/// The server that `make test` started (or the one DATABASE_URL names).
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .expect("DATABASE_URL is not set: run the tests with `make test`, which starts PostgreSQL")
}

/// Replaces the database name in a URL.
pub fn with_dbname(url: &str, name: &str) -> String {
    let base = match url.rfind('/') {
        Some(i) if url[..i].contains("://") && i > url.find("://").unwrap() + 2 => &url[..i],
        _ => url,
    };
    let query = url.find('?').map(|i| &url[i..]).unwrap_or("");
    format!("{base}/{name}{query}")
}

/// A database of its own for one test.
///
/// It starts empty: the daemon's [`run`] (see [`Daemon::start`]) applies the migrations. The
/// database is not dropped when the test ends (the server `make test` started is thrown away
/// whole), but for a test that grows it large, which calls [`TestDb::drop_database`] once done.
pub struct TestDb {
    /// Connection URL of the test's database, for [`config`] or a client of the test's own.
    pub url: String,
    /// Its name, and the URL of the server it was created through, for
    /// [`TestDb::drop_database`].
    name: String,
    server_url: String,
}

impl TestDb {
    /// Creates a database with a random name on the server of [`admin_url`].
    pub async fn new() -> TestDb {
        Self::on_server(&admin_url()).await
    }

    /// Creates a database with a random name on another server, such as a PostgreSQL cluster
    /// a test started for itself; `server_url` must allow `create database`.
    pub async fn on_server(server_url: &str) -> TestDb {
        let name = format!("t_{}", rand::thread_rng().gen::<u64>());
        let admin = connect(server_url).await;
        admin
            .batch_execute(&format!("create database {name}"))
            .await
            .expect("create test database");
        TestDb {
            url: with_dbname(server_url, &name),
            name,
            server_url: server_url.to_owned(),
        }
    }

    /// Drops the database, closing whatever connections are still open on it: a test that grew
    /// its tables to millions of rows calls it last, so that the suite's server does not keep
    /// gigabytes for the rest of the run.
    pub async fn drop_database(self) {
        let name = &self.name;
        let admin = connect(&self.server_url).await;
        admin
            .batch_execute(&format!("drop database {name} with (force)"))
            .await
            .unwrap_or_else(|e| panic!("drop test database {name}: {e}"));
    }

    /// A new connection to the test's database (no pool: each call connects again).
    pub async fn client(&self) -> tokio_postgres::Client {
        connect(&self.url).await
    }

    /// The job ids of every stored event.
    pub async fn event_job_ids(&self) -> std::collections::HashSet<String> {
        self.client()
            .await
            .query("select job_id from sume.events", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// One value from a query, e.g. a count.
    pub async fn scalar(&self, sql: &str) -> i64 {
        self.client()
            .await
            .query_one(sql, &[])
            .await
            .expect(sql)
            .get(0)
    }
}

/// Connects without TLS and drives the connection on a spawned task; panics, naming the URL,
/// when the server cannot be reached.
pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
    tokio::spawn(conn);
    client
}

/// The PgBouncer in transaction mode that `make test` starts in front of its server for the
/// suites' second pass (`scripts/devbouncer`), when the tests run through one.
pub fn pooler_url() -> Option<String> {
    std::env::var("SUME_TEST_POOLER_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
}

/// The `user@host:port` part of a URL.
fn authority(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    Some(&rest[..rest.find(['/', '?']).unwrap_or(rest.len())])
}

/// The database of `url` on the server of `server` (a pooler in front of it, say).
pub fn on_server_of(url: &str, server: &str) -> String {
    match (authority(url), authority(server)) {
        (Some(here), Some(there)) => url.replacen(here, there, 1),
        _ => url.to_owned(),
    }
}

/// `url` reached through the pooler of [`pooler_url`], when there is one and `url` is a
/// database of [`admin_url`]'s server (a cluster a test started for itself is reached
/// directly).
pub fn through_pooler(url: &str) -> Option<String> {
    let pooler = pooler_url()?;
    let server = std::env::var("DATABASE_URL").ok()?;
    if authority(url)? != authority(&server)? {
        return None;
    }
    Some(on_server_of(url, &pooler))
}

/// A daemon configuration for tests against the database at `url`: port-0 listeners on
/// loopback, [`SECRET`] as the webhook secret, a small pool and body limit, short timeouts and
/// a fast attach scan. The Sume API URL points at a closed port; a test that needs Sume sets
/// `sume_api_url` to a simulator's. When the suites run through a pooler ([`pooler_url`]),
/// the daemon's pool goes through it with `DB_POOLER=transaction`, its migrations over `url`
/// directly, and it has no LISTEN connection.
pub fn config(url: &str) -> Config {
    let mut c = Config::local(url, SECRET);
    if let Some(pooled) = through_pooler(url) {
        c.database_url = sume_wire::Secret::new(pooled);
        c.database = DatabaseRoutes {
            pooler: Pooler::Transaction,
            migrate_url: Some(sume_wire::Secret::new(url)),
            listen_url: None,
        };
    }
    c.db_pool_size = 8;
    // Nothing listens there: a test that needs Sume points this at the simulator.
    c.sume_api_url = "http://127.0.0.1:9/v1".into();
    c.max_body_bytes = 64 * 1024;
    c.ingest.timeout = Duration::from_secs(3);
    c.attach.scan_interval = Duration::from_millis(300);
    c.shutdown_timeout = Duration::from_secs(5);
    c
}

/// A daemon running in this process.
pub struct Daemon {
    /// Where the webhook listener was bound (the port the OS chose); see [`Daemon::url`].
    pub webhook: SocketAddr,
    /// Where the admin listener was bound; see [`Daemon::admin_url`].
    pub admin: SocketAddr,
    /// Cancel it to start a graceful shutdown; [`Daemon::stop`] does so and waits.
    pub shutdown: CancellationToken,
    /// The task running [`run`]; it ends with the daemon's result.
    pub task: JoinHandle<Result<(), sume_inbox::app::RunError>>,
}

/// Logs to the test's output when RUST_LOG is set (`RUST_LOG=sume_inbox=debug cargo test ...`).
fn init_logging() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

impl Daemon {
    /// Binds both listeners of `config`, runs the daemon on a spawned task and returns once
    /// `/readyz` answers 200 (panics after 30 seconds). Logs go to the test's output when
    /// RUST_LOG is set.
    pub async fn start(config: Config) -> Daemon {
        let d = Daemon::serving(config).await;
        d.wait_ready().await;
        d
    }

    /// As [`Daemon::start`], but returns once it serves (`/healthz` answers 200, and no longer
    /// `starting: ...` as it does while the start waits for the database or migrates), ready
    /// or not.
    pub async fn serving(config: Config) -> Daemon {
        init_logging();
        let webhook_listener = sume_inbox::process::sockets::bind(config.listen_addr).unwrap();
        let admin_listener = sume_inbox::process::sockets::bind(config.admin_addr).unwrap();
        let webhook = webhook_listener.local_addr().unwrap();
        let admin = admin_listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(
            config,
            Listeners {
                webhook: webhook_listener,
                admin: admin_listener,
            },
            shutdown.clone(),
        ));
        let d = Daemon {
            webhook,
            admin,
            shutdown,
            task,
        };
        let url = d.url("/healthz");
        wait_for("daemon serving", START_DEADLINE, || async {
            match reqwest::get(&url).await {
                Ok(r) if r.status() == 200 => {
                    !r.text().await.unwrap_or_default().starts_with("starting: ")
                }
                _ => false,
            }
        })
        .await;
        d
    }

    /// Waits ([`START_DEADLINE`] at most) until `/readyz` on the webhook listener answers 200.
    async fn wait_ready(&self) {
        let url = self.url("/readyz");
        wait_for("daemon ready", START_DEADLINE, || async {
            matches!(reqwest::get(&url).await, Ok(r) if r.status() == 200)
        })
        .await;
    }

    /// The URL of `path` (starting with `/`) on the webhook listener.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.webhook)
    }

    /// The URL of `path` (starting with `/`) on the admin listener.
    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin)
    }

    /// Cancels the daemon and waits for it to end; panics if the task panicked or `run`
    /// returned an error.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("daemon task").expect("daemon run");
    }
}

/// The current time in whole Unix seconds, the unit of Sume's signed timestamps.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// How long a test waits for a daemon (in process or a binary) to serve after it starts:
/// generous, for a debug build migrating a new database while the rest of the suite holds both
/// cores; a daemon that is ready sooner is seen as soon as it is.
pub const START_DEADLINE: Duration = Duration::from_secs(120);

/// Polls `check` until it holds; panics with `what` after `deadline`.
pub async fn wait_for<F, Fut>(what: &str, deadline: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + deadline;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() > end {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
