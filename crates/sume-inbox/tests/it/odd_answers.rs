//! Sume's status answers holding what no reader here could take (a result with a number past
//! `f64`, nested past the reader's 128 levels, a body past the client's 1 MiB cap): the job
//! takes the status Sume gave, without the result, as it does when a webhook says the same;
//! and an answer that names no status is no answer, never a status Sume did not give. An
//! answer wrapped as a create call's is read as its job; one that cannot be read (compressed,
//! a web page) says how it came, and a 304 is said as no answer, not as a redirect.

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use sume_inbox::actors::sweep::PollStats;
use sume_inbox::config::SweepConfig;

use crate::support::*;
use crate::sweep::{clocked_config, main_key, migrate, register, Sweep};

/// What a stand-in for Sume answers at `/jobs/{id}/status`, by job id; its list is empty (the
/// key check passes, no walk sees a job).
pub(crate) fn answering(bodies: Vec<(&'static str, String)>) -> axum::Router {
    axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let bodies = bodies.clone();
        async move {
            let Some(path) = uri.path().strip_suffix("/status") else {
                return axum::Json(json!({"data": [], "has_more": false})).into_response();
            };
            let id = path.rsplit('/').next().unwrap_or_default();
            match bodies.iter().find(|(job, _)| *job == id) {
                Some((_, body)) => json_answer(body.clone()),
                None => axum::http::StatusCode::NOT_FOUND.into_response(),
            }
        }
    })
}

fn json_answer(body: String) -> Response {
    ([("content-type", "application/json")], body).into_response()
}

/// Polls only (no walk of the list), every job due at once.
pub(crate) async fn sweep_at(db: &TestDb, api: &str) -> Sweep {
    let config = SweepConfig {
        list_walks: false,
        ..clocked_config()
    };
    let sweep = Sweep::with_keys(db, api, config, vec![main_key()]).await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    sweep
}

/// Registers `jobs`, serves `sume` in Sume's place and runs one poll of them, when due.
async fn poll_through(db: &TestDb, jobs: &[&str], sume: axum::Router) -> PollStats {
    for job in jobs {
        register(db, job).await;
    }
    let api = stand_in_api(sume).await;
    sweep_at(db, &api).await.poll_once().await
}

/// The job's state, who closed it, its result and the last poll's answer as recorded.
async fn closed(db: &TestDb, job: &str) -> (String, Option<String>, Option<Value>, String) {
    let row = db
        .client()
        .await
        .query_one(
            "select state, closed_by, result, last_poll_answer from sume.jobs where job_id = $1",
            &[&job],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

/// `200 {"id":"job_b13","status":"completed","result":{"n":1e400}}` was recorded as `200 with
/// unreadable body: number out of range` at every poll, and the job Sume called completed was
/// given up as `expired`; so was one whose result nests 200 deep. Each now closes with the
/// status Sume gave, without its result, as a webhook saying the same closes it; a failed
/// job's odd error likewise.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_sume_calls_completed_closes_though_its_result_cannot_be_read() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let bodies = vec![
        (
            "job_b13",
            r#"{"id":"job_b13","status":"completed","result":{"n":1e400}}"#.to_owned(),
        ),
        (
            "job_deep",
            format!(r#"{{"id":"job_deep","status":"completed","result":{deep}}}"#),
        ),
        (
            "job_odd_error",
            r#"{"id":"job_odd_error","status":"failed","error":{"code":"x","n":-1e999}}"#
                .to_owned(),
        ),
        (
            "job_plain",
            r#"{"id":"job_plain","status":"completed","result":{"url":"u"}}"#.to_owned(),
        ),
    ];
    let jobs: Vec<_> = bodies.iter().map(|(job, _)| *job).collect();
    let polled = poll_through(&db, &jobs, answering(bodies)).await;
    assert_eq!(
        (polled.requests, polled.closed_by_poll),
        (4, 4),
        "{polled:?}"
    );
    for (job, state) in [
        ("job_b13", "completed"),
        ("job_deep", "completed"),
        ("job_odd_error", "failed"),
    ] {
        let (got, by, result, answer) = closed(&db, job).await;
        assert_eq!(
            (got.as_str(), by.as_deref()),
            (state, Some("poll")),
            "{job}"
        );
        assert_eq!(result, None, "{job}");
        assert_eq!(answer, format!("200 {state}"), "{job}");
    }
    let (_, _, result, _) = closed(&db, "job_plain").await;
    assert_eq!(result, Some(json!({"url": "u"})));
}

/// A status answer past the client's 1 MiB cap was cut and never read, so the job was given
/// up. Read up to the cut: one naming its `id` and `status` first closes with that status and
/// no result, the recorded answer saying what was left out; one whose status lies past the
/// cut is no answer, said so, and the job stays open to be asked again.
#[tokio::test(flavor = "multi_thread")]
async fn a_status_answer_past_the_cap_is_read_up_to_its_status() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let text = "x".repeat(2 * 1024 * 1024);
    let bodies = vec![
        (
            "job_big",
            format!(r#"{{"id":"job_big","status":"completed","result":{{"text":"{text}"}}}}"#),
        ),
        (
            "job_big_late",
            format!(r#"{{"result":{{"text":"{text}"}},"id":"job_big_late","status":"completed"}}"#),
        ),
    ];
    let jobs: Vec<_> = bodies.iter().map(|(job, _)| *job).collect();
    let polled = poll_through(&db, &jobs, answering(bodies)).await;
    assert_eq!(
        (polled.requests, polled.closed_by_poll),
        (2, 1),
        "{polled:?}"
    );
    let (state, by, result, answer) = closed(&db, "job_big").await;
    assert_eq!(
        (state.as_str(), by.as_deref(), result),
        ("completed", Some("poll"), None)
    );
    assert_eq!(
        answer,
        "200 completed (body cut at 1048576 bytes: result left out)"
    );
    let (state, by, _, answer) = closed(&db, "job_big_late").await;
    assert_eq!((state.as_str(), by), ("open", None));
    assert_eq!(
        answer,
        "200 with a body past 1048576 bytes, cut before its job's id and status"
    );
}

/// A status answer naming a key twice (`"status":"running","status":"completed"`) did not
/// read at all (`duplicate field`): every poll recorded it as unreadable, and the job Sume
/// called completed was given up as `expired`. Its last value is read, as a webhook body's
/// is: the job closes `completed` by the poll, with the last `result` sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_status_answer_repeating_a_key_is_read_by_its_last_value() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let bodies = vec![
        (
            "job_twice",
            r#"{"id":"job_twice","status":"running","status":"completed","result":{"v":1},"result":{"v":2}}"#
                .to_owned(),
        ),
        (
            "job_twice_id",
            r#"{"id":"job_twice_id","object":"job","id":"job_twice_id","status":"failed"}"#
                .to_owned(),
        ),
    ];
    let jobs: Vec<_> = bodies.iter().map(|(job, _)| *job).collect();
    let polled = poll_through(&db, &jobs, answering(bodies)).await;
    assert_eq!(
        (polled.requests, polled.closed_by_poll),
        (2, 2),
        "{polled:?}"
    );
    let (state, by, result, answer) = closed(&db, "job_twice").await;
    assert_eq!(
        (state.as_str(), by.as_deref(), result, answer.as_str()),
        (
            "completed",
            Some("poll"),
            Some(json!({"v": 2})),
            "200 completed"
        )
    );
    let (state, by, _, answer) = closed(&db, "job_twice_id").await;
    assert_eq!(
        (state.as_str(), by.as_deref(), answer.as_str()),
        ("failed", Some("poll"), "200 failed")
    );
}

/// `200 {"object":"video_generation","job":{"id":"job_wrapped","status":"completed",...}}`,
/// the shape of Sume's create answers, did not read (`missing field id`): every poll recorded
/// it as unreadable and the job Sume called completed was given up as `expired`. Its `job` is
/// read: the job closes `completed` by the poll with its result. A wrapped job that is another
/// is still no answer about the one asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_status_answer_wrapped_as_a_create_answer_is_read_as_its_job() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let bodies = vec![
        (
            "job_wrapped",
            r#"{"object":"video_generation","job":{"id":"job_wrapped","status":"completed","result":{"url":"u"}}}"#
                .to_owned(),
        ),
        (
            "job_wrapped_other",
            r#"{"object":"video_generation","job":{"id":"job_someone_else","status":"completed"}}"#
                .to_owned(),
        ),
    ];
    let jobs: Vec<_> = bodies.iter().map(|(job, _)| *job).collect();
    let polled = poll_through(&db, &jobs, answering(bodies)).await;
    assert_eq!(
        (polled.requests, polled.closed_by_poll),
        (2, 1),
        "{polled:?}"
    );
    let (state, by, result, answer) = closed(&db, "job_wrapped").await;
    assert_eq!(
        (state.as_str(), by.as_deref(), result, answer.as_str()),
        (
            "completed",
            Some("poll"),
            Some(json!({"url": "u"})),
            "200 completed"
        )
    );
    let (state, by, _, answer) = closed(&db, "job_wrapped_other").await;
    assert_eq!((state.as_str(), by), ("open", None));
    assert_eq!(answer, r#"200 about another job, "job_someone_else""#);
}

/// A status answer as a stand-in sends it: the job it is about, its status code, its headers
/// and its body.
type RawAnswer = (&'static str, u16, Vec<(&'static str, String)>, Vec<u8>);

/// A stand-in for Sume answering each job's status with the headers and body given (the
/// status `code`), and an empty list elsewhere.
fn answering_raw(answers: Vec<RawAnswer>) -> axum::Router {
    axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let answers = answers.clone();
        async move {
            let Some(path) = uri.path().strip_suffix("/status") else {
                return axum::Json(json!({"data": [], "has_more": false})).into_response();
            };
            let id = path.rsplit('/').next().unwrap_or_default();
            let Some((_, code, headers, body)) = answers.into_iter().find(|(job, ..)| *job == id)
            else {
                return axum::http::StatusCode::NOT_FOUND.into_response();
            };
            let mut response = Response::new(axum::body::Body::from(body));
            *response.status_mut() = axum::http::StatusCode::from_u16(code).unwrap();
            for (name, value) in headers {
                response.headers_mut().append(name, value.parse().unwrap());
            }
            response
        }
    })
}

/// A 200 that is gzip or brotli (a front compressing what was never asked to be), or a
/// maintenance or login page (`text/html`), was recorded and logged as the JSON parser's
/// words alone (`200 with unreadable body: expected value at line 1 column 1`). The answer
/// now names the `Content-Encoding` and `Content-Type` that came, cut short; it is still no
/// answer, and the job stays open to be asked again.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_200_names_the_encoding_and_type_it_came_as() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let json = || ("content-type", "application/json".to_owned());
    let gzip = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xabV\xca".to_vec();
    let long_type = format!("text/html; profile={}", "x".repeat(100));
    let page = b"<!doctype html><title>Down for maintenance</title>".to_vec();
    let answers = vec![
        (
            "job_gzip",
            200,
            vec![json(), ("content-encoding", "gzip".into())],
            gzip,
        ),
        (
            "job_br",
            200,
            vec![("content-encoding", "br".into())],
            b"\x8b\x05\x80{}\x03".to_vec(),
        ),
        (
            "job_html",
            200,
            vec![("content-type", "text/html; charset=utf-8".into())],
            page.clone(),
        ),
        (
            "job_long_type",
            200,
            vec![("content-type", long_type)],
            page,
        ),
    ];
    let jobs: Vec<_> = answers.iter().map(|(job, ..)| *job).collect();
    let polled = poll_through(&db, &jobs, answering_raw(answers)).await;
    assert_eq!(
        (polled.requests, polled.closed_by_poll),
        (4, 0),
        "{polled:?}"
    );
    let parser = "expected value at line 1 column 1";
    for (job, came) in [
        (
            "job_gzip",
            "Content-Encoding gzip, Content-Type application/json".to_owned(),
        ),
        ("job_br", "Content-Encoding br".to_owned()),
        (
            "job_html",
            "Content-Type text/html; charset=utf-8".to_owned(),
        ),
        (
            "job_long_type",
            format!("Content-Type text/html; profile={}...", "x".repeat(45)),
        ),
    ] {
        let (state, by, _, answer) = closed(&db, job).await;
        assert_eq!((state.as_str(), by), ("open", None), "{job}");
        assert_eq!(
            answer,
            format!("200 with unreadable body ({came}): {parser}"),
            "{job}"
        );
    }
}

/// The list walk's page that came as a web page was logged as `200` alone ("a list page was
/// not read"): it names the type it came as, as a status answer does.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_page_that_came_as_a_web_page_says_so_to_the_walk() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let page = "<!doctype html><title>Down for maintenance</title>";
    let app = axum::Router::new().fallback(move || async move {
        ([("content-type", "text/html; charset=utf-8")], page).into_response()
    });
    let api = stand_in_api(app).await;
    let sweep = sweep_at(&db, &api).await;
    let store = sume_inbox::db::Store::new(&db.url, 1).unwrap();
    store.rate_buckets_ensure("main", 10.0).await.unwrap();
    let reader = sume_inbox::sume_api::StatusReader::new(
        store,
        sweep.metrics.clone(),
        sume_wire::StatusClient::new(&api, Duration::from_secs(5)).unwrap(),
        vec![main_key()],
        sweep.config.read_rate,
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let answer = reader.list_page(&main_key(), None, deadline).await.unwrap();
    let Some(sume_inbox::sume_api::ListAnswer::Failed(why)) = answer else {
        panic!("{answer:?}");
    };
    assert_eq!(
        why,
        "200 with a body that is no page of jobs (Content-Type text/html; charset=utf-8)"
    );
}

/// A `304 Not Modified` to a status call (which sends no `If-None-Match` or
/// `If-Modified-Since`) was recorded and logged as a redirect (`304 with no Location`, "check
/// SUME_API_URL"). It is said as what it is, no answer, and the job stays open.
#[tokio::test(flavor = "multi_thread")]
async fn a_304_to_a_status_call_is_no_answer_not_a_redirect() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let etag = vec![("etag", "\"v1\"".to_owned())];
    let answers = vec![("job_304", 304, etag, Vec::new())];
    let polled = poll_through(&db, &["job_304"], answering_raw(answers)).await;
    assert_eq!(
        (polled.requests, polled.closed_by_poll),
        (1, 0),
        "{polled:?}"
    );
    let (state, by, _, answer) = closed(&db, "job_304").await;
    assert_eq!((state.as_str(), by), ("open", None));
    assert_eq!(
        answer,
        "304 Not Modified to a request that sent no validator: no answer"
    );
}
