//! The job object read as Sume answers it: odd results, keys sent twice, what a webhook keeps,
//! a wrapped answer.

use super::*;
use serde_json::json;

fn job(status: &str, result: Value) -> JobObject {
    serde_json::from_value(json!({"id": "job_1", "status": status, "result": result})).unwrap()
}

#[test]
fn what_no_database_can_store_is_dropped_or_refused() {
    let ok = job("completed", json!({"url": "https://cdn.example/a.mp4"}));
    assert_eq!(ok.clone().storable(), Some(ok));
    let kept = job("completed", json!({"note": "a\u{0}b"}))
        .storable()
        .unwrap();
    assert_eq!((kept.status.as_str(), kept.result), ("completed", None));
    assert_eq!(job("complet\u{0}ed", Value::Null).storable(), None);
    let long = job(&"x".repeat(900_000), Value::Null).storable().unwrap();
    assert_eq!(long.status.chars().count(), MAX_STATUS_CHARS + 1);
    assert!(long.status.ends_with('…'));
}

/// A status answer whose `result` no reader here could take (a number past `f64`, nesting
/// past the reader's 128 levels) once failed to read at all, so its status closed nothing
/// and the job was given up: the status is read, the result left out.
#[test]
fn an_odd_result_costs_the_result_never_the_status() {
    for result in [
        r#"{"n":1e400}"#.to_owned(),
        format!("{}{}", "[".repeat(200), "]".repeat(200)),
        r#"{"n":1e-20000}"#.to_owned(),
    ] {
        let body = format!(r#"{{"id":"job_1","status":"completed","result":{result}}}"#);
        let job: JobObject = serde_json::from_str(&body).expect(&body);
        assert_eq!(
            (job.id.as_str(), job.status.as_str()),
            ("job_1", "completed")
        );
        assert_eq!((job.result, job.error), (None, None), "{body}");
    }
    let odd_times =
        r#"{"id":"j","status":"failed","object":7,"created_at":1e400,"error":{"code":"x"}}"#;
    let job: JobObject = serde_json::from_str(odd_times).unwrap();
    assert_eq!((job.object.as_str(), &job.created_at), ("job", &None));
    assert_eq!(job.outcome_value(), Some(json!({"error": {"code": "x"}})));
}

/// A key sent twice was refused (`duplicate field`), so a status answer repeating one
/// closed nothing and its job was given up: the last value is read, as a webhook body's
/// is, whatever the earlier one held.
#[test]
fn a_key_sent_twice_is_read_as_its_last_value_as_a_webhooks() {
    for (fields, status, result) in [
        (
            r#""status":"running","status":"completed""#,
            "completed",
            None,
        ),
        (r#""status":7,"status":"failed""#, "failed", None),
        (r#""id":"job_1","status":"completed""#, "completed", None),
        (
            r#""status":"completed","result":{"a":1},"result":{"b":2}"#,
            "completed",
            Some(json!({"b": 2})),
        ),
    ] {
        let answer = format!(r#"{{"id":"job_1",{fields}}}"#);
        let job: JobObject = serde_json::from_str(&answer).expect(&answer);
        assert_eq!((job.id.as_str(), job.status.as_str()), ("job_1", status));
        assert_eq!(job.outcome_value(), result, "{answer}");
        let webhook =
            format!(r#"{{"job_id":"job_1",{fields}}}"#).replace(r#""id":"#, r#""job_id":"#);
        let event = crate::parse_event(webhook.as_bytes()).unwrap();
        assert_eq!(event.status.as_deref(), Some(status), "{webhook}");
    }
    // What is not a job object is still refused: no id or status, or another type last.
    for body in [
        r#"{"id":"job_1"}"#,
        r#"{"id":"job_1","status":"completed","status":null}"#,
        r#"["job_1","completed"]"#,
        r#""completed""#,
    ] {
        assert!(serde_json::from_str::<JobObject>(body).is_err(), "{body}");
    }
}

/// What a status answer keeps of a job's outcome is what a webhook body saying the same
/// keeps, case by case: one rule, not two.
#[test]
fn a_status_answer_keeps_the_outcome_a_webhook_keeps() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let cases = [
        r#""result":{"url":"https://cdn.example/a.mp4","n":[1,2.5,-3e5]}"#.to_owned(),
        r#""result":{"caption":"cut \ud83d"}"#.to_owned(),
        r#""result":{"t":"a\u0000b"},"error":{"code":"x"}"#.to_owned(),
        r#""result":{"n":1e400},"error":{"code":"x"}"#.to_owned(),
        r#""result":null,"error":{"code":"nsfw","message":"\udfff"}"#.to_owned(),
        format!(r#""error":{}"#, deep(crate::MAX_RESULT_DEPTH)),
        format!(r#""error":{}"#, deep(crate::MAX_RESULT_DEPTH - 1)),
        format!(r#""result":{}"#, deep(crate::MAX_RESULT_DEPTH)),
        r#""error":"e""#.to_owned(),
        r#""result":{"n":0.5e-16383}"#.to_owned(),
        String::new(),
    ];
    for fields in cases {
        let sep = if fields.is_empty() { "" } else { "," };
        let answer = format!(r#"{{"id":"job_1","status":"completed"{sep}{fields}}}"#);
        let webhook = format!(r#"{{"job_id":"job_1","status":"completed"{sep}{fields}}}"#);
        let job: JobObject = serde_json::from_str(&answer).expect(&answer);
        let event = crate::parse_event(webhook.as_bytes()).unwrap();
        let kept = event
            .result
            .map(|r| serde_json::from_str::<Value>(&r).unwrap());
        assert_eq!(job.outcome_value(), kept, "{fields}");
    }
}

/// A status answer wrapped as Sume's create calls answer (`{"object":"video_generation",
/// "job":{...}}`) was refused (`missing field id`), so every poll failed and a job Sume called
/// completed was given up: its `job` is read by the flat answer's rules, a flat answer first.
#[test]
fn a_wrapped_answer_is_read_as_its_job_a_flat_one_first() {
    for (answer, id, status, result) in [
        (
            r#"{"object":"video_generation","job":{"id":"job_x","status":"completed","result":{"url":"u"}}}"#,
            "job_x",
            "completed",
            Some(json!({"url": "u"})),
        ),
        (
            r#"{"id":"req_1","job":{"id":"job_x","status":"running","status":"failed","error":{"code":"e"}}}"#,
            "job_x",
            "failed",
            Some(json!({"error": {"code": "e"}})),
        ),
        (
            r#"{"job":{"id":"job_old","status":"queued"},"status":7,"job":{"id":"job_x","status":"completed"}}"#,
            "job_x",
            "completed",
            None,
        ),
        (
            r#"{"id":"job_flat","status":"completed","job":{"id":"job_x","status":"failed"}}"#,
            "job_flat",
            "completed",
            None,
        ),
    ] {
        let job: JobObject = serde_json::from_str(answer).expect(answer);
        assert_eq!((job.id.as_str(), job.status.as_str()), (id, status));
        assert_eq!(job.outcome_value(), result, "{answer}");
        assert_eq!(job.object, "job", "{answer}");
    }
    // A `job` that is no job, or a wrapping twice, is still refused.
    for body in [
        r#"{"object":"video_generation","job":{"id":"job_x"}}"#,
        r#"{"object":"video_generation","job":"job_x"}"#,
        r#"{"object":"video_generation","job":{"id":"job_x","status":null}}"#,
        r#"{"job":{"job":{"id":"job_x","status":"completed"}}}"#,
        r#"{"job":{"id":"job_x","status":"completed"},"job":null}"#,
    ] {
        assert!(serde_json::from_str::<JobObject>(body).is_err(), "{body}");
    }
}
