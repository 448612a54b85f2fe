//! A rolling upgrade, as README promises it: the previous release's binary (`scripts/prev-release`
//! builds it once) serves a database, this binary's daemon starts beside it and migrates the
//! schema to its own version while the old one runs, both take deliveries and close jobs on the
//! newest schema, then the old one stops and the new one finishes what it left. The test runs
//! against whatever the current schema is, so it covers every migration added since.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// The previous release's `sume-inbox`, built on first use; `None` in a shallow clone, which
/// lacks the revision (the script says so).
fn previous_binary() -> Option<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/prev-release");
    let out = Command::new(script)
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/prev-release");
    if out.status.code() == Some(3) {
        return None;
    }
    assert!(out.status.success(), "scripts/prev-release failed");
    Some(String::from_utf8(out.stdout).unwrap().trim().to_owned())
}

/// A free loopback address (bound, then released for the child to bind).
fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// The previous release's daemon, as a process of its own; killed if still running when dropped.
struct OldDaemon {
    child: Child,
    webhook: std::net::SocketAddr,
    admin: std::net::SocketAddr,
}

impl OldDaemon {
    async fn start(binary: &str, db: &TestDb) -> OldDaemon {
        let (webhook, admin) = (free_addr(), free_addr());
        let child = Command::new(binary)
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DATABASE_URL", &db.url)
            .env("SUME_WEBHOOK_SECRET", SECRET)
            .env("LISTEN_ADDR", webhook.to_string())
            .env("ADMIN_ADDR", admin.to_string())
            .env("ATTACH_SCAN_INTERVAL", "300ms")
            .env("LOG_FORMAT", "json")
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the previous release");
        let old = OldDaemon {
            child,
            webhook,
            admin,
        };
        old.wait_ready().await;
        old
    }

    async fn wait_ready(&self) {
        let url = format!("http://{}/readyz", self.webhook);
        wait_for(
            "the previous release ready",
            Duration::from_secs(60),
            || async { matches!(reqwest::get(&url).await, Ok(r) if r.status() == 200) },
        )
        .await;
    }

    /// SIGTERM, then its exit status, which must be a success.
    fn stop(mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: a signal to the child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the previous release exited {status}");
    }
}

impl Drop for OldDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where deliveries and registrations go: the old process or the new in-process daemon.
#[derive(Clone, Copy)]
enum Via {
    Old,
    New,
}

/// The (webhook, admin) URLs of each instance while it runs.
struct Fleet {
    old: Option<(String, String)>,
    new: Option<(String, String)>,
    http: reqwest::Client,
    app: deadpool_postgres::Pool,
}

impl Fleet {
    fn urls(&self, via: Via) -> &(String, String) {
        match via {
            Via::Old => self.old.as_ref().expect("the old release runs"),
            Via::New => self.new.as_ref().expect("this release runs"),
        }
    }

    fn webhook_url(&self, via: Via) -> String {
        self.urls(via).0.clone()
    }

    fn admin_url(&self, via: Via) -> String {
        self.urls(via).1.clone()
    }

    async fn deliver(&self, job_id: &str, status: &str, via: Via) {
        let r = Delivery::status(job_id, status)
            .send(&self.http, &self.webhook_url(via))
            .await;
        assert_eq!(r.status(), 204, "delivery of {job_id}");
    }

    /// Through an admin API, or (`None`) in the application's own transaction.
    async fn register(&self, job_id: &str, via: Option<Via>) {
        match via {
            Some(via) => {
                let r = self
                    .http
                    .post(self.admin_url(via))
                    .json(&serde_json::json!({"job_id": job_id, "order_id": job_id}))
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success(), "register {job_id}: {}", r.status());
            }
            None => app_commit_job(&self.app, job_id, job_id, Duration::ZERO).await,
        }
    }
}

fn status_of(job_id: &str) -> &'static str {
    if job_id.ends_with('3') {
        "failed"
    } else {
        "completed"
    }
}

async fn wait_closed(db: &TestDb, jobs: &[String]) {
    for job in jobs {
        wait_for(
            &format!("{job} closed"),
            Duration::from_secs(60),
            || async { job_state(db, job).await.as_deref() == Some(status_of(job)) },
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_previous_release_and_this_one_share_the_newest_schema() {
    let Some(binary) = previous_binary() else {
        eprintln!("NOT RUN: a shallow clone lacks the previous release (see scripts/prev-release)");
        return;
    };
    let db = TestDb::new().await;
    let app = app_pool(&db).await;
    let old = OldDaemon::start(&binary, &db).await;
    let old_schema = db
        .scalar("select max(version)::bigint from sume.schema_migrations")
        .await;
    let mut fleet = Fleet {
        old: Some((
            format!("http://{}/webhooks/sume", old.webhook),
            format!("http://{}/v1/jobs", old.admin),
        )),
        new: None,
        http: reqwest::Client::new(),
        app,
    };
    let alone = the_old_release_alone_closes_jobs(&fleet, &db).await;

    // This release starts beside it and migrates to its own schema while the old one serves.
    let new = Daemon::start(config(&db.url)).await;
    assert_eq!(
        db.scalar("select max(version)::bigint from sume.schema_migrations")
            .await,
        i64::from(sume_inbox::db::migrate::latest())
    );
    assert!(i64::from(sume_inbox::db::migrate::latest()) >= old_schema);
    fleet.new = Some((new.url("/webhooks/sume"), new.admin_url("/v1/jobs")));
    old.wait_ready().await; // still ready on a newer schema

    let (both, left_open) = both_releases_close_jobs_together(&fleet, &db).await;

    // The old one stops cleanly; the new one closes what it left open.
    fleet.old = None;
    old.stop();
    for job in &left_open {
        fleet.deliver(job, status_of(job), Via::New).await;
    }
    wait_closed(&db, &left_open).await;
    assert_nothing_open_and_each_event_stored_once(&db, alone.len() + both.len()).await;
    new.stop().await;
}

fn ids(phase: &str) -> Vec<String> {
    (0..12).map(|i| format!("job_{phase}_{i}")).collect()
}

/// The old release alone: early events, then registrations (admin API, the app's own
/// transaction), then the late ones; answers the jobs, once closed.
async fn the_old_release_alone_closes_jobs(fleet: &Fleet, db: &TestDb) -> Vec<String> {
    let alone = ids("old");
    for (i, job) in alone.iter().enumerate() {
        if i % 2 == 0 {
            fleet.deliver(job, status_of(job), Via::Old).await;
        }
        fleet.register(job, (i % 3 == 0).then_some(Via::Old)).await;
        if i % 2 == 1 {
            fleet.deliver(job, status_of(job), Via::Old).await;
        }
    }
    wait_closed(db, &alone).await;
    alone
}

/// Both: each job's events go to one instance and its registration to the other, early or
/// late; some registered by the application; duplicates at both. Jobs left open for the last
/// phase are registered through the old one and delivered after it has stopped. Answers every
/// job of the phase and those left open, once the others are closed.
async fn both_releases_close_jobs_together(
    fleet: &Fleet,
    db: &TestDb,
) -> (Vec<String>, Vec<String>) {
    let both = ids("both");
    let mut left_open = Vec::new();
    for (i, job) in both.iter().enumerate() {
        let (events, registry) = if i % 2 == 0 {
            (Via::Old, Via::New)
        } else {
            (Via::New, Via::Old)
        };
        if i % 4 == 3 {
            fleet.register(job, Some(Via::Old)).await;
            left_open.push(job.clone());
            continue;
        }
        if i % 3 == 0 {
            fleet.deliver(job, status_of(job), events).await;
        }
        fleet.register(job, (i % 5 != 4).then_some(registry)).await;
        fleet.deliver(job, status_of(job), events).await;
        fleet.deliver(job, status_of(job), registry).await;
    }
    let closed_by_both: Vec<String> = both
        .iter()
        .filter(|j| !left_open.contains(j))
        .cloned()
        .collect();
    wait_closed(db, &closed_by_both).await;
    (both, left_open)
}

async fn assert_nothing_open_and_each_event_stored_once(db: &TestDb, jobs: usize) {
    assert_eq!(
        db.scalar("select count(*) from sume.jobs where state = 'open'")
            .await,
        0
    );
    assert_eq!(
        db.scalar("select count(*) from sume.events where applied_at is null")
            .await,
        0
    );
    assert_eq!(
        db.scalar("select count(*) from sume.events").await,
        jobs as i64,
        "each event stored once, whichever release received it"
    );
}
