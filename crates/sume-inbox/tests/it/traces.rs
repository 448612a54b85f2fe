//! Traces, as a collector sees them: the binary runs as a process of its own (its logger and
//! exporter are process-wide) with OTEL_EXPORTER_OTLP_ENDPOINT pointed at an OTLP/HTTP receiver
//! this test runs, which decodes what arrives with `opentelemetry-proto`'s types. One job is
//! registered with a `traceparent` and closed by a signed delivery: the spans, their parents,
//! the links from the commit to the delivery and from the close to the delivery and to the
//! application's trace, their attributes, and the ids on the log lines are checked. Then a
//! collector that accepts connections and never answers: deliveries are answered all the same,
//! and the daemon still exits on SIGTERM; and one out of reach, which the log names.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;

use crate::support::*;

/// A span as received, with its service's resource attributes.
#[derive(Clone, Debug)]
struct Got {
    span: opentelemetry_proto::tonic::trace::v1::Span,
    resource: Vec<KeyValue>,
}

impl Got {
    fn trace_id(&self) -> String {
        hex::encode(&self.span.trace_id)
    }
    fn span_id(&self) -> String {
        hex::encode(&self.span.span_id)
    }
    fn parent_id(&self) -> String {
        hex::encode(&self.span.parent_span_id)
    }
    fn attr(&self, key: &str) -> Option<String> {
        text(&self.span.attributes, key)
    }
    /// An attribute exported as an integer (`None` for one exported as text, "204").
    fn int(&self, key: &str) -> Option<i64> {
        let value = self.span.attributes.iter().find(|kv| kv.key == key)?;
        match value.value.as_ref()?.value.as_ref()? {
            any_value::Value::IntValue(i) => Some(*i),
            _ => None,
        }
    }
    /// (trace id, span id) of each link.
    fn links(&self) -> Vec<(String, String)> {
        let link = |l: &opentelemetry_proto::tonic::trace::v1::span::Link| {
            (hex::encode(&l.trace_id), hex::encode(&l.span_id))
        };
        self.span.links.iter().map(link).collect()
    }
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    Some(match value.value.as_ref()? {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::IntValue(i) => i.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        any_value::Value::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

/// An export's path and its `x-api-key` header.
type Export = (String, Option<String>);

/// An OTLP/HTTP receiver on loopback: keeps every span of every protobuf export.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Got>>>,
    content_types: Arc<Mutex<Vec<String>>>,
    /// The path and the `x-api-key` header of each export.
    requests: Arc<Mutex<Vec<Export>>>,
}

async fn export(
    State(r): State<Receiver>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, [(header::HeaderName, &'static str); 1], Vec<u8>) {
    let header = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = header(header::CONTENT_TYPE.as_str()).unwrap_or_default();
    r.content_types.lock().unwrap().push(content_type);
    let request = (uri.path().to_owned(), header("x-api-key"));
    r.requests.lock().unwrap().push(request);
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    let mut spans = r.spans.lock().unwrap();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|r| r.attributes)
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(Got {
                    span,
                    resource: resource.clone(),
                });
            }
        }
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        Vec::new(),
    )
}

impl Receiver {
    async fn start() -> (Receiver, SocketAddr) {
        let receiver = Receiver::default();
        let app = Router::new()
            .route("/v1/traces", post(export))
            .route("/custom/path", post(export))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, addr)
    }

    fn named(&self, name: &str) -> Vec<Got> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .filter(|g| g.span.name == name)
            .cloned()
            .collect()
    }

    fn all(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }
}

/// `sume-inbox serve` as a process of its own, exporting to `collector`; its stderr (JSON log
/// lines) is kept. SIGKILLed if still running when dropped.
struct Traced {
    child: Child,
    webhook: String,
    admin: String,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Traced {
    async fn start(db: &TestDb, collector: SocketAddr, rust_log: &str) -> Traced {
        Traced::start_with(db, collector, rust_log, &[]).await
    }

    /// As [`Traced::start`], with more of the environment (an empty value removes a variable).
    async fn start_with(
        db: &TestDb,
        collector: SocketAddr,
        rust_log: &str,
        env: &[(&str, String)],
    ) -> Traced {
        let (webhook, admin) = (free_port(), free_port());
        let mut command = Command::new(env!("CARGO_BIN_EXE_sume-inbox"));
        command
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DATABASE_URL", &db.url)
            .env("SUME_WEBHOOK_SECRET", SECRET)
            .env("SUME_API_URL", "http://127.0.0.1:9/v1")
            .env("LISTEN_ADDR", format!("127.0.0.1:{webhook}"))
            .env("ADMIN_ADDR", format!("127.0.0.1:{admin}"))
            .env("ATTACH_SCAN_INTERVAL", "300ms")
            .env("SHUTDOWN_TIMEOUT", "5s")
            .env("LOG_FORMAT", "json")
            .env("RUST_LOG", rust_log)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}"))
            .env("OTEL_SERVICE_NAME", "sume-inbox-under-test")
            .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
            // The SDK's batch processor: send every 100 ms rather than every 5 s.
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            match v.as_str() {
                "" => command.env_remove(k),
                v => command.env(k, v),
            };
        }
        let mut child = command.spawn().expect("start sume-inbox serve");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let kept = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        let traced = Traced {
            child,
            webhook: format!("http://127.0.0.1:{webhook}"),
            admin: format!("http://127.0.0.1:{admin}"),
            logs,
        };
        let ready = format!("{}/readyz", traced.webhook);
        wait_for(
            "the traced daemon ready",
            Duration::from_secs(60),
            || async { matches!(reqwest::get(&ready).await, Ok(r) if r.status() == 200) },
        )
        .await;
        traced
    }

    fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// SIGTERM, then its exit, which must come (the exporter's flush is bounded) and succeed.
    async fn stop(mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: a signal to the child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let mut status = None;
        wait_for("the traced daemon to exit", Duration::from_secs(60), || {
            status = self.child.try_wait().unwrap();
            std::future::ready(status.is_some())
        })
        .await;
        let status = status.unwrap();
        assert!(status.success(), "sume-inbox exited {status}");
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const APP_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const APP_SPAN: &str = "00f067aa0ba902b7";

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_is_traced_from_the_socket_to_the_close() {
    let db = TestDb::new().await;
    let (receiver, collector) = Receiver::start().await;
    let daemon = Traced::start(&db, collector, "info,sume_inbox::http::webhook=debug").await;
    let http = reqwest::Client::new();
    let job = "job_traced_1";
    let r = http
        .post(format!("{}/v1/jobs", daemon.admin))
        .header("traceparent", format!("00-{APP_TRACE}-{APP_SPAN}-01"))
        .json(&serde_json::json!({"job_id": job, "order_id": "order-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "registration");
    let r = Delivery::completed(job)
        .send(&http, &format!("{}/webhooks/sume", daemon.webhook))
        .await;
    assert_eq!(r.status(), 204);
    let event_id: String = db
        .client()
        .await
        .query_one(
            "select event_id from sume.events where job_id = $1",
            &[&job],
        )
        .await
        .unwrap()
        .get(0);
    wait_for("the job closed", Duration::from_secs(30), || async {
        job_state(&db, job).await.as_deref() == Some("completed")
    })
    .await;
    wait_for("the close span exported", Duration::from_secs(30), || {
        let got = receiver.named("close").len() == 1 && !receiver.named("attach").is_empty();
        std::future::ready(got)
    })
    .await;

    let delivery = the_delivery_and_its_steps(&receiver, &event_id);
    the_close_under_an_attach(&receiver, job, &event_id, &delivery);
    // Export is OTLP over HTTP with protobuf bodies.
    let types = receiver.content_types.lock().unwrap().clone();
    assert!(
        types.iter().all(|t| t == "application/x-protobuf"),
        "{types:?}"
    );

    // A log line written inside the delivery carries its trace id and its span's id.
    let trace_id = delivery.trace_id();
    let line = daemon
        .logs()
        .into_iter()
        .find(|l| l.contains("webhook stored"))
        .expect("the debug line of the stored webhook");
    let line: serde_json::Value = serde_json::from_str(&line).expect("a JSON log line");
    assert_eq!(line["trace_id"], trace_id.as_str(), "{line}");
    assert_eq!(line["span_id"], waiting_id(&receiver, &trace_id), "{line}");
    daemon.stop().await;
}

/// The delivery: a server span, the root of its trace, with the event id and the answer; its
/// steps its children, and the batch's commit linked to its wait.
fn the_delivery_and_its_steps(receiver: &Receiver, event_id: &str) -> Got {
    let deliveries = receiver.named("POST /webhooks/sume");
    assert_eq!(deliveries.len(), 1, "{:#?}", receiver.all());
    let delivery = deliveries[0].clone();
    assert_eq!(delivery.span.kind, SpanKind::Server as i32);
    assert!(delivery.span.parent_span_id.is_empty());
    assert_eq!(delivery.attr("sume.event_id").as_deref(), Some(event_id));
    // Numbers are exported as integers, as OpenTelemetry's conventions have them.
    assert_eq!(delivery.int("http.response.status_code"), Some(204));
    assert_eq!(
        text(&delivery.resource, "service.name").as_deref(),
        Some("sume-inbox-under-test")
    );
    assert_eq!(
        text(&delivery.resource, "deployment.environment").as_deref(),
        Some("test")
    );
    // Its steps are its children.
    let mut waiting = None;
    for step in ["check headers", "read body", "verify", "wait for batch"] {
        let found = receiver.named(step);
        let child = found
            .iter()
            .find(|s| s.trace_id() == delivery.trace_id())
            .unwrap_or_else(|| panic!("no {step:?} span in the delivery's trace"));
        assert_eq!(child.parent_id(), delivery.span_id(), "{step}'s parent");
        if step == "wait for batch" {
            waiting = Some(child.span_id());
        }
    }
    // The batch's commit links to the delivery's wait for it.
    let commits = receiver.named("inbox commit");
    let linked = (delivery.trace_id(), waiting.unwrap());
    let commit = commits.iter().find(|c| c.links().contains(&linked));
    let commit = commit.unwrap_or_else(|| panic!("no commit links to the delivery: {commits:#?}"));
    assert!(commit.int("sume.deliveries") >= Some(1), "{commit:#?}");
    delivery
}

/// The close: a child of an attach, with the job and the event, linked to the delivery and to
/// the application's trace of the registration.
fn the_close_under_an_attach(receiver: &Receiver, job: &str, event_id: &str, delivery: &Got) {
    let close = &receiver.named("close")[0];
    assert_eq!(close.attr("sume.job_id").as_deref(), Some(job));
    assert_eq!(close.attr("sume.event_id").as_deref(), Some(event_id));
    assert_eq!(close.attr("sume.closed_by").as_deref(), Some("webhook"));
    let attach = receiver
        .named("attach")
        .into_iter()
        .find(|a| a.span_id() == close.parent_id())
        .expect("the close's parent is an attach span");
    assert_eq!(attach.trace_id(), close.trace_id());
    assert!(attach.int("sume.jobs") >= Some(1), "{attach:#?}");
    let links = close.links();
    assert!(
        links.contains(&(APP_TRACE.to_owned(), APP_SPAN.to_owned())),
        "{links:?}"
    );
    assert!(
        links.contains(&(delivery.trace_id(), delivery.span_id())),
        "{links:?}"
    );
}

/// The `X-Request-Id`s the simulator sent with its 200s to status reads of `job`.
async fn sent_200s(sim: &sume_sim::RunningSim, job: &str) -> Vec<String> {
    let url = sim.sim_url(&format!("requests?job_id={job}"));
    let answered: sume_sim::RequestsAnswer = reqwest::get(url).await.unwrap().json().await.unwrap();
    let reads = answered.requests.into_iter();
    reads
        .filter(|r| r.status == 200 && r.route.ends_with("/status"))
        .filter_map(|r| r.request_id)
        .collect()
}

fn waiting_id(receiver: &Receiver, trace_id: &str) -> String {
    receiver
        .named("wait for batch")
        .into_iter()
        .find(|s| s.trace_id() == trace_id)
        .map(|s| s.span_id())
        .unwrap()
}

/// The sweep's reads of Sume (the simulator): a poll that closes a job, its status read with
/// the key, the answer and the `X-Request-Id` Sume sent with its 200, the close under it
/// linked to the registration's trace; and a read Sume answers 404 with a request id, which
/// the read's span carries.
#[tokio::test(flavor = "multi_thread")]
async fn a_poll_is_traced_with_the_key_the_answer_and_sumes_request_id() {
    use crate::sweep::{create, sim_config, wait_ended, MAIN_KEY};
    let db = TestDb::new().await;
    let sim = sume_sim::RunningSim::start(sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let known = create(&http, &sim, MAIN_KEY, None, serde_json::json!({})).await;
    wait_ended(&http, &sim, std::slice::from_ref(&known)).await;
    let (receiver, collector) = Receiver::start().await;
    let env = [
        ("SUME_API_URL", sim.api_url()),
        ("SUME_API_KEYS", format!("main:{MAIN_KEY}")),
        ("SUME_API_ALLOW_PLAINTEXT", "1".to_owned()),
        ("POLL_AFTER", "100ms".to_owned()),
        ("POLL_MAX_INTERVAL", "1s".to_owned()),
        ("SWEEP_INTERVAL", "100ms".to_owned()),
        ("LIST_WALKS", "off".to_owned()),
    ];
    let daemon = Traced::start_with(&db, collector, "warn", &env).await;
    let unknown = "job_sume_never_made";
    for job in [known.as_str(), unknown] {
        let r = http
            .post(format!("{}/v1/jobs", daemon.admin))
            .header("traceparent", format!("00-{APP_TRACE}-{APP_SPAN}-01"))
            .json(&serde_json::json!({"job_id": job, "api_key": "main"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "registration of {job}");
    }
    wait_for(
        "the job closed by a poll",
        Duration::from_secs(30),
        || async { job_state(&db, &known).await.as_deref() == Some("completed") },
    )
    .await;
    let read_of = |job: &str| {
        receiver
            .named("GET /jobs/{id}")
            .into_iter()
            .find(|s| s.attr("sume.job_id").as_deref() == Some(job))
    };
    wait_for(
        "both reads and the close exported",
        Duration::from_secs(30),
        || {
            let got = read_of(&known).is_some()
                && read_of(unknown).is_some()
                && !receiver.named("close").is_empty();
            std::future::ready(got)
        },
    )
    .await;
    let read = read_of(&known).unwrap();
    assert_eq!(read.span.kind, SpanKind::Client as i32);
    assert_eq!(read.attr("sume.key").as_deref(), Some("main"));
    assert_eq!(read.attr("sume.answer").as_deref(), Some("200"));
    let (sent, request_id) = (sent_200s(&sim, &known).await, read.attr("sume.request_id"));
    assert!(
        request_id.is_some_and(|id| sent.contains(&id)),
        "a 200's id, of {sent:?}"
    );
    let poll = receiver
        .named("poll")
        .into_iter()
        .find(|p| p.span_id() == read.parent_id())
        .expect("the read's parent is a poll span");
    assert_eq!(poll.attr("sume.job_id").as_deref(), Some(known.as_str()));
    let close = &receiver.named("close")[0];
    assert_eq!(close.attr("sume.job_id").as_deref(), Some(known.as_str()));
    assert_eq!(close.attr("sume.closed_by").as_deref(), Some("poll"));
    assert_eq!(close.parent_id(), poll.span_id());
    assert!(close
        .links()
        .contains(&(APP_TRACE.to_owned(), APP_SPAN.to_owned())));

    let refused = read_of(unknown).unwrap();
    assert_eq!(refused.attr("sume.answer").as_deref(), Some("404"));
    let request_id = refused.attr("sume.request_id").unwrap_or_default();
    assert!(request_id.starts_with("req_"), "{request_id:?}");
    daemon.stop().await;
}

/// Accepts connections and never answers (nor reads): the slow collector at its worst.
async fn silent_collector() -> (SocketAddr, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            *count.lock().unwrap() += 1;
            held.push(socket);
        }
    });
    (addr, accepted)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_that_never_answers_delays_no_delivery() {
    let db = TestDb::new().await;
    let (collector, accepted) = silent_collector().await;
    let daemon = Traced::start(&db, collector, "warn").await;
    // Generous: a delivery is answered in milliseconds; an answer waiting on the collector
    // would wait for the exporter's 10 s timeout.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(8))
        .build()
        .unwrap();
    let url = format!("{}/webhooks/sume", daemon.webhook);
    let mut sent = 0;
    // Deliveries keep coming while the exporter hangs on the collector.
    while *accepted.lock().unwrap() == 0 || sent < 50 {
        let r = Delivery::completed(&format!("job_silent_{sent}"))
            .send(&http, &url)
            .await;
        assert_eq!(r.status(), 204, "delivery {sent}");
        sent += 1;
        assert!(sent < 2_000, "the exporter never reached the collector");
    }
    let stored = db
        .scalar("select count(*)::bigint from sume.events where job_id like 'job_silent_%'")
        .await;
    assert_eq!(stored, sent);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_out_of_reach_is_said_in_the_log() {
    let db = TestDb::new().await;
    // A port nothing listens on: every export is refused.
    let collector: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let daemon = Traced::start(&db, collector, "warn").await;
    let http = reqwest::Client::new();
    let url = format!("{}/webhooks/sume", daemon.webhook);
    let r = Delivery::completed("job_unexported")
        .send(&http, &url)
        .await;
    assert_eq!(r.status(), 204);
    let said = |logs: &[String]| {
        logs.iter()
            .any(|l| l.contains("spans could not be sent to OTEL_EXPORTER_OTLP_ENDPOINT"))
    };
    wait_for(
        "the failed export in the log",
        Duration::from_secs(20),
        || std::future::ready(said(&daemon.logs())),
    )
    .await;
    let line = daemon
        .logs()
        .into_iter()
        .find(|l| said(std::slice::from_ref(l)));
    let line: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
    assert_eq!(line["level"], "WARN", "{line}");
    assert!(line["dropped"].as_u64().unwrap() >= 1, "{line}");
    assert_eq!(
        line["endpoint"],
        format!("http://{collector}/v1/traces"),
        "{line}"
    );
    daemon.stop().await;
}

/// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn export off, endpoint or not:
/// a delivery is answered and nothing reaches the collector, and the log says why.
#[tokio::test(flavor = "multi_thread")]
async fn opentelemetrys_switches_turn_export_off() {
    let db = TestDb::new().await;
    let (receiver, collector) = Receiver::start().await;
    let http = reqwest::Client::new();
    for (name, value) in [
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_TRACES_EXPORTER", "none"),
    ] {
        let env = [(name, value.to_owned())];
        let daemon = Traced::start_with(&db, collector, "info", &env).await;
        let url = format!("{}/webhooks/sume", daemon.webhook);
        let r = Delivery::completed(&format!("job_untraced_{name}"))
            .send(&http, &url)
            .await;
        assert_eq!(r.status(), 204);
        // Ten times the batch processor's delay: spans made would have been sent by then.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let said = format!("traces: {name}={value}, no spans are made or exported");
        let logs = daemon.logs();
        assert!(logs.iter().any(|l| l.contains(&said)), "{logs:#?}");
        daemon.stop().await;
        assert!(
            receiver.all().is_empty(),
            "{name}={value}: {:#?}",
            receiver.all()
        );
    }
}

/// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT alone turns export on, and is the URL spans go to, as
/// written; the headers (here from OTEL_EXPORTER_OTLP_HEADERS_FILE, percent-encoded) go with
/// them, and `none` compression and the `http/protobuf` protocol are taken.
#[tokio::test(flavor = "multi_thread")]
async fn the_traces_own_endpoint_is_used_as_written_with_the_headers() {
    let db = TestDb::new().await;
    let (receiver, collector) = Receiver::start().await;
    let dir = std::env::temp_dir().join(format!("sume-otel-headers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let headers = dir.join("headers");
    std::fs::write(&headers, "x-api-key=secret%20123\n").unwrap();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", String::new()),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("http://{collector}/custom/path"),
        ),
        (
            "OTEL_EXPORTER_OTLP_HEADERS_FILE",
            headers.display().to_string(),
        ),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "none".to_owned()),
        // Blank: unset, not "no headers" (which kept the ones above from being sent).
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", String::new()),
        (
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "http/protobuf".to_owned(),
        ),
    ];
    let daemon = Traced::start_with(&db, collector, "warn", &env).await;
    let http = reqwest::Client::new();
    let url = format!("{}/webhooks/sume", daemon.webhook);
    let r = Delivery::completed("job_custom_path")
        .send(&http, &url)
        .await;
    assert_eq!(r.status(), 204);
    wait_for(
        "the delivery's span exported",
        Duration::from_secs(30),
        || std::future::ready(!receiver.named("POST /webhooks/sume").is_empty()),
    )
    .await;
    let requests = receiver.requests.lock().unwrap().clone();
    let sent = ("/custom/path".to_owned(), Some("secret 123".to_owned()));
    assert!(requests.iter().all(|r| *r == sent), "{requests:?}");
    daemon.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
