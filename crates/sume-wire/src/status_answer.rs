//! What a 200 of the status endpoint says about the job asked: its job object, read as a
//! webhook body's is ([`JobObject`]), or, when the body was cut at [`MAX_ANSWER_BYTES`], the
//! job's `id` and `status` read from before the cut.
//!
//! A job object is a few KiB; one past the cap holds a result far larger than any this service
//! keeps. What came before the cut is read as far as it goes: when it is valid JSON up to the
//! cut and names the object's `id` and `status` (Sume writes them first), the answer is Sume's
//! word about the job, and the job closes on a terminal status with no result, as it does when
//! a webhook's result is left out. Otherwise the answer is no answer: said so, and asked again.

use std::borrow::Cow;
use std::fmt;

use serde::de::{IgnoredAny, MapAccess, Visitor};

use crate::status_client::{read_json, MAX_ANSWER_BYTES, MAX_SHOWN_CHARS};
use crate::{mend_lone_surrogates, JobObject, StatusOutcome};

/// What a 200 about `job_id` says, and what of it was left out (`None` when it was read
/// whole); `cut` when the body was cut at [`MAX_ANSWER_BYTES`]. `body_kind` names the answer's
/// `Content-Encoding` and `Content-Type` when they say it may not be JSON as sent
/// ([`crate::shown::body_kind`]): a body that does not read is said to have come so.
pub(crate) fn read_job(
    body: &[u8],
    cut: bool,
    job_id: &str,
    body_kind: Option<&str>,
) -> (StatusOutcome, Option<String>) {
    let came = body_kind.map(|k| format!(" ({k})")).unwrap_or_default();
    let (read, left_out) = match read_json::<JobObject>(body) {
        Ok(job) => (Ok(job), None),
        Err(_) if cut => match head_of_cut(body) {
            Some(job) => (
                Ok(job),
                Some(format!(
                    "body cut at {MAX_ANSWER_BYTES} bytes: result left out"
                )),
            ),
            None => {
                return (
                    StatusOutcome::Unexpected(format!(
                        "200 with a body past {MAX_ANSWER_BYTES} bytes{came}, cut before its job's id and status"
                    )),
                    None,
                )
            }
        },
        Err(e) => (Err(e), None),
    };
    let outcome = match read.map(JobObject::storable) {
        Ok(Some(job)) if job.id == job_id => return (StatusOutcome::Found(job), left_out),
        Ok(Some(job)) => StatusOutcome::Unexpected(format!(
            "200 about another job, {:?}",
            job.id.chars().take(MAX_SHOWN_CHARS).collect::<String>()
        )),
        Ok(None) => {
            StatusOutcome::Unexpected("200 with a NUL character in the job's id or status".into())
        }
        Err(e) => StatusOutcome::Unexpected(format!("200 with unreadable body{came}: {e}")),
    };
    (outcome, None)
}

/// The job of a body cut short: its top-level `id` and `status`, when both come before the cut
/// and everything before it is valid JSON (the reading ends at the cut, not at an error),
/// with lone surrogates mended as in a whole answer. Nothing else of it is kept.
fn head_of_cut(body: &[u8]) -> Option<JobObject> {
    let text = text_of_cut(body)?;
    let mut head = Head::default();
    let mut reader = serde_json::Deserializer::from_str(&text);
    match serde::Deserializer::deserialize_map(&mut reader, &mut head) {
        Err(e) if e.is_eof() => {}
        _ => return None,
    }
    Some(JobObject {
        id: head.id?,
        object: "job".to_owned(),
        status: head.status?,
        created_at: None,
        completed_at: None,
        result: None,
        error: None,
        kept_text: None,
    })
}

/// The text of a body cut short, up to the last whole character when the cut fell inside one,
/// with lone surrogates mended as in a whole answer; `None` when it is no UTF-8 before the cut.
pub(crate) fn text_of_cut(body: &[u8]) -> Option<Cow<'_, str>> {
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        // Cut inside a character: the text before it.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&body[..e.valid_up_to()]).ok()?,
        Err(_) => return None,
    };
    Some(mend_lone_surrogates(text))
}

/// The `id` and `status` met so far at the top level of a job object.
#[derive(Default)]
struct Head {
    id: Option<String>,
    status: Option<String>,
}

impl<'de> Visitor<'de> for &mut Head {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a job object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "id" => self.id = Some(map.next_value()?),
                "status" => self.status = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{"id":"job_1","status":"completed","result":{"text":"xxx...` cut at the cap.
    fn cut(head: &str) -> Vec<u8> {
        let mut body = format!(r#"{head}"result":{{"text":""#).into_bytes();
        body.resize(MAX_ANSWER_BYTES, b'x');
        body
    }

    /// A body past the cap whose `id` and `status` come first: Sume's word about the job,
    /// without its result, and said so.
    #[test]
    fn a_cut_answer_naming_its_status_first_is_read_up_to_it() {
        for head in [
            r#"{"id":"job_1","status":"completed","#,
            r#"{ "object" : "job", "status":"completed", "meta":[1e400,{"a":[[]]}], "id":"job_1" , "#,
            r#"{"id":"job_1","status":"failed","status":"completed","#,
        ] {
            let (outcome, left_out) = read_job(&cut(head), true, "job_1", None);
            let StatusOutcome::Found(job) = outcome else {
                panic!("{head}: {outcome:?}");
            };
            assert_eq!(
                (job.id.as_str(), job.status.as_str()),
                ("job_1", "completed")
            );
            assert_eq!((job.result, job.error), (None, None));
            assert_eq!(
                left_out.as_deref(),
                Some("body cut at 1048576 bytes: result left out")
            );
        }
        // Cut inside a character, and a lone surrogate mended in the status.
        let mut body = br#"{"id":"job_1","status":"ready\udfff","result":"caf"#.to_vec();
        body.extend_from_slice(
            &"é".repeat(MAX_ANSWER_BYTES).as_bytes()[..MAX_ANSWER_BYTES - body.len() - 1],
        );
        let (outcome, _) = read_job(&body, true, "job_1", None);
        assert!(
            matches!(&outcome, StatusOutcome::Found(j) if j.status == "ready\u{fffd}"),
            "{outcome:?}"
        );
        let (other, _) = read_job(
            &cut(r#"{"id":"job_2","status":"failed","#),
            true,
            "job_1",
            None,
        );
        assert_eq!(
            other,
            StatusOutcome::Unexpected("200 about another job, \"job_2\"".into())
        );
    }

    /// A body past the cap whose status is not before the cut, or that is broken before it,
    /// says nothing about the job: no answer, said so, never a status Sume did not give.
    #[test]
    fn a_cut_answer_without_its_status_before_the_cut_is_no_answer() {
        for head in [
            r#"{"id":"job_1","#,
            r#"{"status":"completed","#,
            r#"{"id":"job_1","status":"completed",}"x":1,"#,
            r#"{"id":"job_1","status":7,"#,
            r#"[{"id":"job_1","status":"completed"},"#,
            r#"{"id":"job_1","result":{"status":"completed","#,
        ] {
            let (outcome, left_out) = read_job(&cut(head), true, "job_1", None);
            let StatusOutcome::Unexpected(what) = &outcome else {
                panic!("{head}: {outcome:?}");
            };
            assert!(
                what.starts_with("200 with a body past 1048576 bytes, cut before"),
                "{what}"
            );
            assert_eq!(left_out, None);
        }
        // The same head in a body not cut is an unreadable body, as before.
        let (outcome, _) = read_job(
            br#"{"id":"job_1","status":"completed","#,
            false,
            "job_1",
            None,
        );
        assert!(
            matches!(&outcome, StatusOutcome::Unexpected(w) if w.starts_with("200 with unreadable body")),
            "{outcome:?}"
        );
    }
}
