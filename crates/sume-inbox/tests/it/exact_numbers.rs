//! A job's result keeps every digit of its numbers on its way from the event to the job and
//! from the job to every answer: numbers past `i64`/`u64` and decimals past `f64`'s precision
//! once came back rounded (`123456789012345678901` as `1.2345678901234567e+20`), because the
//! result was read into a JSON tree and written back from it.

use std::time::Duration;

use crate::support::*;

/// A result with numbers no `f64` holds exactly.
const EXACT: &str = r#"{"seed":9007199254740993,"big":123456789012345678901,"neg":-9223372036854775809,"dec":0.30000000000000000001}"#;

/// The digits each answer must carry as sent.
const DIGITS: [&str; 4] = [
    "9007199254740993",
    "123456789012345678901",
    "-9223372036854775809",
    "0.30000000000000000001",
];

/// Whether the job's stored result is the event's, compared as `jsonb` and as text.
async fn job_result_is_the_events(db: &TestDb, job_id: &str) {
    let row = db
        .client()
        .await
        .query_one(
            "select j.result = e.result, j.result::text, e.result::text
             from sume.jobs j join sume.events e on e.job_id = j.job_id
             where j.job_id = $1",
            &[&job_id],
        )
        .await
        .unwrap();
    let (same, job, event): (bool, String, String) = (row.get(0), row.get(1), row.get(2));
    assert!(same, "jobs.result {job} is not events.result {event}");
    assert_eq!(job, event);
}

/// Gets an admin API path and answers its body's text, checking it carries every digit.
async fn answered_exactly(http: &reqwest::Client, daemon: &Daemon, path: &str) {
    let answer = http.get(daemon.admin_url(path)).send().await.unwrap();
    assert_eq!(answer.status(), 200, "{path}");
    let text = answer.text().await.unwrap();
    for digits in DIGITS {
        assert!(text.contains(digits), "{path}: {digits} not in {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_sent_by_webhook_keeps_every_digit_in_the_job_and_its_answers() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let mut delivery = Delivery::completed("job_exact");
    delivery.body = format!(r#"{{"event":"job.completed","job_id":"job_exact","result":{EXACT}}}"#);
    let sent = delivery.send(&http, &daemon.url("/webhooks/sume")).await;
    assert_eq!(sent.status(), 204);
    let reg = api_register(&http, &daemon, "job_exact", "o1").await;
    assert_eq!(reg.status(), 201);
    let text = reg.text().await.unwrap();
    for digits in DIGITS {
        assert!(
            text.contains(digits),
            "registration: {digits} not in {text}"
        );
    }
    job_result_is_the_events(&db, "job_exact").await;
    // The feed answers only closes below every open transaction of the cluster (other tests'
    // included), so the close may take a moment to show there.
    wait_for("the close in the feed", Duration::from_secs(20), || async {
        let feed = http.get(daemon.admin_url("/v1/closes")).send();
        feed.await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains("job_exact")
    })
    .await;
    for path in [
        "/v1/jobs/job_exact",
        "/v1/jobs/job_exact/detail",
        "/v1/closes",
        "/v1/jobs?closed_after=0",
        "/v1/jobs",
    ] {
        answered_exactly(&http, &daemon, path).await;
    }
    daemon.stop().await;
}

/// Sume's status answer carries such a result (a stand-in answers it: the simulator's results
/// hold no such numbers); the job closed by the poll keeps it as sent, as `jsonb` and in
/// every digit of its text.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_read_by_a_poll_keeps_every_digit_in_the_job() {
    let db = TestDb::new().await;
    crate::sweep::migrate(&db).await;
    crate::sweep::register(&db, "job_exact").await;
    let body = format!(r#"{{"id":"job_exact","status":"completed","result":{EXACT}}}"#);
    let api = stand_in_api(crate::odd_answers::answering(vec![("job_exact", body)])).await;
    let sweep = crate::odd_answers::sweep_at(&db, &api).await;
    let polled = sweep.poll_once().await;
    assert_eq!(polled.closed_by_poll, 1, "{polled:?}");
    let row = db
        .client()
        .await
        .query_one(
            "select closed_by, result = $2::text::jsonb, result::text
             from sume.jobs where job_id = $1",
            &[&"job_exact", &EXACT],
        )
        .await
        .unwrap();
    let (by, same, text): (String, bool, String) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(by, "poll");
    assert!(same, "jobs.result {text} is not {EXACT}");
    for digits in DIGITS {
        assert!(text.contains(digits), "{digits} not in {text}");
    }
}
