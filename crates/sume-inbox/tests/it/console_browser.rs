//! The console in a real browser: headless Chromium driven through chromedriver ([`webdriver`]).
//! An operator signs in, reads the overview, finds a job whose webhook came before its row by
//! its order id and reads its timeline, then replays a dead letter and sees it attach. The
//! pages are saved as PNGs under `target/console-screenshots` (`make screenshots` points
//! CONSOLE_SCREENSHOTS at `docs/console`).
//!
//! [`webdriver`]: crate::webdriver

use std::path::PathBuf;
use std::time::Duration;

use sume_wire::{signature_header, Secret};

use crate::console::{Console, OPERATOR};
use crate::support::*;
use crate::webdriver::{Browser, Driver};

fn screenshots() -> PathBuf {
    match std::env::var_os("CONSOLE_SCREENSHOTS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots"),
    }
}

async fn register(console: &Console, job_id: &str, order_id: &str) {
    let r = console
        .http
        .post(console.daemon.admin_url("/v1/jobs"))
        .bearer_auth(OPERATOR)
        .json(&serde_json::json!({"job_id": job_id, "order_id": order_id}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
}

/// A raced job (its webhook stored before its row), one still waiting, and a dead letter that
/// a newer reader understands: signed, naming a registered job.
async fn seed(db: &TestDb, console: &Console) {
    let hook = console.daemon.url("/webhooks/sume");
    assert_eq!(
        Delivery::completed("job_raced")
            .send(&console.http, &hook)
            .await
            .status(),
        204
    );
    register(console, "job_raced", "order-1042").await;
    wait_for("job_raced closed", Duration::from_secs(20), || async {
        job_state(db, "job_raced").await.as_deref() == Some("completed")
    })
    .await;
    let waiting = Delivery::status("job_not_committed_yet", "running");
    assert_eq!(waiting.send(&console.http, &hook).await.status(), 204);
    register(console, "job_from_dead", "order-1043").await;
    let ts = unix_now();
    let body = r#"{"event":"job.completed","job_id":"job_from_dead","status":"completed"}"#;
    let sig = signature_header(&[Secret::new(SECRET)], ts, body.as_bytes());
    db.client()
        .await
        .execute(
            "insert into sume.dead_letters (dead_letter_id, reason, body, header_event_id, signed_at, signature)
             values ('dl_readable', 'no job id (older reader)', $1, 'evt_from_dead', $2, $3)",
            &[&body.as_bytes(), &ts, &sig],
        )
        .await
        .unwrap();
}

/// This instance's first heartbeat, and a second instance's last hour as its rows would be
/// (an afternoon's traffic with a burst of forged deliveries), for the overview's picture.
async fn seed_fleet(db: &TestDb) {
    crate::fleet::first_heartbeat(db).await;
    db.client()
        .await
        .batch_execute(
            "insert into sume.instances (instance, hostname, pid, version, started_at, last_seen, tasks)
             values ('web-2-4242-00ff00ff00ff00ff', 'web-2', 4242, '0.1.0', now() - interval '3 hours',
                     now() - interval '20 seconds',
                     '{\"attach\": \"running\", \"fleet\": \"running\", \"ingest-0\": \"running\"}');
             insert into sume.instance_minutes (minute, instance, stored, duplicates, unauthorized,
                                                unavailable, closed_by_webhook, closed_by_poll, given_up)
             select date_trunc('minute', now()) - make_interval(mins => m), 'web-2-4242-00ff00ff00ff00ff',
                    (30 + 12 * sin(m / 7.0))::int, (2 + 2 * sin(m / 3.0))::int,
                    case when m between 20 and 24 then 40 - m else 0 end,
                    case when m = 41 then 6 else 0 end, (26 + 11 * sin((m + 1) / 7.0))::int,
                    2 * (m % 9 = 0)::int, (m = 33)::int
             from generate_series(1, 59) m;",
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_signs_in_finds_a_raced_job_and_replays_a_dead_letter_in_chromium() {
    let db = TestDb::new().await;
    let console = Console::start(&db, Some(OPERATOR)).await;
    seed(&db, &console).await;
    seed_fleet(&db).await;
    let driver = Driver::start().await;
    let b = driver.browser().await;
    let shots = screenshots();
    let at = |p: &str| console.daemon.admin_url(p);

    b.goto(&at("/console/overview")).await;
    assert!(
        b.url().await.ends_with("/console/sign-in"),
        "{}",
        b.url().await
    );
    b.type_into("input[name=token]", OPERATOR).await;
    b.click("button[type=submit]").await;
    b.wait_text("h1", "Overview").await;
    let overview = b.text("main").await;
    assert!(
        overview.contains("events waiting in the inbox"),
        "{overview}"
    );
    assert!(overview.contains("running"), "the tasks: {overview}");
    for fleet in [
        "this one",
        "alive",
        "web-2",
        "webhooks stored",
        "401 refused",
    ] {
        assert!(overview.contains(fleet), "the fleet: {fleet}: {overview}");
    }
    b.screenshot(&shots, "overview.png").await;
    b.goto(&at("/console/overview#fleet")).await;
    b.wait_text("h1", "Overview").await;
    b.screenshot(&shots, "fleet.png").await;

    finds_the_raced_job_and_replays_a_dead_letter(&db, &console, &b, &shots).await;
    b.close().await;
    console.daemon.stop().await;
}

/// The raced job's timeline by its order id, the inbox, and a dead letter replayed with its
/// job's timeline and the audit entry after it.
async fn finds_the_raced_job_and_replays_a_dead_letter(
    db: &TestDb,
    console: &Console,
    b: &Browser<'_>,
    shots: &std::path::Path,
) {
    let at = |p: &str| console.daemon.admin_url(p);
    b.goto(&at("/console/jobs")).await;
    b.type_into("input[name=q]", "order-1042").await;
    b.click("main form button").await;
    b.wait_text("h1", "Job job_raced").await;
    let story = b.text("main").await;
    for line in [
        "row committed",
        "before the job's row",
        "delivery applied",
        "completed by webhook",
    ] {
        assert!(story.contains(line), "{line}: {story}");
    }
    b.screenshot(shots, "job.png").await;

    b.goto(&at("/console/inbox")).await;
    assert!(b.text("main").await.contains("job_not_committed_yet"));
    b.screenshot(shots, "inbox.png").await;

    b.goto(&at("/console/dead-letters")).await;
    assert!(b.text("main").await.contains("dl_readable"));
    b.screenshot(shots, "dead-letters.png").await;
    b.click(r#"form[action="/console/dead-letters/replay"] button"#)
        .await;
    b.wait_text("main", "replayed").await;
    assert!(b.url().await.ends_with("/console/dead-letters"));
    assert_eq!(
        job_state(db, "job_from_dead").await.as_deref(),
        Some("completed")
    );
    b.goto(&at("/console/jobs?q=job_from_dead")).await;
    let story = b.text("main").await;
    assert!(
        story.contains("delivery applied") && story.contains("completed by"),
        "{story}"
    );
    let audited = db
        .scalar("select count(*) from sume.audit_log where action = 'replay_dead_letters' and actor like 'console:%'")
        .await;
    assert_eq!(audited, 1);
}
