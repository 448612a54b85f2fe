//! What sume-inbox's integration tests need beyond [`sume_testkit`] (re-exported here): signed
//! deliveries, the application's submit path written out, and PostgreSQL clusters of a test's
//! own.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use sume_wire::{signature_header, Secret};

pub use sume_testkit::*;

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

    /// Sends a delivery whose body is over MAX_BODY_BYTES: the daemon answers 413 from its
    /// `Content-Length` without reading the body, and reads what still comes before it closes
    /// the connection, so the client reads the 413.
    pub async fn send_too_large(&self, http: &reqwest::Client, url: &str) {
        let r = self.send_raw(http, url).await.expect("the 413 is read");
        assert_eq!(r.status(), 413);
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

/// Serves `app` on a free loopback port for the rest of the test, as what answers at
/// SUME_API_URL (a front in Sume's place, or Sume answering oddly); answers that base URL,
/// `http://127.0.0.1:PORT/v1`.
pub async fn stand_in_api(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}

/// A loopback port free now, for a daemon binary to bind.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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

/// A dead letter that a newer reader understands: a signed body naming `job_id`, stored by a
/// reader that found no job id in it.
pub async fn readable_dead_letter(db: &TestDb, id: &str, job_id: &str) {
    let ts = unix_now();
    let body =
        serde_json::json!({"event": "job.completed", "job_id": job_id, "status": "completed"})
            .to_string();
    let sig = signature_header(&[Secret::new(SECRET)], ts, body.as_bytes());
    db.client()
        .await
        .execute(
            "insert into sume.dead_letters (dead_letter_id, reason, body, header_event_id, signed_at, signature)
             values ($1, 'no job id (older reader)', $2, $3, $4, $5)",
            &[&id, &body.as_bytes(), &format!("evt_{id}"), &ts, &sig],
        )
        .await
        .unwrap();
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
