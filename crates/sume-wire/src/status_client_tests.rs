//! The status client against servers that answer as Sume, or something in front of it,
//! might: a bad base, mended bodies, redirects, answers about another job, no answer at all.

use super::*;
use crate::JobObject;

#[test]
fn refuses_a_bad_base() {
    assert!(StatusClient::new("not a url", Duration::from_secs(1)).is_err());
    assert!(StatusClient::new("ftp://x/api", Duration::from_secs(1)).is_err());
    assert!(StatusClient::new("http://127.0.0.1:1/api/v1/", Duration::from_secs(1)).is_ok());
}

/// A status answer whose caption was cut inside an emoji is still read, the half mended
/// into U+FFFD; one broken otherwise is still refused.
#[test]
fn an_answer_with_a_lone_surrogate_is_read_mended() {
    let body = br#"{"id":"job_1","status":"completed","result":{"caption":"cut \ud83d","url":"https://cdn.example/1.mp4"}}"#;
    assert!(
        serde_json::from_slice::<serde_json::Value>(body).is_err(),
        "serde_json refuses it"
    );
    let job = read_json::<JobObject>(body).unwrap();
    let result = job.result.unwrap();
    assert_eq!(result["caption"], "cut \u{fffd}");
    assert_eq!(result["url"], "https://cdn.example/1.mp4");
    let odd_status = read_json::<JobObject>(br#"{"id":"job_1","status":"done \udfff"}"#);
    assert_eq!(odd_status.unwrap().status, "done \u{fffd}");
    assert!(read_json::<JobObject>(br#"{"id":"job_1","status":"#).is_err());
    assert!(read_json::<JobObject>(b"\xff\\ud83d").is_err());
}

/// A server answering its first `calls` requests with `answer` as written; its handle
/// answers how many it served.
async fn answering(
    answer: String,
    calls: usize,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<usize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = tokio::spawn(async move {
        let mut served = 0;
        while served < calls {
            let Ok((mut socket, _)) = listener.accept().await else {
                break;
            };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
            }
            // A client that stops reading (a body past its cap) closes the connection.
            let _ = socket.write_all(answer.as_bytes()).await;
            served += 1;
        }
        served
    });
    (addr, served)
}

/// Something in front of Sume answering every call with a redirect to another host: no
/// call follows it (the key would not go there, and what answers there is not Sume); each
/// says where it pointed, cut and quoted.
#[tokio::test]
async fn a_redirect_is_reported_not_followed() {
    let far = format!("https://elsewhere.example/{}", "x".repeat(300));
    let answer =
        format!("HTTP/1.1 308 Permanent Redirect\r\nlocation: {far}\r\ncontent-length: 0\r\n\r\n");
    let (addr, served) = answering(answer, 3).await;
    let client = StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
    let key = Secret::new("sk_test");
    let shown = format!(
        "308 to \"https://elsewhere.example/{}\"...",
        "x".repeat(174)
    );
    let check = client.check_key(&key).await.unwrap();
    assert!(!check.usable);
    assert_eq!(check.redirect.as_deref(), Some(shown.as_str()));
    let status = client.job_status(&key, "job_1").await.unwrap();
    assert_eq!(status.http_status, 308);
    assert_eq!(status.outcome, StatusOutcome::Unexpected(shown.clone()));
    let list = client.list_jobs(&key, 100, None, None).await.unwrap();
    assert_eq!((list.http_status, list.page), (308, None));
    assert_eq!(list.redirect.as_deref(), Some(shown.as_str()));
    assert_eq!(
        served.await.unwrap(),
        3,
        "one call each, none sent elsewhere"
    );
}

/// A `304 Not Modified` (to calls that send no validator) was reported as a redirect with no
/// `Location`: it is said as what it is, no answer, and no call calls it a redirect.
#[tokio::test]
async fn a_304_is_no_answer_and_no_redirect() {
    let answer = "HTTP/1.1 304 Not Modified\r\netag: \"x\"\r\n\r\n".to_owned();
    let (addr, _) = answering(answer, 3).await;
    let client = StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
    let key = Secret::new("sk_test");
    let status = client.job_status(&key, "job_1").await.unwrap();
    assert_eq!(status.http_status, 304);
    let said = "304 Not Modified to a request that sent no validator: no answer";
    assert_eq!(status.outcome, StatusOutcome::Unexpected(said.into()));
    let check = client.check_key(&key).await.unwrap();
    assert_eq!((check.usable, check.redirect), (false, None));
    let list = client.list_jobs(&key, 100, None, None).await.unwrap();
    assert_eq!((list.http_status, list.redirect), (304, None));
}

/// A 200 whose job is not the one asked about (a cache in front of Sume keyed wrongly, say)
/// is not an answer about the job asked: its status must not close it.
#[tokio::test]
async fn an_answer_about_another_job_is_not_taken_for_the_one_asked() {
    let body = r#"{"id":"job_other","status":"failed","error":{"code":"x"}}"#;
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (addr, served) = answering(answer, 2).await;
    let client = StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
    let key = Secret::new("sk_test");
    let asked = client.job_status(&key, "job_asked").await.unwrap();
    assert_eq!(
        asked.outcome,
        StatusOutcome::Unexpected("200 about another job, \"job_other\"".into())
    );
    let same = client.job_status(&key, "job_other").await.unwrap();
    assert!(matches!(same.outcome, StatusOutcome::Found(j) if j.status == "failed"));
    assert_eq!(served.await.unwrap(), 2);
}

#[tokio::test]
async fn a_transport_error_says_what_went_wrong() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = reqwest::get(format!("http://127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    let line = error_chain(&e);
    assert!(line.contains("error sending request"), "{line}");
    assert!(line.to_lowercase().contains("connection refused"), "{line}");
    assert_eq!(line.matches("Connection refused").count(), 1, "{line}");
}

fn ok_answer(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A key check passes only on a 200 that reads as a list: a mistyped URL or a proxy answering
/// `200 {}`, or an error envelope sent as 200, says nothing about the key, and while the
/// check fails no 404 is a verdict.
#[tokio::test]
async fn a_key_check_needs_a_list_not_any_object() {
    let key = Secret::new("sk_test");
    for (body, usable) in [
        (r#"{"data":[],"has_more":false}"#, true),
        (r#"{"jobs":[{"id":"job_1","status":"queued"}]}"#, true),
        ("{}", false),
        (
            r#"{"error":{"code":"nope","message":"x"},"data":[]}"#,
            false,
        ),
        (r#"{"status":"ok"}"#, false),
        ("[]", false),
        // A success that says it holds no error is one.
        (r#"{"data":[],"has_more":false,"error":null}"#, true),
        (r#"{"error":false,"data":[]}"#, false),
        (r#"{"error":{},"data":[]}"#, false),
    ] {
        let (addr, served) = answering(ok_answer(body), 1).await;
        let client =
            StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
        let check = client.check_key(&key).await.unwrap();
        assert_eq!(check.usable, usable, "{body}");
        assert_eq!(served.await.unwrap(), 1);
    }
}

/// `.` and `..` cannot be written in a URL path (dot segments are removed, escaped or not):
/// the read would be about `/jobs/status`. No request is sent, and the answer is no answer.
#[tokio::test]
async fn a_dot_job_id_is_not_asked_about() {
    let (addr, served) = answering(ok_answer(r#"{"id":"status","status":"failed"}"#), 1).await;
    let client = StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
    let key = Secret::new("sk_test");
    for id in [".", ".."] {
        let reply = client.job_status(&key, id).await.unwrap();
        assert!(
            matches!(&reply.outcome, StatusOutcome::Unexpected(what) if what.contains("cannot be written in a URL path")),
            "{reply:?}"
        );
    }
    assert!(askable_job_id("..."));
    assert!(matches!(
        client.job_status(&key, "...").await.unwrap().outcome,
        StatusOutcome::Unexpected(_)
    ));
    assert_eq!(served.await.unwrap(), 1, "only `...` was asked about");
}

/// A 404 is "no such job" only in Sume's error envelope: a proxy's page, or a route in front
/// of Sume that answers for paths it does not know, says nothing about the job.
#[tokio::test]
async fn a_404_outside_sumes_envelope_is_not_a_verdict() {
    let key = Secret::new("sk_test");
    let not_found = |content_type: &str, body: &str| {
        format!(
            "HTTP/1.1 404 Not Found\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    for (content_type, body) in [
        ("text/html", "<html><body>404 Not Found</body></html>"),
        ("application/json", r#"{"error":"not found"}"#),
        ("application/json", ""),
    ] {
        let (addr, _) = answering(not_found(content_type, body), 1).await;
        let client =
            StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
        let asked = client.job_status(&key, "job_1").await.unwrap();
        assert!(
            matches!(&asked.outcome, StatusOutcome::Unexpected(why) if why.contains("envelope")),
            "{body}: {:?}",
            asked.outcome
        );
    }
    let sumes = r#"{"error":{"code":"not_found","message":"No such job \ud83d","details":{}},"request_id":"req_1"}"#;
    let (addr, _) = answering(not_found("application/json", sumes), 1).await;
    let client = StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
    let asked = client.job_status(&key, "job_1").await.unwrap();
    assert_eq!(asked.outcome, StatusOutcome::NotFound);
    assert_eq!(asked.request_id.as_deref(), Some("req_1"));
}

/// Every answer's id is Sume's `X-Request-Id`, a 200's too (the id to quote to Sume's support
/// about any read), before an error envelope's `request_id`, which serves when it is missing.
#[tokio::test]
async fn each_answer_carries_the_request_id_sume_sent() {
    let key = Secret::new("sk_test");
    let client_for = |addr: std::net::SocketAddr| {
        StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap()
    };
    let answer = |status: &str, body: &str, id: Option<&str>| {
        let header = id.map(|id| format!("x-request-id: {id}\r\n"));
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{}content-length: {}\r\n\r\n{body}",
            header.unwrap_or_default(),
            body.len()
        )
    };
    let job = r#"{"id":"job_1","status":"running"}"#;
    let list = r#"{"data":[],"has_more":false}"#;
    let envelope =
        r#"{"error":{"code":"not_found","message":"no","details":{}},"request_id":"req_body"}"#;
    for (status, body, header, expected) in [
        ("200 OK", job, Some("req_ok"), Some("req_ok")),
        ("200 OK", job, None, None),
        (
            "404 Not Found",
            envelope,
            Some("req_head"),
            Some("req_head"),
        ),
        ("404 Not Found", envelope, None, Some("req_body")),
    ] {
        let (addr, _) = answering(answer(status, body, header), 1).await;
        let read = client_for(addr).job_status(&key, "job_1").await.unwrap();
        assert_eq!(read.request_id.as_deref(), expected, "{status} {header:?}");
    }
    let (addr, _) = answering(answer("200 OK", list, Some("req_check")), 1).await;
    let check = client_for(addr).check_key(&key).await.unwrap();
    assert!(check.usable);
    assert_eq!(check.request_id.as_deref(), Some("req_check"));
    let (addr, _) = answering(answer("200 OK", list, Some("req_list")), 1).await;
    let page = client_for(addr)
        .list_jobs(&key, 100, None, None)
        .await
        .unwrap();
    assert!(page.page.is_some());
    assert_eq!(page.request_id.as_deref(), Some("req_list"));
    // An id of a megabyte (an envelope's, or a header's as long as the client takes) is kept
    // cut, for every line that quotes it.
    let long = "r".repeat(1_000_000);
    let envelope = format!(
        r#"{{"error":{{"code":"unauthorized","message":"no","details":{{}}}},"request_id":"{long}"}}"#
    );
    let cut = format!("{}...", "r".repeat(200));
    for (body, header) in [(envelope.as_str(), None), (job, Some(&long[..60_000]))] {
        let status = if header.is_some() {
            "200 OK"
        } else {
            "401 Unauthorized"
        };
        let (addr, _) = answering(answer(status, body, header), 1).await;
        let read = client_for(addr).job_status(&key, "job_1").await.unwrap();
        assert_eq!(read.request_id.as_deref(), Some(cut.as_str()), "{status}");
    }
}

/// A 200 whose `result` no reader here could take once read as "unreadable body", so the job
/// Sume called completed was given up: the job is found, without its result; a list page
/// holding such a job reads, the job on it without its result.
#[tokio::test]
async fn an_answer_with_an_odd_result_is_found_without_it() {
    let key = Secret::new("sk_test");
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for result in [r#"{"n":1e400}"#, deep.as_str()] {
        let body = format!(r#"{{"id":"job_1","status":"completed","result":{result}}}"#);
        let (addr, _) = answering(ok_answer(&body), 1).await;
        let client =
            StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
        let reply = client.job_status(&key, "job_1").await.unwrap();
        let StatusOutcome::Found(job) = reply.outcome else {
            panic!("{result}: {:?}", reply.outcome);
        };
        assert_eq!((job.status.as_str(), job.result), ("completed", None));
        assert_eq!(reply.left_out, None, "read whole");
        let page = format!(
            r#"{{"data":[{body},{{"id":"job_2","status":"failed","error":{{"code":"x"}}}}],"has_more":false}}"#
        );
        let (addr, _) = answering(ok_answer(&page), 1).await;
        let client =
            StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
        let list = client.list_jobs(&key, 100, None, None).await.unwrap();
        let jobs = list.page.expect("the page reads").data;
        let read: Vec<_> = jobs
            .iter()
            .map(|j| (j.id.as_str(), j.status.as_str()))
            .collect();
        assert_eq!(read, [("job_1", "completed"), ("job_2", "failed")]);
        assert_eq!(jobs[0].result, None);
    }
}

/// A 200 past MAX_ANSWER_BYTES is cut, and once never read: read up to the cut, its job is
/// found when its status comes first, said so; one of exactly the cap is read whole.
#[tokio::test]
async fn an_answer_past_the_cap_is_read_up_to_its_status() {
    let key = Secret::new("sk_test");
    let sized = |len: usize| {
        let head = r#"{"id":"job_1","status":"completed","result":{"text":""#;
        let text = "x".repeat(len - head.len() - 3);
        format!(r#"{head}{text}"}}}}"#)
    };
    let (addr, _) = answering(ok_answer(&sized(2 * MAX_ANSWER_BYTES)), 1).await;
    let client = StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
    let reply = client.job_status(&key, "job_1").await.unwrap();
    assert!(
        matches!(&reply.outcome, StatusOutcome::Found(j) if j.status == "completed" && j.result.is_none()),
        "{:?}",
        reply.outcome
    );
    let left_out = reply.left_out.as_deref();
    assert_eq!(left_out, Some("body cut at 1048576 bytes: result left out"));
    let (addr, _) = answering(ok_answer(&sized(MAX_ANSWER_BYTES)), 1).await;
    let client = StatusClient::new(&format!("http://{addr}/v1"), Duration::from_secs(5)).unwrap();
    let whole = client.job_status(&key, "job_1").await.unwrap();
    assert!(
        matches!(&whole.outcome, StatusOutcome::Found(j) if j.result.is_some()),
        "{:?}",
        whole.outcome
    );
    assert_eq!(whole.left_out, None);
}
