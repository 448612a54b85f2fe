//! The event body's reading, case by case: both shapes, the dedupe key, what is refused.

use super::*;

#[test]
fn reads_the_guide_shape() {
    let e = parse_event(br#"{"event":"job.completed","job_id":"job_early"}"#).unwrap();
    assert_eq!(e.job_id, "job_early");
    assert_eq!(e.event_type.as_deref(), Some("job.completed"));
    assert_eq!(e.status.as_deref(), Some("completed"));
    assert_eq!(e.body_event_id, None);
    assert_eq!(e.result, None);
}

#[test]
fn reads_the_envelope_shape() {
    let body = br#"{"id":"evt_1","type":"job.failed","data":{"object":{"id":"job_9",
        "object":"job","status":"failed","error":{"code":"nsfw"}}}}"#;
    let e = parse_event(body).unwrap();
    assert_eq!(e.job_id, "job_9");
    assert_eq!(e.body_event_id.as_deref(), Some("evt_1"));
    assert_eq!(e.status.as_deref(), Some("failed"));
    let result: Value = serde_json::from_str(e.result.as_deref().unwrap()).unwrap();
    assert_eq!(result, serde_json::json!({"error": {"code": "nsfw"}}));
}

#[test]
fn object_status_beats_event_type() {
    let body = br#"{"type":"job.updated","data":{"object":{"id":"j","status":"running"}}}"#;
    assert_eq!(
        parse_event(body).unwrap().status.as_deref(),
        Some("running")
    );
}

#[test]
fn refuses_garbage_clearly() {
    assert!(matches!(
        parse_event(b"not json"),
        Err(ParseError::NotJson(_))
    ));
    assert_eq!(parse_event(b"[1,2]"), Err(ParseError::NotAnObject));
    assert_eq!(
        parse_event(br#"{"event":"job.completed"}"#),
        Err(ParseError::NoJobId)
    );
    assert_eq!(parse_event(br#"{"job_id":17}"#), Err(ParseError::BadJobId));
    assert_eq!(parse_event(br#"{"job_id":" "}"#), Err(ParseError::BadJobId));
    let long = format!(r#"{{"job_id":"{}"}}"#, "x".repeat(300));
    assert_eq!(parse_event(long.as_bytes()), Err(ParseError::BadJobId));
}

#[test]
fn the_fast_reading_agrees_with_the_general_one() {
    let bodies: &[&str] = &[
        r#"{"event":"job.completed","job_id":"job_early"}"#,
        r#"{"event":"job.completed","job_id":"j","status":"succeeded","result":{"url":"u"}}"#,
        r#"{"id":"evt_1","type":"job.failed","data":{"object":{"id":"job_9","status":"failed","error":{"code":"x"}}}}"#,
        r#"{"id":"evt_1","type":"job.completed","data":{"object":{"id":"job_9","result":null,"error":"e"}}}"#,
        r#"{"id":"evt_1","type":"job.completed","data":{"object":{"status":"ready"}},"job_id":"jj"}"#,
        r#"{"id":17,"type":42,"event":"job.expired","job_id":"j\u00e9"}"#,
        r#"{"type":"job.updated","data":{"object":{"id":"j","status":"running"}}}"#,
        r#"{"type":"job.updated","data":null,"job_id":"j"}"#,
        r#"{"data":{"object":null},"job_id":"j","result":[1,2]}"#,
        r#"{"job_id":17}"#,
        r#"{"job_id":" "}"#,
        r#"{"event":"job.completed"}"#,
        r#"{"data":{"object":{"id":5}},"job_id":"j"}"#,
        "  {\"job_id\" : \"spaced\" , \"status\":\"error\" }  ",
    ];
    for body in bodies {
        let fast = parse_fast(body.as_bytes()).expect(body);
        assert_eq!(fast, parse_general(body.as_bytes()), "{body}");
    }
    // What the fast reading leaves to the general one.
    for body in [
        r#"{"job_id":"a","job_id":"b"}"#,
        r#"{"data":"text","job_id":"j"}"#,
        r#"{"data":{"object":"text"},"job_id":"j"}"#,
        "[1]",
        "not json",
    ] {
        assert!(parse_fast(body.as_bytes()).is_none(), "{body}");
    }
    assert_eq!(
        parse_event(br#"{"job_id":"a","job_id":"b"}"#)
            .unwrap()
            .job_id,
        "b"
    );
    assert_eq!(
        parse_event(br#"{"data":{"object":"text"},"job_id":"j"}"#)
            .unwrap()
            .job_id,
        "j"
    );
}

#[test]
fn nul_characters_never_reach_the_database() {
    let body = br#"{"event":"job.done\u0000","job_id":"j","status":"completed\u0000","result":{"t":"a\u0000b"}}"#;
    let e = parse_event(body).unwrap();
    assert_eq!((e.status, e.event_type, e.result), (None, None, None));
    // A status holding one is read from the type instead, as when there is none.
    let body = br#"{"event":"job.completed","job_id":"j","status":"comp\u0000leted"}"#;
    assert_eq!(
        parse_event(body).unwrap().status.as_deref(),
        Some("completed")
    );
    let e =
        parse_event(br#"{"job_id":"j","status":"completed","result":{"t":"\\u0000"}}"#).unwrap();
    assert!(e.result.is_some(), "an escaped backslash is not a NUL");
    assert!(parse_event(br#"{"job_id":"j\u0000"}"#).is_err());
}

/// `{"event":"job.completed","status":""}` stored the status `""`, which closes nothing, so the
/// job waited for a poll; a blank status is read from the type, as a missing one is.
#[test]
fn a_blank_status_is_read_from_the_type() {
    for status in ["", "  ", "\\t"] {
        let body = format!(
            r#"{{"event":"job.completed","job_id":"job_b","status":"{status}","result":{{"a":1}}}}"#
        );
        let e = parse_event(body.as_bytes()).unwrap();
        assert_eq!(e.status.as_deref(), Some("completed"), "{body}");
        assert_eq!(dedupe_key(&e), "job_b/job.completed");
        let envelope = format!(
            r#"{{"id":"evt_b","type":"job.failed","data":{{"object":{{"id":"job_b","status":"{status}"}}}}}}"#
        );
        let e = parse_event(envelope.as_bytes()).unwrap();
        assert_eq!(e.status.as_deref(), Some("failed"), "{envelope}");
    }
    // No type to read it from: kept as sent (and its key as before).
    let e = parse_event(br#"{"job_id":"job_b","status":""}"#).unwrap();
    assert_eq!(e.status.as_deref(), Some(""));
    // A type that names no status leaves it too.
    let e = parse_event(br#"{"event":"ping","job_id":"job_b","status":" "}"#).unwrap();
    assert_eq!(e.status.as_deref(), Some(" "));
}

#[test]
fn the_dedupe_key_comes_from_the_signed_body_only() {
    let envelope = br#"{"id":"evt_b","type":"job.completed","data":{"object":{"id":"j"}}}"#;
    assert_eq!(dedupe_key(&parse_event(envelope).unwrap()), "evt_b");
    let guide = br#"{"event":"job.completed","job_id":"job_early"}"#;
    assert_eq!(
        dedupe_key(&parse_event(guide).unwrap()),
        "job_early/job.completed"
    );
    // Stable per job and event type: a redelivery whose body differs still deduplicates.
    let again = br#"{"event":"job.completed","job_id":"job_early","attempt":2}"#;
    assert_eq!(
        dedupe_key(&parse_event(again).unwrap()),
        "job_early/job.completed"
    );
    let status_only = br#"{"job_id":"j","status":"failed"}"#;
    assert_eq!(dedupe_key(&parse_event(status_only).unwrap()), "j/failed");
    let nothing = br#"{"job_id":"j"}"#;
    assert_eq!(dedupe_key(&parse_event(nothing).unwrap()), "j/event");
}

#[test]
fn a_body_key_is_a_stable_hash() {
    let hashed = body_key(b"x");
    assert!(hashed.starts_with("sha256:") && hashed.len() == 7 + 64);
    assert_eq!(hashed, body_key(b"x"), "stable");
    assert_ne!(hashed, body_key(b"other"));
}

#[test]
fn a_header_id_is_usable_when_it_is_an_id() {
    assert_eq!(usable_header_id(Some(" evt_1 ")), Some("evt_1"));
    assert_eq!(usable_header_id(Some("  ")), None);
    assert_eq!(usable_header_id(Some("a\u{7}b")), None);
    assert_eq!(usable_header_id(Some(&"x".repeat(MAX_ID_LEN + 1))), None);
    assert_eq!(usable_header_id(None), None);
}

/// PostgreSQL's `jsonb` refuses an escaped surrogate that is not half of a pair (`\udfff`
/// alone): in a result each is mended into U+FFFD, so the insert does not fail and the rest of
/// the result is kept (the raw body keeps the original). A pair (an emoji) is kept as it is.
#[test]
fn lone_surrogates_never_reach_the_database() {
    for (result, mended) in [
        (r#"{"t":"\udfff"}"#, r#"{"t":"\ufffd"}"#),
        (
            r#"{"t":"a\ud800","u":"https://cdn.example/x.png"}"#,
            r#"{"t":"a\ufffd","u":"https://cdn.example/x.png"}"#,
        ),
        (r#"{"\udc00":1}"#, r#"{"\ufffd":1}"#),
    ] {
        let body = format!(r#"{{"job_id":"j","status":"completed","result":{result}}}"#);
        let e = parse_event(body.as_bytes()).unwrap();
        assert_eq!(e.result.as_deref(), Some(mended), "{result}");
        assert_eq!(e.status.as_deref(), Some("completed"));
    }
    let failed = br#"{"job_id":"j","status":"failed","error":{"message":"\ud800"}}"#;
    let e = parse_event(failed).unwrap();
    assert!(e.result.unwrap().contains(r"\ufffd"));
    for kept in [r#"{"t":"\ud83d\ude00"}"#, r#"{"t":"\\udfff"}"#] {
        let body = format!(r#"{{"job_id":"j","status":"completed","result":{kept}}}"#);
        assert_eq!(
            parse_event(body.as_bytes()).unwrap().result.as_deref(),
            Some(kept)
        );
    }
}

#[test]
fn a_result_that_could_not_be_read_back_is_left_to_the_raw_body() {
    let deep = |depth: usize| {
        format!(
            r#"{{"event":"job.completed","job_id":"j","result":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    let kept = parse_event(deep(crate::MAX_RESULT_DEPTH).as_bytes()).unwrap();
    assert!(kept.result.is_some());
    for body in [
        deep(crate::MAX_RESULT_DEPTH + 1),
        deep(127),
        r#"{"event":"job.completed","job_id":"j","result":{"n":1e400}}"#.to_owned(),
        r#"{"event":"job.completed","job_id":"j","result":{"n":1e-20000}}"#.to_owned(),
        r#"{"event":"job.completed","job_id":"j","result":{"url":"u","n":[0.5e-16383]}}"#
            .to_owned(),
    ] {
        let e = parse_event(body.as_bytes()).unwrap();
        assert_eq!((e.job_id.as_str(), e.result), ("j", None), "{body}");
        assert_eq!(e.status.as_deref(), Some("completed"));
    }
}

#[test]
fn a_type_too_long_for_an_id_is_keyed_by_its_hash() {
    let kind = format!("job.{}", "x".repeat(3000));
    let body = format!(r#"{{"event":"{kind}","job_id":"job_1"}}"#);
    let key = dedupe_key(&parse_event(body.as_bytes()).unwrap());
    assert!(key.len() <= MAX_EVENT_ID_LEN, "{}", key.len());
    assert!(key.starts_with("job_1/sha256:"), "{key}");
    assert_eq!(key, dedupe_key(&parse_event(body.as_bytes()).unwrap()));
    let other = format!(r#"{{"event":"{kind}y","job_id":"job_1"}}"#);
    assert_ne!(key, dedupe_key(&parse_event(other.as_bytes()).unwrap()));
    // The longest key: a job id and a type each of the longest usable length.
    let (job, usable) = ("j".repeat(MAX_ID_LEN), "t".repeat(MAX_ID_LEN));
    let longest = format!(r#"{{"event":"{usable}","job_id":"{job}"}}"#);
    let longest = dedupe_key(&parse_event(longest.as_bytes()).unwrap());
    assert_eq!(longest.len(), MAX_EVENT_ID_LEN);
}

#[test]
fn a_status_from_the_type_reads_the_job_prefix_in_any_case_and_never_an_empty_one() {
    let status = |body: &str| {
        let general = parse_general(body.as_bytes()).unwrap().status;
        let fast = parse_fast(body.as_bytes()).unwrap().unwrap().status;
        assert_eq!(fast, general, "{body}");
        general
    };
    for (event, expected) in [
        ("JOB.COMPLETED", Some("COMPLETED")),
        ("Job.Failed", Some("Failed")),
        (" job. completed ", Some("completed")),
        ("job.completed", Some("completed")),
        // Nothing after the prefix names no status (it was the empty status `""`).
        ("job.", None),
        (" JOB.  ", None),
        // Only `job.` is Sume's: another prefix, or none, names no status.
        ("completed", None),
        ("video.failed", None),
        ("jobs.failed", None),
        ("jöb", None),
    ] {
        let body = format!(r#"{{"event":{event:?},"job_id":"j"}}"#);
        assert_eq!(status(&body).as_deref(), expected, "{body}");
    }
    // A status the body names is still taken as it is.
    let named = r#"{"event":"JOB.COMPLETED","job_id":"j","status":"running"}"#;
    assert_eq!(status(named).as_deref(), Some("running"));
}
