//! What deploy/README.md (the operator's guide) and README.md say a running daemon has: every
//! `sume_inbox_*` metric either names is in its `/metrics`, and every `METHOD /path` the
//! operator's guide names is a route of the daemon (its public port, its admin API's OpenAPI
//! document, `/metrics` or the console) or, under `/sim/`, of the simulator.

use std::collections::BTreeSet;

use serde_json::Value;
use sume_sim::RunningSim;

use crate::support::*;

const GUIDE: (&str, &str) = (
    "deploy/README.md",
    include_str!("../../../../deploy/README.md"),
);
const README: (&str, &str) = ("README.md", include_str!("../../../../README.md"));

/// Every name `/metrics` answers for: each family's `# TYPE` name with the suffixes its samples
/// take, and each sample's name.
fn exposed(metrics: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in metrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                continue;
            };
            names.insert(name.to_owned());
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        } else if !line.starts_with('#') {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

/// The longest prefix of `s` made of `allowed` characters.
fn prefix(s: &str, allowed: impl Fn(char) -> bool) -> &str {
    &s[..s.find(|c: char| !allowed(c)).unwrap_or(s.len())]
}

/// The `sume_inbox_*` names a document sets in code spans (`` `sume_inbox_...` ``), as its
/// metrics are; a code block's identifiers (a generated client's package) are not metrics.
fn metric_names(text: &str) -> BTreeSet<&str> {
    text.match_indices("sume_inbox_")
        .filter(|(at, _)| text[..*at].ends_with('`'))
        .map(|(at, _)| {
            let name = prefix(&text[at..], |c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
            });
            name.trim_end_matches('_')
        })
        .collect()
}

/// The `METHOD /path` pairs a document names, `{...}` segments and all.
fn endpoints(text: &str) -> BTreeSet<(String, String)> {
    let mut found = BTreeSet::new();
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
        for (at, _) in text.match_indices(&format!("{method} /")) {
            if text[..at].ends_with(|c: char| c.is_ascii_alphanumeric()) {
                continue;
            }
            let rest = &text[at + method.len() + 1..];
            let path = prefix(rest, |c| c.is_ascii_alphanumeric() || "_{}./-".contains(c));
            found.insert((method.to_owned(), path.to_owned()));
        }
    }
    found
}

/// Whether the OpenAPI document has `method` on a path template matching `path`.
fn in_openapi(doc: &Value, method: &str, path: &str) -> bool {
    let Some(paths) = doc["paths"].as_object() else {
        return false;
    };
    let want: Vec<&str> = path.split('/').collect();
    paths.iter().any(|(template, ops)| {
        let have: Vec<&str> = template.split('/').collect();
        have.len() == want.len()
            && have
                .iter()
                .zip(&want)
                .all(|(h, w)| h == w || h.starts_with('{'))
            && !ops[method.to_ascii_lowercase()].is_null()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn every_metric_the_docs_name_is_exposed() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let r = reqwest::get(daemon.admin_url("/metrics")).await.unwrap();
    assert_eq!(r.status(), 200);
    let have = exposed(&r.text().await.unwrap());
    let mut missing = Vec::new();
    let mut named = 0;
    for (doc, text) in [GUIDE, README] {
        let names = metric_names(text);
        named += names.len();
        missing.extend(
            names
                .into_iter()
                .filter(|n| !have.contains(*n))
                .map(|n| format!("{doc}: {n}")),
        );
    }
    assert!(
        named > 20,
        "the docs name only {named} metrics: is the pattern right?"
    );
    assert!(missing.is_empty(), "named but not exposed: {missing:#?}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_endpoint_the_operators_guide_names_is_routed() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let sim = RunningSim::start(crate::sweep::sim_config()).await.unwrap();
    let http = reqwest::Client::new();
    let openapi: Value = http
        .get(daemon.admin_url("/v1/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let named = endpoints(GUIDE.1);
    for must in ["/healthz", "/readyz", "/metrics", "/webhooks/sume"] {
        assert!(
            named.iter().any(|(_, p)| p == must),
            "the guide no longer names {must}"
        );
    }
    let mut unrouted = Vec::new();
    for (method, path) in &named {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let concrete = path.replace(['{', '}'], "");
        let routed = if let Some(rest) = path.strip_prefix("/sim/") {
            let r = http.request(m, sim.sim_url(rest)).send().await.unwrap();
            r.status() != 404 && r.status() != 405
        } else if in_openapi(&openapi, method, path) {
            true
        } else if path == "/metrics" || path.starts_with("/console") {
            let r = http.request(m, daemon.admin_url(&concrete)).send().await;
            r.unwrap().status().is_success()
        } else {
            // The public port: a route answers anything but 404 and 405 (a webhook without a
            // signature is refused 401, which is a route).
            let r = http.request(m, daemon.url(&concrete)).send().await.unwrap();
            r.status() != 404 && r.status() != 405
        };
        if !routed {
            unrouted.push(format!("{method} {path}"));
        }
    }
    assert!(
        unrouted.is_empty(),
        "deploy/README.md names endpoints nothing serves: {unrouted:?}"
    );
    daemon.stop().await;
}
