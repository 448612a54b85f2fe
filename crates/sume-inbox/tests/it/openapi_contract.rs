//! The OpenAPI document as tools outside the project read it: the served document passes the
//! reference validator (PyPI's `openapi-spec-validator`, from `scripts/openapi-tools`), and
//! every answer it documents, for every route, is produced by a running daemon and validated
//! against it by an independent JSON Schema validator ([`openapi_check`]): the successes, the
//! replay and drop routes, and the errors (a bad query or body, a query parameter the route
//! does not take, no token, the application's token on an operator route, a foreign Host or two
//! Host headers, a write that is not JSON, a POST carrying Sume's signature, a method the path
//! does not take, a body that stalls, a database that cannot answer, a wait beyond
//! MAX_WAITERS); an answer that sends a header a
//! client acts on (`Retry-After`, `Allow`, `X-Wait-Outcome`) must declare it.
//!
//! [`openapi_check`]: crate::openapi_check

use std::process::Command;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::openapi_check::Document;
use crate::support::*;

pub const OPERATOR: &str = "operator-token-0123456789";
pub const APP: &str = "application-token-0123456789";

/// A daemon with both tokens, and its served document.
pub struct Served {
    pub http: reqwest::Client,
    pub daemon: Daemon,
    pub doc: Value,
}

impl Served {
    pub async fn start(db: &TestDb) -> Served {
        Served::start_with(config(&db.url)).await
    }

    /// As [`Served::start`], with `c` (the tokens set here).
    pub async fn start_with(mut c: sume_inbox::config::Config) -> Served {
        c.admin_token = Some(sume_wire::Secret::new(OPERATOR));
        c.admin_app_token = Some(sume_wire::Secret::new(APP));
        let daemon = Daemon::start(c).await;
        let http = reqwest::Client::new();
        let r = http
            .get(daemon.admin_url("/v1/openapi.json"))
            .bearer_auth(APP)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let doc: Value = r.json().await.unwrap();
        Served { http, daemon, doc }
    }

    /// Writes the document under target/ for the outside tools; answers its path (`name` is
    /// the test's own, so tests running at once write apart).
    pub fn write_doc(&self, name: &str) -> std::path::PathBuf {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("openapi");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_vec_pretty(&self.doc).unwrap()).unwrap();
        path
    }
}

/// Runs `openapi-spec-validator` on `path`: (passed, what it printed).
fn reference_validator(path: &std::path::Path) -> (bool, String) {
    let tools = openapi_tools();
    let out = Command::new(tools.join("venv/bin/openapi-spec-validator"))
        .args(["--validation-errors", "all"])
        .arg(path)
        .output()
        .expect("run openapi-spec-validator");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_served_document_passes_the_reference_validator() {
    let db = TestDb::new().await;
    let served = Served::start(&db).await;
    let path = served.write_doc("served");
    let (ok, text) = reference_validator(&path);
    assert!(ok && text.trim_end().ends_with("OK"), "{text}");
    // The validator does read it: a query parameter declared in the path, as the document
    // once did, is refused.
    let mut broken = served.doc.clone();
    broken["paths"]["/v1/jobs/{job_id}"]["get"]["parameters"][1]["in"] = json!("path");
    std::fs::write(&path, serde_json::to_vec(&broken).unwrap()).unwrap();
    let (ok, text) = reference_validator(&path);
    assert!(!ok && text.contains("'wait'"), "{text}");
    served.daemon.stop().await;
}

/// Requests whose answers are checked against the document as they come.
pub(crate) struct Checked<'a> {
    pub(crate) served: &'a Served,
    pub(crate) doc: &'a Document,
}

/// A request: the method, the path, the token, the body and the content type it is sent as.
pub(crate) struct Call<'a> {
    method: Method,
    path: &'a str,
    token: Option<&'a str>,
    body: Option<(&'a str, String)>,
    /// `Host` headers sent in its place (each one a header).
    hosts: Vec<String>,
    /// Other headers sent with it.
    headers: Vec<(&'static str, &'static str)>,
}

impl<'a> Call<'a> {
    pub(crate) fn new(method: &str, path: &'a str, token: Option<&'a str>) -> Call<'a> {
        Call {
            method: method.to_ascii_uppercase().parse().unwrap(),
            path,
            token,
            body: None,
            hosts: Vec::new(),
            headers: Vec::new(),
        }
    }

    pub(crate) fn json(mut self, body: Value) -> Self {
        self.body = Some(("application/json", body.to_string()));
        self
    }

    fn raw(mut self, content_type: &'a str, body: &str) -> Self {
        self.body = Some((content_type, body.to_owned()));
        self
    }
}

impl Checked<'_> {
    /// Sends `call`, checks the answer against the document (panics naming what differs) and
    /// answers its status and body.
    async fn send(&self, call: Call<'_>) -> (u16, Value) {
        let daemon = &self.served.daemon;
        let mut req = self
            .served
            .http
            .request(call.method.clone(), daemon.admin_url(call.path));
        if let Some(t) = call.token {
            req = req.bearer_auth(t);
        }
        if let Some((content_type, body)) = call.body {
            if body.len() > 1 << 20 {
                // Answered before it is read, on a connection then closed: not reused.
                req = req.header("connection", "close");
            }
            req = req.header("content-type", content_type).body(body);
        }
        for host in call.hosts {
            req = req.header("host", host);
        }
        for (name, value) in call.headers {
            req = req.header(name, value);
        }
        let what = format!("{} {}", call.method, call.path);
        let r = req.send().await.unwrap_or_else(|e| panic!("{what}: {e:?}"));
        let status = r.status().as_u16();
        let content_type = r.headers()["content-type"].to_str().unwrap().to_owned();
        let sent: Vec<&str> = DECLARED_WHEN_SENT
            .into_iter()
            .filter(|h| r.headers().contains_key(*h))
            .collect();
        let text = r.text().await.unwrap_or_else(|e| panic!("{what}: {e:?}"));
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        let method = call.method.as_str().to_ascii_lowercase();
        let route = call.path.split('?').next().unwrap();
        self.doc
            .check(&method, route, status, &content_type, &body)
            .unwrap_or_else(|e| panic!("{method} {} ({status}): {e}\n{body:#}", call.path));
        let declared = self.doc.headers(&method, route, status);
        for header in sent {
            assert!(
                declared.iter().any(|d| d == header),
                "{method} {} ({status}) sends {header}, which the document does not declare",
                call.path
            );
        }
        (status, body)
    }

    /// A body over the limit is answered 413 before it is read; the connection reads what
    /// still comes before it closes, so the client reads the answer (the document's error
    /// envelope, checked as any answer).
    async fn expect_too_large(&self, method: &str, path: &str, token: Option<&'static str>) {
        let huge = format!("{{\"pad\":\"{}\"}}", "x".repeat(3 << 20));
        let call = Call::new(method, path, token).raw("application/json", &huge);
        let body = self.expect(413, call).await;
        assert_eq!(body["error"]["code"], "invalid_body", "{method} {path}");
    }

    pub(crate) async fn expect(&self, status: u16, call: Call<'_>) -> Value {
        let what = format!("{} {}", call.method, call.path);
        let (s, body) = self.send(call).await;
        assert_eq!(s, status, "{what}: {body}");
        body
    }
}

/// The headers a client acts on: an answer that sends one must declare it.
const DECLARED_WHEN_SENT: [&str; 3] = ["retry-after", "allow", "x-wait-outcome"];

/// A path of the document's `template` with its parameters filled in.
fn instantiate(template: &str) -> String {
    template
        .replace("{job_id}", "job_a")
        .replace("{event_id}", "evt_nobody")
}

/// A raced job closed by its webhook, one still open, a waiting event, two set-aside ones, an
/// orphan, a disagreement, a poll, a dead letter the daemon cannot read and one that a newer
/// reader understands; and the instance's first heartbeat.
pub(crate) async fn seed(db: &TestDb, served: &Served) -> String {
    let c = db.client().await;
    c.batch_execute(
        "insert into sume.jobs (job_id, order_id) values ('job_a', 'o-a'), ('job_b', null),
             ('job_from_dead', 'o-d');
         insert into sume.disagreements (job_id, kept_state, seen_state, seen_status, source)
         values ('job_a', 'completed', 'failed', 'failed', 'poll');
         insert into sume.inbox_checks (job_id, verdict, answers, checked_at)
         values ('job_orphan', 'orphan', '{\"main\": \"200 running\"}', now());
         insert into sume.job_polls (job_id, slot, seq, polled_at, key_name, answer, latency_ms)
         values ('job_a', 1, 1, now(), 'main', '200 running', 12);",
    )
    .await
    .unwrap();
    let hook = served.daemon.url("/webhooks/sume");
    for d in [
        Delivery::completed("job_a"),
        Delivery::completed("job_waiting"),
        Delivery::status("job_aside", "failed"),
        Delivery::status("job_aside_too", "failed"),
    ] {
        assert_eq!(d.send(&served.http, &hook).await.status(), 204);
    }
    let mut garbage = Delivery::completed("x");
    garbage.body = "not json".into();
    garbage.event_id = None;
    garbage.send(&served.http, &hook).await;
    c.execute(
        "update sume.events set set_aside_at = now(), set_aside_reason = 'foreign'
         where job_id in ('job_aside', 'job_aside_too')",
        &[],
    )
    .await
    .unwrap();
    readable_dead_letter(db, "dl_readable", "job_from_dead").await;
    wait_for("job_a closed", Duration::from_secs(10), || async {
        job_state(db, "job_a").await.as_deref() == Some("completed")
    })
    .await;
    crate::fleet::first_heartbeat(db).await;
    let event: String = c
        .query_one(
            "select event_id from sume.events where job_id = 'job_aside'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    event
}

/// The errors every route can give before its handler runs: no token, a foreign Host, two
/// Host headers, the application's token on an operator route, and for a write a body that is not JSON or not
/// sent as JSON.
async fn errors_before_the_handler(checked: &Checked<'_>) {
    let foreign = format!("rebound.example:{}", checked.served.daemon.admin.port());
    let ours = checked.served.daemon.admin.to_string();
    for (method, template) in checked.doc.operations() {
        let path = instantiate(&template);
        let operator_only = checked.served.doc["paths"][&template][&method]["security"]
            == json!([{"operator": []}]);
        let write = method == "post";
        let call = || {
            let c = Call::new(&method, &path, Some(APP));
            if write {
                c.json(json!({}))
            } else {
                c
            }
        };
        checked
            .expect(
                401,
                Call {
                    token: None,
                    ..call()
                },
            )
            .await;
        let token = Some(OPERATOR);
        let hosts = vec![foreign.clone()];
        checked
            .expect(
                421,
                Call {
                    token,
                    hosts,
                    ..call()
                },
            )
            .await;
        let hosts = vec![ours.clone(), foreign.clone()];
        let body = checked
            .expect(
                400,
                Call {
                    token,
                    hosts,
                    ..call()
                },
            )
            .await;
        assert_eq!(body["error"]["code"], "invalid_host");
        if operator_only {
            let body = checked.expect(403, call()).await;
            assert_eq!(body["error"]["code"], "forbidden");
        }
        if write {
            let form = Call::new(&method, &path, token).raw("text/plain", "{}");
            checked.expect(415, form).await;
            let torn = Call::new(&method, &path, token).raw("application/json", "not json");
            checked.expect(400, torn).await;
            checked.expect_too_large(&method, &path, token).await;
            // A webhook sent to the admin port, refused before the route (it was undocumented).
            let headers = vec![(sume_wire::headers::SIGNATURE, "t=1,v1=00")];
            let signed = Call { headers, ..call() };
            let body = checked.expect(404, signed).await;
            assert_eq!(body["error"]["code"], "not_found");
        }
    }
}

/// A query parameter a route does not take: 400 `invalid_query` naming it, on every route but
/// `/metrics` (a scraper's own parameters are let through).
async fn unknown_query_parameters(checked: &Checked<'_>) {
    for (method, template) in checked.doc.operations() {
        let path = format!("{}?not_a_parameter=1", instantiate(&template));
        let mut call = Call::new(&method, &path, Some(OPERATOR));
        if method == "post" {
            call = call.json(json!({}));
        }
        if template == "/metrics" {
            checked.expect(200, call).await;
            continue;
        }
        let body = checked.expect(400, call).await;
        assert_eq!(body["error"]["code"], "invalid_query", "{method} {path}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("not_a_parameter"),
            "{method} {path}: {message}"
        );
    }
}

/// A method no route of a path takes (`DELETE`, on every path): 405 `method_not_allowed`,
/// its `Allow` naming the methods the document gives the path (and `HEAD` beside `GET`), the
/// answer checked as each of those methods' 405.
async fn other_methods(checked: &Checked<'_>) {
    let mut paths = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (method, template) in checked.doc.operations() {
        paths.entry(template).or_default().push(method);
    }
    for (template, methods) in paths {
        let path = instantiate(&template);
        let r = checked
            .served
            .http
            .delete(checked.served.daemon.admin_url(&path))
            .bearer_auth(OPERATOR)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let allow = r
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_owned());
        let content_type = r.headers()["content-type"].to_str().unwrap().to_owned();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, 405, "DELETE {path}: {body}");
        assert_eq!(body["error"]["code"], "method_not_allowed", "{path}");
        let mut expected: Vec<String> = methods.iter().map(|m| m.to_ascii_uppercase()).collect();
        if methods.iter().any(|m| m == "get") {
            expected.push("HEAD".into());
        }
        expected.sort();
        let mut allowed: Vec<String> = allow
            .unwrap_or_default()
            .split(',')
            .map(|m| m.trim().to_owned())
            .collect();
        allowed.sort();
        assert_eq!(allowed, expected, "Allow of {path}");
        for method in &methods {
            assert_eq!(
                checked.doc.headers(method, &path, 405),
                ["allow"],
                "{method} {path}"
            );
            checked
                .doc
                .check(method, &path, status, &content_type, &body)
                .unwrap_or_else(|e| panic!("DELETE {path} as {method}'s 405: {e}\n{body:#}"));
        }
    }
}

/// BODY_TIMEOUT of the daemon whose answers are checked: a stalled body is answered after it.
const STALL: Duration = Duration::from_secs(2);

/// A write whose body stalls (sent in part, over a raw socket), on every route that takes a
/// body, all at once: 408 `body_timeout` after BODY_TIMEOUT, the connection closed.
async fn stalled_bodies(checked: &Checked<'_>) {
    let admin = checked.served.daemon.admin;
    let writes: Vec<String> = checked
        .doc
        .operations()
        .into_iter()
        .filter(|(method, template)| {
            !checked.served.doc["paths"][template][method]["requestBody"].is_null()
        })
        .map(|(_, template)| instantiate(&template))
        .collect();
    assert!(writes.len() >= 4, "{writes:?}");
    let stalled = writes.iter().map(|path| async move {
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {admin}\r\nauthorization: Bearer {OPERATOR}\r\n\
             content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"a\":"
        );
        let mut s = crate::port::open_with(admin, &head).await;
        let answer = crate::port::read_until_closed(&mut s, STALL * 10).await;
        (
            path,
            answer.expect("a stalled body keeps its connection open"),
        )
    });
    for (path, answer) in futures_util::future::join_all(stalled).await {
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 408"), "{path}: {answer}");
        assert!(head.contains("\r\nconnection: close"), "{path}: {answer}");
        let content_type = head
            .lines()
            .find_map(|l| l.strip_prefix("content-type:"))
            .unwrap_or("")
            .trim();
        let body: Value = serde_json::from_str(body).unwrap_or(Value::String(body.into()));
        assert_eq!(body["error"]["code"], "body_timeout", "{path}");
        assert_eq!(checked.doc.headers("post", path, 408), ["connection"]);
        checked
            .doc
            .check("post", path, 408, content_type, &body)
            .unwrap_or_else(|e| panic!("POST {path} (408): {e}\n{body:#}"));
    }
}

/// Every application route, its successes and its own errors.
async fn application_routes(checked: &Checked<'_>) {
    let post = |body: Value| Call::new("POST", "/v1/jobs", Some(APP)).json(body);
    checked
        .expect(201, post(json!({"job_id": "job_new"})))
        .await;
    checked
        .expect(200, post(json!({"job_id": "job_new"})))
        .await;
    let conflict = json!({"job_id": "job_a", "order_id": "other"});
    let body = checked.expect(409, post(conflict)).await;
    assert_eq!(body["job"]["order_id"], "o-a");
    checked.expect(422, post(json!({"job_id": ""}))).await;
    for (status, path) in [
        (200, "/v1/jobs/job_a"),
        (200, "/v1/jobs/job_b?wait=10ms"),
        (404, "/v1/jobs/job_nobody"),
        (400, "/v1/jobs/job_a?wait=soon"),
        (400, "/v1/jobs?state=nope"),
        (200, "/v1/openapi.json"),
    ] {
        checked
            .expect(status, Call::new("GET", path, Some(APP)))
            .await;
    }
    let list = checked
        .expect(200, Call::new("GET", "/v1/jobs?limit=1", Some(APP)))
        .await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1);
    // The feed answers only closes below every open transaction of the cluster (other tests'
    // included), so the close may take a moment to show there.
    let feed = || async {
        checked
            .expect(200, Call::new("GET", "/v1/closes", Some(APP)))
            .await
    };
    wait_for("the close in the feed", Duration::from_secs(20), || async {
        feed().await["closes"][0]["job_id"] == "job_a"
    })
    .await;
    let reserved = Call::new("GET", "/v1/closes?after=0-5", Some(APP));
    checked.expect(400, reserved).await;
    let ahead = Call::new("GET", "/v1/closes?after=999999999999-0", Some(APP));
    let body = checked.expect(409, ahead).await;
    assert_eq!(body["error"]["code"], "cursor_ahead");
}

/// Every operator route, its successes and its own errors; `event` is a set-aside event.
async fn operator_routes(checked: &Checked<'_>, event: &str) {
    let op = Some(OPERATOR);
    let replay = format!("/v1/events/{}/replay", event.replace('/', "%2F"));
    let body = checked
        .expect(200, Call::new("POST", &replay, op).json(json!({})))
        .await;
    assert!(body["result"]
        .as_str()
        .unwrap()
        .contains("back in the inbox"));
    let nobody = Call::new("POST", "/v1/events/evt_nobody/replay", op).json(json!({}));
    checked.expect(404, nobody).await;
    let unknown = Call::new("POST", &replay, op).json(json!({"what": 1}));
    checked.expect(422, unknown).await;
    let replay_all = |body: Value| Call::new("POST", "/v1/dead-letters/replay", op).json(body);
    let body = checked.expect(200, replay_all(json!({"limit": 10}))).await;
    assert_eq!(body["replayed"].as_array().unwrap().len(), 2, "{body}");
    checked.expect(422, replay_all(json!({"limit": 0}))).await;
    for path in [
        "/v1/inbox",
        "/v1/set-aside",
        "/v1/orphans",
        "/v1/disagreements",
        "/v1/dead-letters",
        "/v1/audit",
    ] {
        let page = checked.expect(200, Call::new("GET", path, op)).await;
        let rows = page.as_object().unwrap().values().find(|v| v.is_array());
        assert!(
            !rows.unwrap().as_array().unwrap().is_empty(),
            "{path}: {page}"
        );
        let bad = format!("{path}?limit=0");
        checked.expect(400, Call::new("GET", &bad, op)).await;
    }
    for path in [
        "/v1/stats",
        "/v1/instances",
        "/metrics",
        "/v1/jobs/job_a/detail",
    ] {
        checked.expect(200, Call::new("GET", path, op)).await;
    }
    checked
        .expect(404, Call::new("GET", "/v1/jobs/job_nobody/detail", op))
        .await;
    let letters = checked
        .expect(200, Call::new("GET", "/v1/dead-letters", op))
        .await;
    let id = letters["dead_letters"][0]["dead_letter_id"].clone();
    let drop = |body: Value| Call::new("POST", "/v1/dead-letters/drop", op).json(body);
    let body = checked.expect(200, drop(json!({"ids": [id]}))).await;
    assert_eq!(body["dropped"], json!([id]));
    checked.expect(422, drop(json!({"ids": []}))).await;
}

/// With its database gone (a cluster of its own, stopped at once), every route of a daemon
/// that reads the database answers 503.
async fn database_unavailable(doc: &Document) {
    let cluster = PrivateCluster::start("openapi-outage");
    let db = TestDb::on_server(&cluster.url).await;
    let served = Served::start(&db).await;
    let checked = Checked {
        served: &served,
        doc,
    };
    cluster.kill();
    for (method, template) in doc.operations() {
        let documented = &served.doc["paths"][&template][&method]["responses"]["503"];
        if documented.is_null() {
            continue;
        }
        let path = instantiate(&template);
        let mut call = Call::new(&method, &path, Some(OPERATOR));
        if method == "post" {
            call = call.json(match template.as_str() {
                "/v1/jobs" => json!({"job_id": "job_during_outage"}),
                "/v1/dead-letters/drop" => json!({"ids": ["dl_x"]}),
                _ => json!({}),
            });
        }
        let body = checked.expect(503, call).await;
        assert_eq!(body["error"]["code"], "unavailable", "{method} {path}");
    }
    served.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_documented_answer_of_every_route_is_given_as_documented() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.port.body_timeout = STALL;
    let served = Served::start_with(c).await;
    let event = seed(&db, &served).await;
    let doc = Document::new(served.doc.clone());
    let checked = Checked {
        served: &served,
        doc: &doc,
    };
    errors_before_the_handler(&checked).await;
    unknown_query_parameters(&checked).await;
    other_methods(&checked).await;
    stalled_bodies(&checked).await;
    application_routes(&checked).await;
    operator_routes(&checked, &event).await;
    database_unavailable(&doc).await;
    // Every answer the document names was given and matched it, and nothing else was.
    let mut documented = std::collections::BTreeSet::new();
    for (method, template) in checked.doc.operations() {
        let responses = &served.doc["paths"][&template][&method]["responses"];
        for status in responses.as_object().unwrap().keys() {
            documented.insert((method.clone(), template.clone(), status.parse().unwrap()));
        }
    }
    let seen = doc.checked();
    let missing: Vec<_> = documented.difference(&seen).collect();
    assert!(missing.is_empty(), "documented, never checked: {missing:?}");
    served.daemon.stop().await;
}

/// A NUL character (`%00`, `\u0000`), which PostgreSQL's text cannot hold, in every path and
/// query parameter the document names and in every string a write's body takes: each answer is
/// one the document gives for that route (an id holding one names nothing: 404; a query value,
/// 400; a body's field, 422), never the 503 of a database failure (which it was, logged as one).
/// An id in the path that is not UTF-8 (`%FF`) names nothing too.
#[tokio::test(flavor = "multi_thread")]
async fn a_nul_character_anywhere_is_answered_as_documented() {
    let db = TestDb::new().await;
    let served = Served::start(&db).await;
    let doc = Document::new(served.doc.clone());
    let checked = Checked {
        served: &served,
        doc: &doc,
    };
    let mut sent = 0;
    for (method, template) in doc.operations() {
        let op = &served.doc["paths"][&template][&method];
        let mut paths = vec![template
            .replace("{job_id}", "job_a%00b")
            .replace("{event_id}", "evt_a%00b")];
        let params = op["parameters"].as_array().cloned().unwrap_or_default();
        for p in params.iter().filter(|p| p["in"] == "query") {
            paths.push(format!(
                "{}?{}=a%00b",
                instantiate(&template),
                p["name"].as_str().unwrap()
            ));
        }
        for path in paths.iter().filter(|p| p.contains("%00")) {
            let mut call = Call::new(&method, path, Some(OPERATOR));
            if method == "post" {
                call = call.json(json!({}));
            }
            let (status, answer) = checked.send(call).await;
            assert!(status < 500, "{method} {path}: {status} {answer}");
            sent += 1;
        }
    }
    // An id in the path that is not UTF-8 names nothing either: 404, in JSON (it was the
    // router's plain-text 400).
    for (method, template) in doc.operations() {
        if !template.contains("_id}") {
            continue;
        }
        let path = template
            .replace("{job_id}", "job_%FF")
            .replace("{event_id}", "evt_%FF");
        let mut call = Call::new(&method, &path, Some(OPERATOR));
        if method == "post" {
            call = call.json(json!({}));
        }
        let (status, answer) = checked.send(call).await;
        assert_eq!(status, 404, "{method} {path}: {answer}");
        sent += 1;
    }
    for (path, body) in [
        ("/v1/jobs", json!({"job_id": "job_a\u{0}b"})),
        (
            "/v1/jobs",
            json!({"job_id": "job_ok", "order_id": "o\u{0}"}),
        ),
        ("/v1/jobs", json!({"job_id": "job_ok", "api_key": "k\u{0}"})),
        (
            "/v1/dead-letters/drop",
            json!({"ids": ["dl_a\u{0}b", "dl_other"]}),
        ),
    ] {
        let (status, answer) = checked
            .send(Call::new("post", path, Some(OPERATOR)).json(body))
            .await;
        assert_eq!(status, 422, "{path}: {answer}");
        sent += 1;
    }
    assert!(sent > 10, "only {sent} requests sent");
    served.daemon.stop().await;
}

/// Beyond MAX_WAITERS a wait is refused 503 `too_many_waiters` with `Retry-After`, which the
/// document declares on that answer (it only named it in the description).
#[tokio::test(flavor = "multi_thread")]
async fn a_wait_refused_beyond_max_waiters_says_retry_after_as_documented() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.wait.max_waiters = 0;
    let served = Served::start_with(c).await;
    let doc = Document::new(served.doc.clone());
    let checked = Checked {
        served: &served,
        doc: &doc,
    };
    let register = Call::new("POST", "/v1/jobs", Some(APP)).json(json!({"job_id": "job_a"}));
    checked.expect(201, register).await;
    let wait = Call::new("GET", "/v1/jobs/job_a?wait=1s", Some(APP));
    let body = checked.expect(503, wait).await;
    assert_eq!(body["error"]["code"], "too_many_waiters");
    assert_eq!(
        doc.headers("get", "/v1/jobs/job_a", 503),
        ["retry-after"],
        "{:#}",
        served.doc["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]["503"]
    );
    served.daemon.stop().await;
}
