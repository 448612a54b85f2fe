//! The database going away under load: 503 with Retry-After while it is down, 204 again once
//! it is back, and nothing that was answered 2xx is lost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;

/// The job a delivery was for, the status it was answered, and its Retry-After.
type Answer = (String, u16, Option<String>);

#[tokio::test(flavor = "multi_thread")]
async fn database_stopped_mid_run() {
    let cluster = PrivateCluster::start("outage");
    let db = TestDb::on_server(&cluster.url).await;
    let daemon = Daemon::start(config(&db.url)).await;
    let url = daemon.url("/webhooks/sume");
    let http = reqwest::Client::new();

    // A steady stream of distinct events, recording every answer.
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let sender = {
        let (answers, stop, http, url) = (answers.clone(), stop.clone(), http.clone(), url.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.is_cancelled() {
                let job = format!("job_{i:05}");
                let r = Delivery::completed(&job).send(&http, &url).await;
                let retry_after = r
                    .headers()
                    .get("retry-after")
                    .map(|v| v.to_str().unwrap().to_owned());
                answers
                    .lock()
                    .unwrap()
                    .push((job, r.status().as_u16(), retry_after));
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let count = |status: u16| {
        answers
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.1 == status)
            .count()
    };
    wait_for(
        "some 204s before the outage",
        Duration::from_secs(20),
        || async { count(204) >= 20 },
    )
    .await;

    cluster.kill();
    wait_for(
        "503s while the database is down",
        Duration::from_secs(30),
        || async { count(503) >= 5 },
    )
    .await;
    // Readiness is cached for a second, so it may take that long to say so.
    wait_for(
        "not ready without a database",
        Duration::from_secs(10),
        || async {
            let r = http.get(daemon.url("/readyz")).send().await.unwrap();
            r.status() == 503
        },
    )
    .await;

    cluster.restart();
    let before = count(204);
    wait_for(
        "204s again after the database returns",
        Duration::from_secs(30),
        || async { count(204) >= before + 20 },
    )
    .await;
    stop.cancel();
    sender.await.unwrap();

    let answers = answers.lock().unwrap().clone();
    for (_, status, retry_after) in &answers {
        assert!(
            *status == 204 || *status == 503,
            "only 204 or 503 expected, got {status}"
        );
        if *status == 503 {
            assert!(retry_after.is_some(), "a 503 carries Retry-After");
        }
    }
    let stored = db.event_job_ids().await;
    let acked: Vec<&String> = answers
        .iter()
        .filter(|a| a.1 == 204)
        .map(|a| &a.0)
        .collect();
    let lost: Vec<&&String> = acked.iter().filter(|j| !stored.contains(**j)).collect();
    assert!(lost.is_empty(), "answered 204 but not stored: {lost:?}");
    daemon.stop().await;
}
