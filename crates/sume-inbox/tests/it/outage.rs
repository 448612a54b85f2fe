//! The database going away under load: 503 with Retry-After while it is down, 204 again once
//! it is back, and nothing that was answered 2xx is lost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// The job a delivery was for, the status it was answered, and its Retry-After.
type Answer = (String, u16, Option<String>);

#[tokio::test(flavor = "multi_thread")]
async fn database_stopped_mid_run() {
    let cluster = PrivateCluster::start("outage");
    let db = TestDb::on_server(&cluster.url).await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let stream = Stream::start(&http, &daemon.url("/webhooks/sume"));
    wait_for(
        "some 204s before the outage",
        Duration::from_secs(20),
        || async { stream.count(204) >= 20 },
    )
    .await;

    cluster.kill();
    wait_for(
        "503s while the database is down",
        Duration::from_secs(30),
        || async { stream.count(503) >= 5 },
    )
    .await;
    // Readiness is cached for a second, so it may take that long to say so, with the
    // network's reason (before: "database unreachable", no more).
    wait_for(
        "not ready without a database, saying why",
        Duration::from_secs(10),
        || async {
            let r = http.get(daemon.url("/readyz")).send().await.unwrap();
            let status = r.status();
            let said = r.text().await.unwrap();
            status == 503
                && said.starts_with("database unreachable: ")
                && !said.contains("no database connection")
                && said.contains("Connection refused")
        },
    )
    .await;

    cluster.restart();
    let before = stream.count(204);
    wait_for(
        "204s again after the database returns",
        Duration::from_secs(30),
        || async { stream.count(204) >= before + 20 },
    )
    .await;
    let answers = stream.stop().await;
    assert_only_204_or_503_with_retry_after(&answers);
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

/// A steady stream of distinct events, recording every answer.
struct Stream {
    answers: Arc<Mutex<Vec<Answer>>>,
    stop: CancellationToken,
    sender: JoinHandle<()>,
}

impl Stream {
    fn start(http: &reqwest::Client, url: &str) -> Stream {
        let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
        let stop = CancellationToken::new();
        let sender = {
            let (answers, stop, http, url) =
                (answers.clone(), stop.clone(), http.clone(), url.to_owned());
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
        Stream {
            answers,
            stop,
            sender,
        }
    }

    /// How many deliveries so far were answered `status`.
    fn count(&self, status: u16) -> usize {
        self.answers
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.1 == status)
            .count()
    }

    /// Stops sending; answers every answer recorded.
    async fn stop(self) -> Vec<Answer> {
        self.stop.cancel();
        self.sender.await.unwrap();
        let answers = self.answers.lock().unwrap().clone();
        answers
    }
}

fn assert_only_204_or_503_with_retry_after(answers: &[Answer]) {
    for (_, status, retry_after) in answers {
        assert!(
            *status == 204 || *status == 503,
            "only 204 or 503 expected, got {status}"
        );
        if *status == 503 {
            assert!(retry_after.is_some(), "a 503 carries Retry-After");
        }
    }
}
