//! `GET /v1/jobs/{id}?wait=`: answered as soon as the job closes, whichever instance closed
//! it, with LISTEN or by polling; bounded; the open job when the wait runs out.

use std::time::Duration;

use serde_json::Value;
use sume_inbox::config::Wakeup;

use crate::support::*;

/// This instance's waiters, from its `/metrics`.
pub(super) async fn waiters(daemon: &Daemon) -> i64 {
    let text = reqwest::get(daemon.admin_url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("sume_inbox_admin_waiters "))
        .expect("sume_inbox_admin_waiters")
        .trim()
        .parse()
        .unwrap()
}

pub(super) async fn register(db: &TestDb, job_id: &str) {
    db.client()
        .await
        .execute(
            "insert into sume.jobs (job_id, order_id) values ($1, 'order-1')",
            &[&job_id],
        )
        .await
        .unwrap();
}

/// Starts a wait on `daemon` and returns once the daemon counts it among its waiters.
pub(super) async fn start_wait(
    daemon: &Daemon,
    job_id: &str,
    wait: &str,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let before = waiters(daemon).await;
    let url = daemon.admin_url(&format!("/v1/jobs/{job_id}?wait={wait}"));
    let request = tokio::spawn(async move { reqwest::get(url).await.unwrap() });
    wait_for("the request waits", Duration::from_secs(10), || async {
        waiters(daemon).await > before
    })
    .await;
    request
}

pub(super) async fn outcome(response: reqwest::Response) -> (u16, String, Value) {
    let status = response.status().as_u16();
    let how = response
        .headers()
        .get("x-wait-outcome")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, how, response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_is_woken_by_a_close_made_on_another_instance() {
    let db = TestDb::new().await;
    // A never scans for waiting events, so the close is B's alone.
    let mut only_waits = config(&db.url);
    only_waits.attach.scan_interval = Duration::from_secs(3600);
    let a = Daemon::start(only_waits).await;
    let b = Daemon::start(config(&db.url)).await;
    register(&db, "job_waited").await;
    let request = start_wait(&a, "job_waited", "60s").await;
    Delivery::completed("job_waited")
        .send(&reqwest::Client::new(), &b.url("/webhooks/sume"))
        .await;
    let (status, how, job) = outcome(request.await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(
        how, "closed",
        "woken by the close, not by the end of the wait"
    );
    assert_eq!(job["state"], "completed");
    assert_eq!(waiters(&a).await, 0, "the place is given back");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn polling_wakes_waiters_where_notifications_are_unavailable() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.wait.wakeup = Wakeup::Poll;
    c.wait.poll_interval = Duration::from_millis(100);
    let polled = Daemon::start(c).await;
    let other = Daemon::start(config(&db.url)).await;
    register(&db, "job_polled").await;
    let request = start_wait(&polled, "job_polled", "60s").await;
    Delivery::completed("job_polled")
        .send(&reqwest::Client::new(), &other.url("/webhooks/sume"))
        .await;
    let (status, how, job) = outcome(request.await.unwrap()).await;
    assert_eq!((status, how.as_str()), (200, "closed"));
    assert_eq!(job["state"], "completed");
    polled.stop().await;
    other.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn waiters_are_bounded_and_a_wait_that_runs_out_answers_the_open_job() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.wait.max_waiters = 1;
    let daemon = Daemon::start(c).await;
    register(&db, "job_slow").await;
    register(&db, "job_never").await;
    let first = start_wait(&daemon, "job_slow", "60s").await;
    let refused = reqwest::get(daemon.admin_url("/v1/jobs/job_never?wait=5s"))
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_waiters");
    // Without wait, a read is never refused.
    let plain = reqwest::get(daemon.admin_url("/v1/jobs/job_never"))
        .await
        .unwrap();
    assert_eq!(plain.status(), 200);
    Delivery::completed("job_slow")
        .send(&reqwest::Client::new(), &daemon.url("/webhooks/sume"))
        .await;
    let (status, how, job) = outcome(first.await.unwrap()).await;
    assert_eq!((status, how.as_str()), (200, "closed"));
    assert_eq!(job["state"], "completed");
    // The place is free again; a wait that runs out answers the job as it is.
    let (status, how, job) = outcome(
        reqwest::get(daemon.admin_url("/v1/jobs/job_never?wait=200ms"))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, how.as_str()), (200, "timeout"));
    assert_eq!(job["state"], "open");
    // A wait of zero waits for nothing and still says how it ended.
    for (job_id, ended) in [("job_never", "timeout"), ("job_slow", "closed")] {
        let url = daemon.admin_url(&format!("/v1/jobs/{job_id}?wait=0s"));
        let (status, how, _) = outcome(reqwest::get(url).await.unwrap()).await;
        assert_eq!((status, how.as_str()), (200, ended), "{job_id}");
    }
    for (path, code) in [
        ("/v1/jobs/job_none?wait=1s", 404),
        ("/v1/jobs/job_never?wait=forever", 400),
        ("/v1/jobs/job_never?hold=1s", 400),
    ] {
        let r = reqwest::get(daemon.admin_url(path)).await.unwrap();
        assert_eq!(r.status(), code, "{path}");
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_every_waiter_place_taken_an_unknown_job_is_404_and_a_closed_one_answered() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.wait.max_waiters = 1;
    let daemon = Daemon::start(c).await;
    register(&db, "job_slow").await;
    register(&db, "job_done").await;
    Delivery::completed("job_done")
        .send(&reqwest::Client::new(), &daemon.url("/webhooks/sume"))
        .await;
    // The delivery is applied once stored: the job closed before it is asked about.
    let client = db.client().await;
    wait_for("job_done closed", Duration::from_secs(10), || async {
        let row = client
            .query_one("select state from sume.jobs where job_id = 'job_done'", &[])
            .await
            .unwrap();
        row.get::<_, String>(0) == "completed"
    })
    .await;
    let first = start_wait(&daemon, "job_slow", "60s").await;
    // The place was once reserved before the job was read: 503 `too_many_waiters` for a job
    // that does not exist, or one that needs no wait.
    let unknown = reqwest::get(daemon.admin_url("/v1/jobs/job_nobody?wait=3s"))
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_found");
    let url = daemon.admin_url("/v1/jobs/job_done?wait=3s");
    let (status, how, job) = outcome(reqwest::get(url).await.unwrap()).await;
    assert_eq!((status, how.as_str()), (200, "closed"));
    assert_eq!(job["state"], "completed");
    first.abort();
    daemon.stop().await;
}

/// A wait longer than MAX_WAIT was refused 400, though the document allows any wait of its
/// form and a client cannot know an instance's MAX_WAIT: it waits MAX_WAIT, and the open job is
/// answered `timeout`, which the client handles by asking again.
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_longer_than_max_wait_waits_max_wait() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.wait.max_wait = Duration::from_millis(300);
    c.wait.poll_interval = Duration::from_millis(100);
    let daemon = Daemon::start(c).await;
    register(&db, "job_never").await;
    for wait in ["10m", "999999999h"] {
        let url = daemon.admin_url(&format!("/v1/jobs/job_never?wait={wait}"));
        let answer = tokio::time::timeout(Duration::from_secs(30), reqwest::get(url))
            .await
            .unwrap_or_else(|_| panic!("wait={wait} was not cut to MAX_WAIT"))
            .unwrap();
        let (status, how, job) = outcome(answer).await;
        assert_eq!((status, how.as_str()), (200, "timeout"), "{wait}");
        assert_eq!(job["state"], "open");
    }
    daemon.stop().await;
}
