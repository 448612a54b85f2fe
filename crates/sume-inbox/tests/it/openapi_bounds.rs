//! The bounds and values the document declares on what a request takes are the ones the daemon
//! keeps: a value at each bound, or each listed value, is taken, and one past it refused (422
//! `invalid_field` for a body, 400 for a query), so a client made from the document neither
//! sends what is refused nor refuses what is taken. Every answer is also checked against the
//! document ([`Checked`]).

use serde_json::{json, Value};
use sume_inbox::db::{CLOSERS, JOB_STATES, OUTCOMES, PAGE_LIMIT_MAX, SOURCES, VERDICTS};
use sume_inbox::operations::replay::REPLAY_LIMIT_MAX;

use crate::openapi_check::Document;
use crate::openapi_contract::{Call, Checked, Served, APP, OPERATOR};
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn the_bounds_and_values_the_document_declares_are_the_ones_kept() {
    let db = TestDb::new().await;
    let served = Served::start(&db).await;
    let doc = Document::new(served.doc.clone());
    let checked = Checked {
        served: &served,
        doc: &doc,
    };
    let schemas = &served.doc["components"]["schemas"];
    registration(&checked, schemas).await;
    replay_and_drop(&checked, schemas).await;
    list_filters(&checked, schemas).await;
    value_lists(schemas);
    ages_and_times(&checked).await;
    page_limits(&served.doc);
    served.daemon.stop().await;
}

/// A registration's values are counted in characters, as the document's `maxLength` counts
/// them (the daemon counted bytes, and refused 128 `é`, which the document allows), and each
/// holds a character that is not white space and no control character, as its `pattern` says.
async fn registration(checked: &Checked<'_>, schemas: &Value) {
    for field in ["job_id", "order_id", "api_key"] {
        let s = &schemas["Registration"]["properties"][field];
        let bounds = (s["minLength"].as_u64(), s["maxLength"].as_u64());
        assert_eq!(bounds, (Some(1), Some(255)), "{field}");
        assert!(s["pattern"].is_string(), "{field}: {s}");
    }
    let at = |c: &str| c.repeat(255);
    let register = |body: Value| Call::new("post", "/v1/jobs", Some(APP)).json(body);
    let full = json!({"job_id": at("j"), "order_id": at("o"), "api_key": at("k")});
    checked.expect(201, register(full)).await;
    let wide = json!({"job_id": at("é"), "order_id": at("€"), "api_key": at("\u{1F600}")});
    checked.expect(201, register(wide)).await;
    for past in [
        json!({"job_id": at("j") + "j"}),
        json!({"job_id": "j2", "order_id": at("o") + "o"}),
        json!({"job_id": "j3", "api_key": at("k") + "k"}),
        json!({"job_id": at("é") + "é"}),
        json!({"job_id": ""}),
        json!({"job_id": " \u{3000}"}),
        json!({"job_id": "j4\u{85}"}),
    ] {
        let body = checked.expect(422, register(past.clone())).await;
        assert_eq!(body["error"]["code"], "invalid_field", "{past}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("1 to 255 characters"), "{past}: {message}");
    }
}

async fn replay_and_drop(checked: &Checked<'_>, schemas: &Value) {
    let limit = &schemas["ReplayDeadLetters"]["properties"]["limit"];
    assert_eq!(limit["minimum"].as_i64(), Some(1));
    assert_eq!(limit["maximum"].as_i64(), Some(REPLAY_LIMIT_MAX));
    let replay = |n: i64| {
        Call::new("post", "/v1/dead-letters/replay", Some(OPERATOR)).json(json!({"limit": n}))
    };
    checked.expect(200, replay(1)).await;
    checked.expect(200, replay(REPLAY_LIMIT_MAX)).await;
    checked.expect(422, replay(0)).await;
    // JSON Schema's `integer` is any number without a fraction: `1000.0` is one.
    let replay_json = |body: &str| {
        let body: Value = serde_json::from_str(body).unwrap();
        Call::new("post", "/v1/dead-letters/replay", Some(OPERATOR)).json(body)
    };
    checked
        .expect(200, replay_json(r#"{"limit": 1000.0}"#))
        .await;
    checked.expect(200, replay_json(r#"{"limit": 1e3}"#)).await;
    checked.expect(422, replay_json(r#"{"limit": 1.5}"#)).await;
    checked.expect(422, replay(REPLAY_LIMIT_MAX + 1)).await;

    let ids = &schemas["DropDeadLetters"]["properties"]["ids"];
    assert_eq!(ids["minItems"].as_u64(), Some(1));
    let max_ids = ids["maxItems"].as_u64().unwrap() as usize;
    let drop = |n: usize| {
        let ids: Vec<String> = (0..n).map(|i| format!("dl_{i}")).collect();
        Call::new("post", "/v1/dead-letters/drop", Some(OPERATOR)).json(json!({ "ids": ids }))
    };
    checked.expect(200, drop(max_ids)).await;
    checked.expect(422, drop(max_ids + 1)).await;
    checked.expect(422, drop(0)).await;
    // Each id: 1 to 511 characters, not blank, as the items' schema says.
    let item = &ids["items"];
    let longest = item["maxLength"].as_u64().unwrap() as usize;
    assert_eq!((item["minLength"].as_u64(), longest), (Some(1), 511));
    let drop_ids = |ids: Vec<String>| {
        Call::new("post", "/v1/dead-letters/drop", Some(OPERATOR)).json(json!({ "ids": ids }))
    };
    checked
        .expect(200, drop_ids(vec!["é".repeat(longest)]))
        .await;
    for refused in ["é".repeat(longest + 1), String::new(), " \t".into()] {
        let body = checked.expect(422, drop_ids(vec![refused.clone()])).await;
        assert_eq!(body["error"]["code"], "invalid_field", "{refused:?}");
    }
}

/// The list's filters by state and closer take exactly the values the document lists, which
/// are those the answers hold.
async fn list_filters(checked: &Checked<'_>, schemas: &Value) {
    for (param, schema, values) in [
        ("state", "JobState", &JOB_STATES[..]),
        ("closed_by", "ClosedBy", &CLOSERS[..]),
    ] {
        let listed: Vec<&str> = schemas[schema]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{schema} lists no values"))
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(listed, values, "{schema}");
        for v in listed.iter().chain(&["closed"]) {
            let path = format!("/v1/jobs?{param}={v}");
            let status = if values.contains(v) { 200 } else { 400 };
            checked
                .expect(status, Call::new("get", &path, Some(APP)))
                .await;
        }
    }
}

/// Every field of a closed set of values is an enum of exactly that set, wherever it appears;
/// the answers of every route are checked against them (`openapi_contract`).
fn value_lists(schemas: &Value) {
    for (schema, values) in [
        ("JobState", &JOB_STATES[..]),
        ("ClosedBy", &CLOSERS[..]),
        ("EventOutcome", &OUTCOMES[..]),
        ("CheckVerdict", &VERDICTS[..]),
        ("ObservationSource", &SOURCES[..]),
    ] {
        let listed = schemas[schema]["enum"].as_array();
        let listed: Vec<&str> = listed
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(listed, values, "{schema}");
    }
    for (field, schema) in [
        ("state", "JobState"),
        ("closed_by", "ClosedBy"),
        ("outcome", "EventOutcome"),
        ("verdict", "CheckVerdict"),
        ("source", "ObservationSource"),
    ] {
        for (name, s) in schemas.as_object().unwrap() {
            let Some(v) = s["properties"].get(field) else {
                continue;
            };
            let text = v.to_string();
            let reference = format!("#/components/schemas/{schema}");
            assert!(
                text.contains(&reference),
                "{name}.{field} is not a {schema}: {text}"
            );
        }
    }
}

/// An age asked about is at most ten years, and a date-time filter or position in RFC 3339's
/// years: past them a date overflowed, answered 503 as a database failure.
async fn ages_and_times(checked: &Checked<'_>) {
    for (query, status) in [
        ("/v1/inbox?older_than=3650d", 200),
        ("/v1/inbox?older_than=3651d", 400),
        ("/v1/inbox?older_than=100000000y", 400),
        ("/v1/jobs?created_from=0000-01-01T00:00:00Z", 200),
        ("/v1/jobs?closed_to=9999-12-31T23:59:59Z", 200),
        // The years are those written, as the console and the CLI read them: in UTC these are
        // in the years 10000 and -1, which PostgreSQL holds (they were refused 400).
        ("/v1/jobs?created_from=9999-12-31T23:59:59-23:59", 200),
        ("/v1/jobs?created_to=0000-01-01T00:00:00%2B23:59", 200),
        ("/v1/jobs?created_from=-10000-01-01T00:00:00Z", 400),
        ("/v1/jobs?created_to=%2B262000-01-01T00:00:00Z", 400),
        ("/v1/jobs?closed_from=-000001-01-01T00:00:00Z", 400),
        // A list's position at the edges of its pattern (`TimeKey`): the first and the last
        // instant it can write, February 29 of a leap year.
        (
            "/v1/dead-letters?after=0000-01-01T00:00:00%2B23:59%7Cx",
            200,
        ),
        (
            "/v1/orphans?after=9999-12-31T23:59:59.999999999-23:59%7Cx",
            200,
        ),
        ("/v1/set-aside?after=2000-02-29T12:00:00Z%7C", 200),
        ("/v1/set-aside?after=1900-02-29T12:00:00Z%7C", 400),
        ("/v1/audit?after=999999999999999999", 200),
    ] {
        checked
            .expect(status, Call::new("get", query, Some(OPERATOR)))
            .await;
    }
}

/// Every listing's `limit` parameter declares the page's bound the daemon keeps (1 to
/// `PAGE_LIMIT_MAX`, which `sume-inbox`'s own `--limit` takes too).
fn page_limits(doc: &Value) {
    let mut listings = 0;
    for (template, methods) in doc["paths"].as_object().unwrap() {
        let Some(params) = methods["get"]["parameters"].as_array() else {
            continue;
        };
        for p in params.iter().filter(|p| p["name"] == "limit") {
            let bounds = (
                p["schema"]["minimum"].as_i64(),
                p["schema"]["maximum"].as_i64(),
            );
            assert_eq!(bounds, (Some(1), Some(PAGE_LIMIT_MAX)), "{template}");
            listings += 1;
        }
    }
    assert!(listings >= 8, "{listings} listings take a limit");
}
