//! What every integration test needs: a fresh database, a daemon on port-0 listeners, signed
//! deliveries, and waiting for a condition with a deadline.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use rand::Rng;
use sume_inbox::config::Config;
use sume_inbox::{run, Listeners};
use sume_wire::{signature_header, Secret};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

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
pub struct TestDb {
    pub url: String,
}

impl TestDb {
    pub async fn new() -> TestDb {
        Self::on_server(&admin_url()).await
    }

    pub async fn on_server(server_url: &str) -> TestDb {
        let name = format!("t_{}", rand::thread_rng().gen::<u64>());
        let admin = connect(server_url).await;
        admin
            .batch_execute(&format!("create database {name}"))
            .await
            .expect("create test database");
        TestDb {
            url: with_dbname(server_url, &name),
        }
    }

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

pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
    tokio::spawn(conn);
    client
}

pub fn config(url: &str) -> Config {
    let mut c = Config::local(url, SECRET);
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
    pub webhook: SocketAddr,
    pub admin: SocketAddr,
    pub shutdown: CancellationToken,
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
    pub async fn start(config: Config) -> Daemon {
        init_logging();
        let webhook_listener = TcpListener::bind(config.listen_addr).await.unwrap();
        let admin_listener = TcpListener::bind(config.admin_addr).await.unwrap();
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
        d.wait_ready().await;
        d
    }

    async fn wait_ready(&self) {
        let url = format!("http://{}/readyz", self.webhook);
        wait_for("daemon ready", Duration::from_secs(30), || async {
            matches!(reqwest::get(&url).await, Ok(r) if r.status() == 200)
        })
        .await;
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.webhook)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin)
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("daemon task").expect("daemon run");
    }
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A delivery as Sume would send it.
pub struct Delivery {
    pub body: String,
    pub event_id: Option<String>,
    pub timestamp: i64,
    pub secret: String,
}

impl Delivery {
    pub fn completed(job_id: &str) -> Delivery {
        Delivery::status(job_id, "completed")
    }

    pub fn status(job_id: &str, status: &str) -> Delivery {
        Delivery {
            body: serde_json::json!({
                "event": format!("job.{status}"),
                "job_id": job_id,
                "status": status,
                "result": {"url": format!("https://cdn.example/{job_id}.mp4")},
            })
            .to_string(),
            event_id: Some(format!("evt_{job_id}_{status}")),
            timestamp: unix_now(),
            secret: SECRET.into(),
        }
    }

    pub async fn send(&self, http: &reqwest::Client, url: &str) -> reqwest::Response {
        self.send_raw(http, url).await.expect("send delivery")
    }

    /// Sends, reporting a transport error instead of panicking.
    pub async fn send_raw(
        &self,
        http: &reqwest::Client,
        url: &str,
    ) -> reqwest::Result<reqwest::Response> {
        let mut req = http
            .post(url)
            .header("content-type", "application/json")
            .header("x-sume-timestamp", self.timestamp.to_string())
            .header(
                "x-sume-signature",
                signature_header(
                    &[Secret::new(self.secret.as_str())],
                    self.timestamp,
                    self.body.as_bytes(),
                ),
            )
            .body(self.body.clone());
        if let Some(id) = &self.event_id {
            req = req.header("x-sume-event-id", id);
        }
        req.send().await
    }
}

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

/// A pool standing for the application's own connections.
pub async fn app_pool(db: &TestDb) -> deadpool_postgres::Pool {
    let store = sume_inbox::db::Store::new(&db.url, 16).unwrap();
    store
        .pool()
        .get()
        .await
        .unwrap()
        .batch_execute(
            "create table if not exists public.orders (
                 order_id text primary key, job_id text not null, charged boolean not null)",
        )
        .await
        .unwrap();
    store.pool().clone()
}

/// The application's submit path: its order row and the job row commit in one transaction,
/// after some slow work inside it.
pub async fn app_commit_job(
    pool: &deadpool_postgres::Pool,
    job_id: &str,
    order_id: &str,
    slow: Duration,
) {
    let mut client = pool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    tx.execute(
        "insert into public.orders (order_id, job_id, charged) values ($1, $2, false)",
        &[&order_id, &job_id],
    )
    .await
    .unwrap();
    tx.execute(
        "insert into sume.jobs (job_id, order_id, api_key) values ($1, $2, 'default')
         on conflict do nothing",
        &[&job_id, &order_id],
    )
    .await
    .unwrap();
    tokio::time::sleep(slow).await; // "charge the card"
    tx.execute(
        "update public.orders set charged = true where order_id = $1",
        &[&order_id],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

/// Registers through the admin API.
pub async fn api_register(
    http: &reqwest::Client,
    daemon: &Daemon,
    job_id: &str,
    order_id: &str,
) -> reqwest::Response {
    http.post(daemon.admin_url("/v1/jobs"))
        .json(&serde_json::json!({"job_id": job_id, "order_id": order_id}))
        .send()
        .await
        .expect("register")
}

pub async fn job_state(db: &TestDb, job_id: &str) -> Option<String> {
    db.client()
        .await
        .query_opt("select state from sume.jobs where job_id = $1", &[&job_id])
        .await
        .unwrap()
        .map(|r| r.get(0))
}

/// A PostgreSQL cluster of a test's own (scripts/devpg), so it can be stopped or configured.
pub struct PrivateCluster {
    dir: PathBuf,
    pub url: String,
}

/// Runs scripts/devpg; answers what it printed.
pub fn devpg(args: &[&str], env: &[(&str, &str)]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/devpg");
    let out = Command::new(script)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run scripts/devpg");
    assert!(
        out.status.success(),
        "devpg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

impl PrivateCluster {
    pub fn start(name: &str) -> PrivateCluster {
        Self::start_with(name, &[])
    }

    /// With environment for scripts/devpg, e.g. `DEVPG_SSL=only`.
    pub fn start_with(name: &str, env: &[(&str, &str)]) -> PrivateCluster {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{name}-{}", std::process::id()));
        let d = dir.to_str().unwrap();
        devpg(&["destroy", d], &[]);
        let url = devpg(&["start", d], env);
        PrivateCluster { dir, url }
    }

    pub fn dir(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    /// Stops it at once, as in a crash.
    pub fn kill(&self) {
        devpg(&["kill", self.dir()], &[]);
    }

    /// Starts it again on the same port.
    pub fn restart(&self) {
        devpg(&["start", self.dir()], &[]);
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/devpg"))
            .args(["destroy", self.dir()])
            .output();
    }
}
