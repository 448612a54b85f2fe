//! `GET /metrics` on the admin address counts what happened, by outcome.

use std::time::Duration;

use crate::support::*;

/// The value of the first sample line starting with `series` (name and labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_outcomes_and_read_the_inbox() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let closed = Delivery::completed("job_m1");
    assert_eq!(closed.send(&http, &url).await.status(), 204);
    assert_eq!(closed.send(&http, &url).await.status(), 204);
    assert_eq!(
        Delivery::completed("job_waiting")
            .send(&http, &url)
            .await
            .status(),
        204
    );
    let mut forged = Delivery::completed("job_x");
    forged.secret = "nope".into();
    assert_eq!(forged.send(&http, &url).await.status(), 401);
    let mut big = Delivery::completed("job_big");
    big.body = "x".repeat(70 * 1024);
    big.send_too_large(&http, &url).await;
    let mut garbage = Delivery::completed("x");
    garbage.body = "not json".into();
    assert_eq!(garbage.send(&http, &url).await.status(), 204);
    // The last verified delivery was signed 40 s before this instance's clock.
    let mut late = Delivery::completed("job_signed_late");
    late.timestamp = unix_now() - 40;
    late.body = "still not json".into();
    assert_eq!(late.send(&http, &url).await.status(), 204);
    assert_eq!(
        api_register(&http, &daemon, "job_m1", "o1").await.status(),
        201
    );
    wait_for("job_m1 closed", Duration::from_secs(10), || async {
        job_state(&db, "job_m1").await.as_deref() == Some("completed")
    })
    .await;

    let r = http.get(daemon.admin_url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let text = r.text().await.unwrap();
    let want = [
        (r#"sume_inbox_webhooks_total{outcome="stored"}"#, 2.0),
        (r#"sume_inbox_webhooks_total{outcome="duplicate"}"#, 1.0),
        (r#"sume_inbox_webhooks_total{outcome="unauthorized"}"#, 1.0),
        (r#"sume_inbox_webhooks_total{outcome="too_large"}"#, 1.0),
        (r#"sume_inbox_webhooks_total{outcome="dead_lettered"}"#, 2.0),
        (
            r#"sume_inbox_webhooks_verified_by_secret_total{secret="0"}"#,
            5.0,
        ),
        (r#"sume_inbox_jobs_closed_total{by="webhook"}"#, 1.0),
        ("sume_inbox_inbox_waiting_events", 1.0),
        ("sume_inbox_dead_letters", 2.0),
        ("sume_inbox_open_jobs", 0.0),
        ("sume_inbox_db_up", 1.0),
        ("sume_inbox_tasks_dead", 0.0),
        ("sume_inbox_attach_latency_seconds_count", 1.0),
    ];
    for (series, value) in want {
        assert_eq!(sample(&text, series), Some(value), "{series} in:\n{text}");
    }
    assert!(sample(&text, "sume_inbox_ingest_batch_size_count").unwrap() >= 1.0);
    assert!(sample(&text, "sume_inbox_inbox_oldest_age_seconds").unwrap() >= 0.0);
    assert!(text.contains("sume_inbox_db_pool_in_use"));
    let skew = sample(&text, "sume_inbox_webhook_clock_skew_seconds").unwrap();
    assert!((40.0..45.0).contains(&skew), "clock skew {skew}");
    assert!(!text.contains(SECRET), "no secret in metrics");
    assert!(
        text.trim_end().ends_with("# EOF"),
        "OpenMetrics, as the content type says"
    );
    daemon.stop().await;
}
