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

/// Every series an alert (or README's advice on alerting) reads with `increase()` or `rate()`,
/// for a daemon with two webhook secrets and the API keys `main` and `other`. Each must be in
/// `/metrics` at 0 before anything happened: a series made at its first count appears at 1,
/// and `increase()` reads no increase from a series' first sample.
fn series_counted_from_zero() -> Vec<String> {
    let mut want: Vec<String> = [
        "stored",
        "duplicate",
        "dead_lettered",
        "id_reused",
        "unauthorized",
        "too_large",
        "malformed",
        "unavailable",
        "misrouted",
        "aborted",
    ]
    .iter()
    .map(|o| format!(r#"sume_inbox_webhooks_total{{outcome="{o}"}}"#))
    .collect();
    for secret in ["0", "1"] {
        want.push(format!(
            r#"sume_inbox_webhooks_verified_by_secret_total{{secret="{secret}"}}"#
        ));
    }
    for source in ["webhook", "status_read", "list"] {
        want.push(format!(
            r#"sume_inbox_unknown_statuses_total{{source="{source}"}}"#
        ));
    }
    for key in ["main", "other"] {
        for code in ["402", "403"] {
            want.push(format!(
                r#"sume_inbox_sume_refused_total{{key="{key}",code="{code}"}}"#
            ));
        }
        for code in ["402", "403", "429"] {
            want.push(format!(
                r#"sume_inbox_sume_requests_total{{key="{key}",code="{code}"}}"#
            ));
        }
    }
    for by in ["webhook", "poll", "give_up"] {
        want.push(format!(r#"sume_inbox_jobs_closed_total{{by="{by}"}}"#));
    }
    for outcome in ["superseded", "stands", "again"] {
        want.push(format!(
            r#"sume_inbox_give_up_rechecks_total{{outcome="{outcome}"}}"#
        ));
    }
    for port in ["port", "admin_port"] {
        for by in ["client", "time", "bytes", "shed"] {
            want.push(format!(r#"sume_inbox_{port}_lingers_total{{by="{by}"}}"#));
        }
        want.push(format!("sume_inbox_{port}_lingering_connections"));
    }
    want.push("sume_inbox_orphan_events_expired_total".into());
    want
}

#[tokio::test(flavor = "multi_thread")]
async fn every_series_an_alert_reads_is_at_0_before_anything_happened() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.webhook_secrets
        .push(sume_wire::Secret::new("whsec_retired_one"));
    c.api_keys = ["main", "other"]
        .map(|name| sume_inbox::config::ApiKey {
            name: name.into(),
            key: sume_wire::Secret::new(format!("sk_{name}")),
        })
        .into();
    let started = unix_now() as f64;
    let daemon = Daemon::start(c).await;
    let r = reqwest::get(daemon.admin_url("/metrics")).await.unwrap();
    let text = r.text().await.unwrap();
    for series in series_counted_from_zero() {
        assert_eq!(sample(&text, &series), Some(0.0), "{series} in:\n{text}");
    }
    // Counted from the start too, though what they count may have moved by now.
    for series in [
        r#"sume_inbox_sume_reads_total{way="job"}"#,
        r#"sume_inbox_sume_reads_total{way="list"}"#,
        r#"sume_inbox_port_timeouts_total{kind="header"}"#,
        r#"sume_inbox_port_timeouts_total{kind="body"}"#,
        r#"sume_inbox_port_timeouts_total{kind="idle"}"#,
        r#"sume_inbox_port_timeouts_total{kind="write"}"#,
        r#"sume_inbox_admin_port_timeouts_total{kind="header"}"#,
        r#"sume_inbox_admin_port_timeouts_total{kind="idle"}"#,
    ] {
        assert!(sample(&text, series).is_some(), "{series} in:\n{text}");
    }
    // The rules take an instance younger than their window at its word: all it counted is
    // within the window, the counts made before its first scrape too.
    let start = sample(&text, "sume_inbox_start_time_seconds").expect("start time");
    assert!(
        (started - 5.0..=unix_now() as f64 + 1.0).contains(&start),
        "start time {start}, test started at {started}"
    );
    daemon.stop().await;
}
