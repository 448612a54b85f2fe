//! The database going away under load: 503 with Retry-After while it is down, 204 again once
//! it is back, and nothing that was answered 2xx is lost.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;

/// A PostgreSQL cluster of this test's own (scripts/devpg), so it can be stopped.
struct PrivateCluster {
    dir: PathBuf,
    url: String,
}

fn devpg(args: &[&str]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/devpg");
    let out = Command::new(script)
        .args(args)
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
    fn start(name: &str) -> PrivateCluster {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{name}-{}", std::process::id()));
        let d = dir.to_str().unwrap();
        devpg(&["destroy", d]);
        let url = devpg(&["start", d]);
        PrivateCluster { dir, url }
    }

    fn kill(&self) {
        devpg(&["kill", self.dir.to_str().unwrap()]);
    }

    fn restart(&self) {
        devpg(&["start", self.dir.to_str().unwrap()]);
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/devpg"))
            .args(["destroy", self.dir.to_str().unwrap()])
            .output();
    }
}

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
    let readyz = http.get(daemon.url("/readyz")).send().await.unwrap();
    assert_eq!(readyz.status(), 503, "not ready without a database");

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
    let stored: std::collections::HashSet<String> = db
        .client()
        .await
        .query("select job_id from sume.events", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let acked: Vec<&String> = answers
        .iter()
        .filter(|a| a.1 == 204)
        .map(|a| &a.0)
        .collect();
    let lost: Vec<&&String> = acked.iter().filter(|j| !stored.contains(**j)).collect();
    assert!(lost.is_empty(), "answered 204 but not stored: {lost:?}");
    daemon.stop().await;
}
