//! The admin API over HTTP: the two token scopes, the Host check, JSON writes, request ids in
//! every answer and error, the operator's pages, replay that changes nothing twice, the audit
//! log. Answers against the OpenAPI document: `openapi_contract.rs`.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::*;

const OPERATOR: &str = "operator-token-0123456789";
const APP: &str = "application-token-0123456789";

struct Api {
    http: reqwest::Client,
    daemon: Daemon,
}

impl Api {
    async fn start(db: &TestDb) -> Api {
        let mut c = config(&db.url);
        c.admin_token = Some(sume_wire::Secret::new(OPERATOR));
        c.admin_app_token = Some(sume_wire::Secret::new(APP));
        Api {
            http: reqwest::Client::new(),
            daemon: Daemon::start(c).await,
        }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value, reqwest::header::HeaderMap) {
        let mut req = self.http.request(method, self.daemon.admin_url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value, headers)
    }

    async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        let (s, v, h) = self.call(Method::GET, path, Some(token), None).await;
        assert!(h.contains_key("x-request-id"), "{path}");
        (s, v)
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let (s, v, _) = self
            .call(Method::POST, path, Some(OPERATOR), Some(body))
            .await;
        (s, v)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_scopes_the_host_and_json_writes_hold_and_errors_carry_the_request_id() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let (s, body, h) = api.call(Method::GET, "/v1/stats", None, None).await;
    assert_eq!(s, 401);
    assert_eq!(body["error"]["code"], "unauthorized");
    assert_eq!(body["request_id"], h["x-request-id"].to_str().unwrap());
    // The application's token: its own routes, nothing of the operator's.
    let (s, _) = api.get("/v1/jobs", APP).await;
    assert_eq!(s, 200);
    let (s, _) = api.get("/v1/openapi.json", APP).await;
    assert_eq!(s, 200);
    let reg = json!({"job_id": "job_app", "order_id": "o-1"});
    let (s, _, _) = api
        .call(Method::POST, "/v1/jobs", Some(APP), Some(reg))
        .await;
    assert_eq!(s, 201);
    for path in [
        "/v1/stats",
        "/v1/inbox",
        "/v1/audit",
        "/v1/instances",
        "/metrics",
        "/v1/jobs/job_app/detail",
    ] {
        let (s, body) = api.get(path, APP).await;
        assert_eq!(s, 403, "{path}");
        assert_eq!(body["error"]["code"], "forbidden", "{path}");
    }
    let (s, _, _) = api
        .call(
            Method::POST,
            "/v1/dead-letters/drop",
            Some(APP),
            Some(json!({"ids": ["x"]})),
        )
        .await;
    assert_eq!(s, 403);
    let (s, _) = api.get("/v1/stats", OPERATOR).await;
    assert_eq!(s, 200);
    // A write that is not JSON is refused before anything happens.
    let r = api
        .http
        .post(api.daemon.admin_url("/v1/jobs"))
        .bearer_auth(APP)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("job_id=job_form")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    assert_eq!(job_state(&db, "job_form").await, None);
    methods_no_route_takes_are_405(&api).await;
    // A Host that is not the admin address (DNS rebinding) is refused; the caller's request id
    // comes back.
    let r = api
        .http
        .get(api.daemon.admin_url("/v1/jobs"))
        .bearer_auth(APP)
        .header(
            "host",
            format!("rebound.example:{}", api.daemon.admin.port()),
        )
        .header("x-request-id", "trace-42")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421);
    assert_eq!(r.headers()["x-request-id"], "trace-42");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["request_id"], "trace-42");
    assert_eq!(body["error"]["code"], "unknown_host");
    let (s, body) = api.get("/v1/nothing-here", OPERATOR).await;
    assert_eq!(
        (s.as_u16(), body["error"]["code"].as_str()),
        (404, Some("no_route"))
    );
    api.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bearer_scheme_is_read_in_any_case() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    // The scheme's name is case-insensitive; another scheme carrying the token is no bearer.
    for (header, want) in [
        (format!("bearer {OPERATOR}"), 200),
        (format!("BEARER {OPERATOR}"), 200),
        (format!("Basic {OPERATOR}"), 401),
        (format!("Bearer{OPERATOR}"), 401),
    ] {
        let r = api
            .http
            .get(api.daemon.admin_url("/v1/stats"))
            .header("authorization", &header)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want, "{header}");
    }
}

/// A write is read as sent: one that says it is compressed is refused (415) before anything
/// happens, rather than read as if it were not; `identity` is no compression.
#[tokio::test(flavor = "multi_thread")]
async fn a_compressed_write_is_refused_not_misread() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    for (encoding, job, want) in [
        ("gzip", "job_gzip", 415),
        ("br", "job_br", 415),
        ("identity", "job_identity", 201),
    ] {
        let r = api
            .http
            .post(api.daemon.admin_url("/v1/jobs"))
            .bearer_auth(APP)
            .header("content-type", "application/json")
            .header("content-encoding", encoding)
            .body(json!({ "job_id": job }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want, "{encoding}");
        let body: serde_json::Value = r.json().await.unwrap();
        if want == 415 {
            assert_eq!(body["error"]["code"], "unsupported_media_type", "{body}");
            assert_eq!(job_state(&db, job).await, None, "{encoding}");
        }
    }
}

/// A write is taken whenever its `Content-Type` names JSON as RFC 9110 writes a media type:
/// any case, parameters after it, spaces around their `;`; any other type is refused 415.
#[tokio::test(flavor = "multi_thread")]
async fn a_json_content_type_is_read_as_a_media_type() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    for (i, (content_type, want)) in [
        ("application/json", 201),
        ("Application/JSON", 201),
        ("application/json;charset=utf-8", 201),
        ("application/json ; charset=utf-8", 201),
        ("application/json\t;\tcharset=UTF-8", 201),
        ("application/json;", 201),
        ("text/plain", 415),
        ("application/jsonx", 415),
        ("application/json-patch+json", 415),
        ("application/x-www-form-urlencoded; application/json", 415),
    ]
    .into_iter()
    .enumerate()
    {
        let job = format!("job_ct_{i}");
        let r = api
            .http
            .post(api.daemon.admin_url("/v1/jobs"))
            .bearer_auth(APP)
            .header("content-type", content_type)
            .body(json!({ "job_id": job }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want, "{content_type:?}");
        let body: Value = r.json().await.unwrap();
        let stored = job_state(&db, &job).await;
        if want == 415 {
            assert_eq!(body["error"]["code"], "unsupported_media_type", "{body}");
            assert_eq!(stored, None, "{content_type:?}");
        } else {
            assert_eq!(stored.as_deref(), Some("open"), "{content_type:?}");
        }
    }
    api.daemon.stop().await;
}

/// `Content-Type` is a singleton (RFC 9110, 5.3): a write carrying two is refused 415 before
/// anything is stored, whichever comes first and whatever they say, as a proxy in front may
/// have read the other; the first one was read, in silence.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_with_two_content_types_is_refused() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    for (i, two) in [
        ["application/json", "text/plain"],
        ["text/plain", "application/json"],
        ["application/json", "application/json"],
    ]
    .into_iter()
    .enumerate()
    {
        let job = format!("job_two_ct_{i}");
        let r = api
            .http
            .post(api.daemon.admin_url("/v1/jobs"))
            .bearer_auth(APP)
            .header("content-type", two[0])
            .header("content-type", two[1])
            .body(json!({ "job_id": job }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 415, "{two:?}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unsupported_media_type", "{body}");
        let message = body["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains("one Content-Type header, this one carries 2"),
            "{message}"
        );
        assert_eq!(job_state(&db, &job).await, None, "{two:?}");
    }
    api.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn replay_through_the_api_changes_nothing_twice_and_is_audited() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    a_set_aside_event_and_a_dead_letter(&api, &db).await;
    the_set_aside_event_is_applied_once_however_often_replayed(&api, &db).await;
    the_dead_letter_is_replayed_then_dropped_once(&api).await;
    // One close in the feed, however many replays. The feed answers only closes below every
    // open transaction of the cluster (other tests' included), so it may take a moment.
    let closes = || async {
        let (_, feed) = api.get("/v1/closes", APP).await;
        feed["closes"].as_array().unwrap().len()
    };
    wait_for("the close in the feed", Duration::from_secs(20), || async {
        closes().await > 0
    })
    .await;
    assert_eq!(closes().await, 1);
    the_audit_log_holds_every_operator_write(&api).await;
    api.daemon.stop().await;
}

/// A delivery for a job never registered, then set aside as foreign; a delivery that names no
/// job (a dead letter).
async fn a_set_aside_event_and_a_dead_letter(api: &Api, db: &TestDb) {
    let hook = api.daemon.url("/webhooks/sume");
    Delivery::status("job_aside", "failed")
        .send(&api.http, &hook)
        .await;
    let mut garbage = Delivery::completed("job_none");
    garbage.body = r#"{"hello":"no job here"}"#.into();
    garbage.event_id = None;
    garbage.send(&api.http, &hook).await;
    db.client()
        .await
        .execute(
            "update sume.events set set_aside_at = now(), set_aside_reason = 'foreign'
             where job_id = 'job_aside'",
            &[],
        )
        .await
        .unwrap();
}

/// Replayed, the set-aside event goes back to the inbox and attaches once its job is
/// registered; replayed again, it is already applied. An unknown event is a 404.
async fn the_set_aside_event_is_applied_once_however_often_replayed(api: &Api, db: &TestDb) {
    let (_, aside) = api.get("/v1/set-aside", OPERATOR).await;
    assert_eq!(aside["events"][0]["job_id"], "job_aside");
    let event = aside["events"][0]["event_id"].as_str().unwrap().to_owned();
    // Event ids hold slashes (`{job_id}/{type}`): one path segment, percent-encoded.
    let path = format!("/v1/events/{}/replay", event.replace('/', "%2F"));
    let (s, first) = api.post(&path, json!({})).await;
    assert_eq!(s, 200, "{first}");
    assert!(first["result"]
        .as_str()
        .unwrap()
        .contains("back in the inbox"));
    db.client()
        .await
        .execute("insert into sume.jobs (job_id) values ('job_aside')", &[])
        .await
        .unwrap();
    wait_for("job_aside attached", Duration::from_secs(10), || async {
        job_state(db, "job_aside").await.as_deref() == Some("failed")
    })
    .await;
    for _ in 0..2 {
        let (s, again) = api.post(&path, json!({})).await;
        assert_eq!(s, 200);
        assert!(again["result"]
            .as_str()
            .unwrap()
            .contains("already applied"));
    }
    let (s, _) = api.post("/v1/events/evt_nobody/replay", json!({})).await;
    assert_eq!(s, 404);
}

/// Dead letters: replayed once (still unreadable), then nothing to replay; dropped once; a
/// drop of no id is refused.
async fn the_dead_letter_is_replayed_then_dropped_once(api: &Api) {
    let (_, letters) = api.get("/v1/dead-letters", OPERATOR).await;
    let letter = letters["dead_letters"][0]["dead_letter_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, r1) = api.post("/v1/dead-letters/replay", json!({})).await;
    assert!(r1["replayed"][0]["result"]
        .as_str()
        .unwrap()
        .contains("still names no job"));
    let (_, r2) = api
        .post("/v1/dead-letters/drop", json!({"ids": [letter]}))
        .await;
    assert_eq!(r2["dropped"], json!([letter]));
    let (_, r3) = api
        .post("/v1/dead-letters/drop", json!({"ids": [letter]}))
        .await;
    assert_eq!(r3, json!({"dropped": [], "not_found": [letter]}));
    for blank in ["", "  "] {
        let (s, body) = api
            .post("/v1/dead-letters/drop", json!({"ids": [blank]}))
            .await;
        assert_eq!(
            (s.as_u16(), &body["error"]["code"]),
            (422, &json!("invalid_field"))
        );
    }
    let (s, _) = api.post("/v1/dead-letters/drop", json!({"ids": []})).await;
    assert_eq!(s, 422);
}

/// The audit log: every operator write, newest first, who and which request.
async fn the_audit_log_holds_every_operator_write(api: &Api) {
    let (_, audit) = api.get("/v1/audit?limit=2", OPERATOR).await;
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries[0]["action"], "drop_dead_letters");
    assert_eq!(entries[0]["actor"], "api:operator");
    assert!(entries[0]["request_id"]
        .as_str()
        .unwrap()
        .starts_with("req_"));
    let before = audit["next_after"].as_str().unwrap();
    let (_, rest) = api
        .get(&format!("/v1/audit?after={before}"), OPERATOR)
        .await;
    let actions: Vec<&str> = rest["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "replay_dead_letters",
            "replay_event",
            "replay_event",
            "replay_event",
            "replay_event"
        ]
    );
}

/// A method no route takes is 405 in the error envelope, with `Allow`, whatever its body:
/// never the 415 of a write without a JSON type.
async fn methods_no_route_takes_are_405(api: &Api) {
    for method in [
        reqwest::Method::DELETE,
        reqwest::Method::PUT,
        reqwest::Method::PATCH,
    ] {
        let r = api
            .http
            .request(method.clone(), api.daemon.admin_url("/v1/jobs"))
            .bearer_auth(APP)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405, "{method}");
        assert_eq!(r.headers()["allow"], "POST,GET,HEAD", "{method}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "method_not_allowed", "{method}");
    }
}

/// A replay of an event that does not exist is a 404 and, as `sume-inbox replay` records it,
/// an audit log row saying it failed (it was answered and recorded nowhere).
#[tokio::test(flavor = "multi_thread")]
async fn a_replay_of_an_unknown_event_is_recorded_as_failed() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let (s, body) = api.post("/v1/events/evt_nobody/replay", json!({})).await;
    assert_eq!(s, 404, "{body}");
    assert_eq!(body["error"]["code"], "not_found");
    let row = db
        .client()
        .await
        .query_one("select action, detail from sume.audit_log", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "replay_event");
    let detail: serde_json::Value = row.get(1);
    assert_eq!(detail["event_id"], "evt_nobody");
    assert_eq!(detail["result"]["ok"], false);
    api.daemon.stop().await;
}

/// The 404 of a replay naming no event speaks the API's terms: it said "dead letters are
/// replayed with --dead-letters", a flag of the command, not of the API. An id longer than any
/// event's is answered the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_replay_of_an_unknown_event_says_so_in_the_apis_terms() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let long = format!("/v1/events/{}/replay", "e".repeat(600));
    for path in ["/v1/events/evt_nobody/replay", long.as_str()] {
        let (s, body) = api.post(path, json!({})).await;
        assert_eq!(s, 404, "{body}");
        assert_eq!(body["error"]["code"], "not_found");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(!message.contains("--"), "{message}");
        assert!(
            message.starts_with("no such event: no event is stored under this event_id"),
            "{message}"
        );
        assert!(
            message.contains("POST /v1/dead-letters/replay"),
            "{message}"
        );
    }
    api.daemon.stop().await;
}

/// `X-Actor` names who acts in the audit log: UTF-8 is kept, control characters left out, a
/// long one cut to 64 characters (marked), never dropped in silence.
#[tokio::test(flavor = "multi_thread")]
async fn the_actor_a_caller_names_is_kept_in_the_audit_log() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let long = "é".repeat(100);
    // Bidirectional overrides and isolates (U+202E, U+2066), and other format characters
    // (a zero-width space), are left out as control characters are: they reorder or hide
    // what the console and the CLI show around the name.
    let reordering = "ops\u{202E}toboen\u{2066}x\u{2069}\u{200B}";
    for actor in ["ops-bot é漢", long.as_str(), "a\tb", reordering] {
        let r = api
            .http
            .post(api.daemon.admin_url("/v1/dead-letters/drop"))
            .bearer_auth(OPERATOR)
            .header(
                "x-actor",
                reqwest::header::HeaderValue::from_bytes(actor.as_bytes()).unwrap(),
            )
            .json(&json!({"ids": ["sha256:nothing"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{actor}");
    }
    let actors: Vec<String> = db
        .client()
        .await
        .query("select actor from sume.audit_log order by id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let cut = format!("api:operator ({}…)", "é".repeat(64));
    assert_eq!(
        actors,
        vec![
            "api:operator (ops-bot é漢)",
            cut.as_str(),
            "api:operator (ab)",
            "api:operator (opstoboenx)"
        ]
    );
    api.daemon.stop().await;
}

/// Every body the API takes is a JSON object: an array (which serde read into the fields by
/// position: `["job_arr_1","order-arr",null]` registered a job), a string, a number, `null` or
/// a boolean is refused 422 `invalid_body` by every write, before anything is done.
#[tokio::test(flavor = "multi_thread")]
async fn a_json_body_that_is_no_object_is_refused_422_by_every_write() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let writes = [
        ("/v1/jobs", r#"["job_arr_1","order-arr",null]"#),
        ("/v1/dead-letters/replay", "[5]"),
        ("/v1/dead-letters/drop", r#"[["nope"]]"#),
        ("/v1/events/evt_x/replay", "[]"),
    ];
    for (path, positional) in writes {
        for body in [positional, r#" "text""#, "7", "null", "true"] {
            let r = api
                .http
                .post(api.daemon.admin_url(path))
                .bearer_auth(OPERATOR)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = r.status();
            let answer: Value = r.json().await.unwrap();
            assert_eq!(status, 422, "{path} {body}: {answer}");
            assert_eq!(answer["error"]["code"], "invalid_body", "{path} {body}");
            let message = answer["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("a JSON object"),
                "{path} {body}: {message}"
            );
        }
    }
    assert_eq!(job_state(&db, "job_arr_1").await, None);
    assert_eq!(db.scalar("select count(*) from sume.audit_log").await, 0);
    api.daemon.stop().await;
}

/// A write whose `Content-Length` is over 2 MiB is refused 413 `invalid_body` at once, its
/// connection closed, however little of its body has come: it was read until BODY_TIMEOUT
/// (408, 30 s by default) to be refused only once 2 MiB had come.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_declaring_more_than_2_mib_is_refused_413_at_once() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let admin = api.daemon.admin;
    let started = std::time::Instant::now();
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nhost: {admin}\r\nauthorization: Bearer {OPERATOR}\r\n\
         content-type: application/json\r\ncontent-length: 5000000\r\n\r\n{{"
    );
    let mut s = crate::port::open_with(admin, &head).await;
    let answer = crate::port::read_until_closed(&mut s, Duration::from_secs(20))
        .await
        .expect("answered, and the connection closed");
    assert!(started.elapsed() < Duration::from_secs(5), "{answer}");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 413"), "{answer}");
    assert!(head.contains("\r\nconnection: close"), "{answer}");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["error"]["code"], "invalid_body", "{body}");
    api.daemon.stop().await;
}

/// Sends `head` (a request without a body, `Connection: close` added) over a raw socket:
/// answers the status and the body read as JSON.
async fn raw(daemon: &Daemon, head: &str) -> (u16, Value) {
    let request = format!("{head}authorization: Bearer {OPERATOR}\r\nconnection: close\r\n\r\n");
    let mut s = crate::port::open_with(daemon.admin, &request).await;
    let answer = crate::port::read_until_closed(&mut s, Duration::from_secs(10))
        .await
        .expect("the admin port answers and closes");
    let status = answer
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {answer}"));
    let (_, body) = answer.split_once("\r\n\r\n").unwrap_or(("", ""));
    let body = serde_json::from_str(body).unwrap_or(Value::String(body.to_owned()));
    (status, body)
}

/// The Host check holds whatever form the request takes: the authority of an absolute-form
/// target stands for `Host` (RFC 9112, 3.2.2), so a foreign one is refused whatever `Host`
/// says, and a request with two `Host` headers is refused 400 in the envelope (RFC 9112, 3.2),
/// whichever comes first.
#[tokio::test(flavor = "multi_thread")]
async fn the_host_check_holds_for_an_absolute_target_and_two_host_headers() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let ours = api.daemon.admin.to_string();
    let port = api.daemon.admin.port();
    let cases = [
        (format!("GET /v1/stats HTTP/1.1\r\nhost: {ours}\r\n"), 200),
        (
            format!("GET http://evil.example/v1/stats HTTP/1.1\r\nhost: {ours}\r\n"),
            421,
        ),
        (
            format!("GET http://evil.example:{port}/v1/stats HTTP/1.1\r\nhost: {ours}\r\n"),
            421,
        ),
        (
            format!("GET http://{ours}/v1/stats HTTP/1.1\r\nhost: {ours}\r\n"),
            200,
        ),
        (
            format!("GET http://{ours}/v1/stats HTTP/1.1\r\nhost: evil.example:{port}\r\n"),
            200,
        ),
        (
            format!("GET /v1/stats HTTP/1.1\r\nhost: {ours}\r\nhost: evil.example\r\n"),
            400,
        ),
        (
            format!("GET /v1/stats HTTP/1.1\r\nhost: evil.example\r\nhost: {ours}\r\n"),
            400,
        ),
        (
            format!("GET /v1/stats HTTP/1.1\r\nhost: {ours}\r\nhost: {ours}\r\n"),
            400,
        ),
    ];
    for (head, expected) in cases {
        let (status, body) = raw(&api.daemon, &head).await;
        assert_eq!(status, expected, "{head}{body}");
        let code = match expected {
            421 => "unknown_host",
            400 => "invalid_host",
            _ => continue,
        };
        assert_eq!(body["error"]["code"], code, "{head}{body}");
        assert!(
            body["request_id"].as_str().is_some_and(|id| !id.is_empty()),
            "{body}"
        );
    }
    api.daemon.stop().await;
}

/// Every route refuses a query parameter it does not take, naming it (a misspelt `wait` is not
/// a read that waits for nothing), but `/metrics`, whose scrapers may add their own; and the
/// orphans' list refuses an `after` not of its form (a job id, as it once paged), its pages
/// still following on.
#[tokio::test(flavor = "multi_thread")]
async fn a_query_parameter_a_route_does_not_take_is_refused_naming_it() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let gets = [
        "/v1/jobs/job_x?foo=1",
        "/v1/jobs?unknown=1",
        "/v1/jobs/job_x/detail?wait=1s",
        "/v1/stats?x=1",
        "/v1/instances?x=1",
        "/v1/openapi.json?x=1",
        "/v1/inbox?x=1",
        "/v1/orphans?x=1",
        "/v1/audit?x=1",
    ];
    for path in gets {
        let (s, body) = api.get(path, OPERATOR).await;
        let name = path.split_once('?').unwrap().1.split('=').next().unwrap();
        assert_eq!(s, 400, "{path}: {body}");
        assert_eq!(body["error"]["code"], "invalid_query", "{path}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`{name}`")), "{path}: {message}");
    }
    for (path, body) in [
        ("/v1/jobs?x=1", json!({"job_id": "job_q"})),
        ("/v1/events/evt_x/replay?x=1", json!({})),
        ("/v1/dead-letters/replay?x=1", json!({})),
        ("/v1/dead-letters/drop?x=1", json!({"ids": ["dl_x"]})),
    ] {
        let (s, answer) = api.post(path, body).await;
        assert_eq!(s, 400, "{path}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_query", "{path}");
    }
    assert_eq!(job_state(&db, "job_q").await, None);
    assert_eq!(db.scalar("select count(*) from sume.audit_log").await, 0);
    let (s, _) = api.get("/metrics?x=1", OPERATOR).await;
    assert_eq!(s, 200);
    let (s, _) = api.get("/v1/stats?", OPERATOR).await;
    assert_eq!(s, 200);
    orphans_are_paged_by_the_key_of_their_check(&api, &db).await;
    api.daemon.stop().await;
}

async fn orphans_are_paged_by_the_key_of_their_check(api: &Api, db: &TestDb) {
    db.client()
        .await
        .batch_execute(
            "insert into sume.inbox_checks (job_id, verdict, created_at)
             values ('job_o3', 'orphan', now() - interval '1 minute'),
                    ('job_o1', 'orphan', now() - interval '3 minutes'),
                    ('job_o2', 'orphan', now() - interval '2 minutes')",
        )
        .await
        .unwrap();
    for after in ["junk", "job_o1", "2026-01-01T00:00:00Z"] {
        let (s, body) = api
            .get(&format!("/v1/orphans?after={after}"), OPERATOR)
            .await;
        assert_eq!(s, 400, "after={after}: {body}");
        assert_eq!(body["error"]["code"], "invalid_query");
    }
    let mut seen = Vec::new();
    let mut path = "/v1/orphans?limit=2".to_owned();
    loop {
        let (s, page) = api.get(&path, OPERATOR).await;
        assert_eq!(s, 200, "{path}: {page}");
        for o in page["orphans"].as_array().unwrap() {
            seen.push(o["job_id"].as_str().unwrap().to_owned());
        }
        let Some(after) = page["next_after"].as_str() else {
            break;
        };
        let after: String = url::form_urlencoded::byte_serialize(after.as_bytes()).collect();
        path = format!("/v1/orphans?limit=2&after={after}");
    }
    assert_eq!(seen, ["job_o1", "job_o2", "job_o3"]);
}

/// A write whose body starts with a UTF-8 byte order mark (a file saved by an editor that
/// writes one, sent with `curl -d @file`) was refused 400 "expected value at line 1 column 1";
/// the mark is passed over, as RFC 8259 allows, and what follows is read as ever.
#[tokio::test(flavor = "multi_thread")]
async fn a_byte_order_mark_before_a_writes_json_is_passed_over() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let send = |body: Vec<u8>| {
        api.http
            .post(api.daemon.admin_url("/v1/jobs"))
            .bearer_auth(APP)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let mut body = b"\xEF\xBB\xBF".to_vec();
    body.extend_from_slice(br#"{"job_id":"job_bom"}"#);
    let r = send(body).await.unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(job_state(&db, "job_bom").await.as_deref(), Some("open"));
    // Only the mark: what follows must still be an object.
    let mut body = b"\xEF\xBB\xBF".to_vec();
    body.extend_from_slice(br#"["job_bom2"]"#);
    let r = send(body).await.unwrap();
    assert_eq!(r.status(), 422);
    assert_eq!(job_state(&db, "job_bom2").await, None);
    api.daemon.stop().await;
}

/// `{"ids":["dl_a","dl_a"]}` listed `dl_a` twice in `not_found` and in the audit entry: an id
/// named twice is dropped once and said once, in the order first named.
#[tokio::test(flavor = "multi_thread")]
async fn an_id_named_twice_in_a_drop_is_said_once() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let (s, body) = api
        .post(
            "/v1/dead-letters/drop",
            json!({"ids": ["dl_a", "dl_b", "dl_a"]}),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body, json!({"dropped": [], "not_found": ["dl_a", "dl_b"]}));
    let (_, audit) = api.get("/v1/audit?limit=1", OPERATOR).await;
    assert_eq!(
        audit["entries"][0]["detail"]["not_found"],
        json!(["dl_a", "dl_b"]),
        "{audit}"
    );
}

/// `dead-letters drop` of a 20,000-byte id through the API kept the whole id in
/// `sume.audit_log`: no dead letter's id is longer than an event's longest (511 bytes), so one
/// longer than that in characters (the document's count) is refused before anything is
/// recorded, and the longest still reads.
#[tokio::test(flavor = "multi_thread")]
async fn an_id_longer_than_any_dead_letters_is_refused_before_it_is_recorded() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let long = "x".repeat(20_000);
    let (s, body) = api
        .post("/v1/dead-letters/drop", json!({"ids": ["dl_x", long]}))
        .await;
    assert_eq!(s, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid_field");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("at most 511 characters"), "{message}");
    assert_eq!(db.scalar("select count(*) from sume.audit_log").await, 0);
    let longest = "x".repeat(sume_wire::event::MAX_EVENT_ID_LEN);
    let (s, body) = api
        .post("/v1/dead-letters/drop", json!({"ids": [longest]}))
        .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["not_found"][0].as_str().map(str::len), Some(511));
    let long_event = format!("/v1/events/{}/replay", "e".repeat(600));
    let (s, body) = api.post(&long_event, json!({})).await;
    assert_eq!(
        (s.as_u16(), &body["error"]["code"]),
        (404, &json!("not_found"))
    );
    api.daemon.stop().await;
}

/// An `after` is a position in its list's order, and only its form is checked, as README's
/// "Paging" says (it said an `after` no page answered was refused, which no list did): one not
/// of its list's form is 400 naming the form, in the answer and in the document; a well-formed
/// one answers the rows after it, whether or not a page ended there.
#[tokio::test(flavor = "multi_thread")]
async fn an_after_is_checked_for_its_lists_form_and_read_as_a_position() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let time_key = "`<RFC 3339 time>|<id>`";
    for (list, malformed, form) in [
        ("/v1/inbox", "42", time_key),
        ("/v1/set-aside", "job_x", time_key),
        ("/v1/orphans", "2026-01-01T00:00:00Z", time_key),
        ("/v1/dead-letters", "7", time_key),
        (
            "/v1/disagreements",
            "2026-01-01T00:00:00Z|x",
            "a whole number",
        ),
        ("/v1/audit", "job_x", "a whole number"),
    ] {
        let (s, body) = api
            .get(&format!("{list}?after={malformed}"), OPERATOR)
            .await;
        assert_eq!(s, 400, "{list}: {body}");
        assert_eq!(body["error"]["code"], "invalid_query", "{list}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(form), "{list}: {message}");
    }
    for (list, position) in [
        ("/v1/jobs", "garbage"),
        ("/v1/dead-letters", "2026-01-01T00:00:00Z|dl_never"),
        ("/v1/audit", "123456"),
    ] {
        let (s, body) = api.get(&format!("{list}?after={position}"), OPERATOR).await;
        assert_eq!(s, 200, "{list}: {body}");
    }
    let (_, doc) = api.get("/v1/openapi.json", OPERATOR).await;
    for (list, form) in [
        ("/v1/inbox", time_key),
        ("/v1/dead-letters", time_key),
        ("/v1/audit", "a whole number"),
        ("/v1/jobs", "a job id"),
    ] {
        let params = doc["paths"][list]["get"]["parameters"].as_array().unwrap();
        let after = params.iter().find(|p| p["name"] == "after").unwrap();
        let description = after["description"].as_str().unwrap();
        assert!(description.contains(form), "{list}: {description}");
        assert!(description.contains("Only its form is checked") || list == "/v1/jobs");
    }
    api.daemon.stop().await;
}

/// An empty `after` (what a client writing its URL from a template sends before it has a
/// position) is the start, as no `after` is, on every list: it was refused 400 on every list
/// but `/v1/jobs`, though the document allowed it.
#[tokio::test(flavor = "multi_thread")]
async fn an_empty_after_is_the_start_on_every_list() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    db.client()
        .await
        .batch_execute(
            "insert into sume.jobs (job_id) values ('job_e1'), ('job_e2');
             insert into sume.disagreements (job_id, kept_state, seen_state, seen_status, source)
             values ('job_e1', 'completed', 'failed', 'failed', 'poll');
             insert into sume.inbox_checks (job_id, verdict) values ('job_eo', 'orphan');",
        )
        .await
        .unwrap();
    api.post("/v1/dead-letters/drop", json!({"ids": ["dl_e"]}))
        .await;
    let rows = |page: &Value| {
        let rows = page.as_object().unwrap().values().find(|v| v.is_array());
        rows.unwrap().as_array().unwrap().len()
    };
    for list in [
        "/v1/jobs",
        "/v1/inbox",
        "/v1/set-aside",
        "/v1/orphans",
        "/v1/dead-letters",
        "/v1/disagreements",
        "/v1/audit",
    ] {
        let (s, from_start) = api.get(&format!("{list}?limit=3"), OPERATOR).await;
        assert_eq!(s, 200, "{list}: {from_start}");
        let (s, empty) = api.get(&format!("{list}?limit=3&after="), OPERATOR).await;
        assert_eq!(s, 200, "{list}?after=: {empty}");
        assert_eq!(rows(&empty), rows(&from_start), "{list}?after=: {empty}");
        assert_eq!(empty["next_after"], from_start["next_after"], "{list}");
    }
    for list in ["/v1/jobs", "/v1/orphans", "/v1/disagreements", "/v1/audit"] {
        let (_, page) = api.get(&format!("{list}?after="), OPERATOR).await;
        assert!(rows(&page) > 0, "{list}?after=: {page}");
    }
    api.daemon.stop().await;
}

/// A 401 says the scheme it wants (`WWW-Authenticate`, which RFC 9110 requires of it), and that
/// the token sent was refused when one was; a request carrying two `Authorization` headers is
/// refused whichever holds the token, as a proxy in front may have read, or added, the other.
#[tokio::test(flavor = "multi_thread")]
async fn a_401_says_bearer_and_two_authorization_headers_are_refused() {
    let db = TestDb::new().await;
    let api = Api::start(&db).await;
    let send = |auth: Vec<String>| {
        let mut req = api.http.get(api.daemon.admin_url("/v1/stats"));
        for a in auth {
            req = req.header("authorization", a);
        }
        async move {
            let r = req.send().await.unwrap();
            let challenge = r
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_owned());
            let body: Value = r.json().await.unwrap_or(Value::Null);
            (body, challenge)
        }
    };
    let (body, challenge) = send(vec![]).await;
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    assert_eq!(challenge.as_deref(), Some(r#"Bearer realm="sume-inbox""#));
    let (body, challenge) = send(vec!["Bearer wrong".into()]).await;
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    assert_eq!(
        challenge.as_deref(),
        Some(r#"Bearer realm="sume-inbox", error="invalid_token""#)
    );
    let right = format!("Bearer {OPERATOR}");
    for two in [
        vec![right.clone(), "Bearer wrong".into()],
        vec!["Bearer wrong".into(), right.clone()],
        vec![right.clone(), right.clone()],
    ] {
        let (body, challenge) = send(two.clone()).await;
        assert_eq!(body["error"]["code"], "unauthorized", "{two:?}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains("carries 2"), "{two:?}: {message}");
        assert!(challenge.is_some(), "{two:?}");
    }
    let (body, challenge) = send(vec![right]).await;
    assert!(body["open_jobs"].is_number(), "{body}");
    assert_eq!(challenge, None);
    api.daemon.stop().await;
}

/// Bound to a wildcard address with ADMIN_HOSTS naming the proxy's name, the instance still
/// answers its own addresses on its port (README: the names "besides its own address"): a
/// scraper reaching it by IP, the CLI on `127.0.0.1` or `localhost`; another name, or its
/// address on another port, is still refused 421.
#[tokio::test(flavor = "multi_thread")]
async fn on_a_wildcard_address_admin_hosts_adds_names_and_its_own_addresses_still_answer() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.admin_addr = "0.0.0.0:0".parse().unwrap();
    c.admin_token = Some(sume_wire::Secret::new(OPERATOR));
    c.admin_hosts = vec!["admin.internal".into()];
    let daemon = Daemon::start(c).await;
    let port = daemon.admin.port();
    let http = reqwest::Client::new();
    for (host, want) in [
        (format!("127.0.0.1:{port}"), 200),
        (format!("localhost:{port}"), 200),
        (format!("[::1]:{port}"), 200),
        (format!("10.1.2.3:{port}"), 200),
        ("admin.internal".to_owned(), 200),
        (format!("admin.internal:{port}"), 200),
        (format!("evil.example:{port}"), 421),
        (format!("127.0.0.1:{}", port.wrapping_add(1)), 421),
    ] {
        let r = http
            .get(format!("http://127.0.0.1:{port}/v1/stats"))
            .header("host", &host)
            .bearer_auth(OPERATOR)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want, "{host}");
    }
    daemon.stop().await;
}
