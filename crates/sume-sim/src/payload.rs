//! What the simulator says about a job: results, errors, event ids and webhook bodies.
//!
//! Results and errors are realistic (URLs, sizes, a model name, credits), derived from the job
//! id so a job always answers the same bytes. Event ids are `evt_` plus a hash of job id and
//! event type, so a retry or a duplicate repeats the id and a different event of the same job
//! does not. Bodies come in the two shapes Sume is seen to send: the guide's flat one and the
//! documented envelope whose `data.object` is the job object.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::job::{rfc3339, Job, Kind, Outcome, Phase};

/// The API version the envelope names.
pub const API_VERSION: &str = "2024-06-01";

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update(b"|");
    }
    h.finalize().into()
}

/// `evt_` + 24 hex digits, a function of job id and event type only.
pub fn event_id(job_id: &str, event_type: &str) -> String {
    format!("evt_{}", &hex::encode(digest(&[job_id, event_type]))[..24])
}

/// A small number in `lo..lo+span` fixed by the job id and a salt.
fn figure(job_id: &str, salt: &str, lo: u64, span: u64) -> u64 {
    let d = digest(&[job_id, salt]);
    let n = u64::from_le_bytes(d[..8].try_into().expect("8 bytes"));
    lo + n % span.max(1)
}

fn cdn(job: &Job, file: &str) -> String {
    format!("https://cdn.sume.so/outputs/{}/{file}", job.id)
}

fn video(job: &Job, model: &str) -> Value {
    let seconds = figure(&job.id, "seconds", 4, 12);
    json!({
        "video": {
            "url": cdn(job, "video.mp4"),
            "mime_type": "video/mp4",
            "width": 1280,
            "height": 720,
            "duration_seconds": seconds,
            "size_bytes": seconds * figure(&job.id, "rate", 380_000, 240_000),
        },
        "thumbnail_url": cdn(job, "thumbnail.jpg"),
        "model": model,
        "credits_used": seconds * 2,
    })
}

fn image(job: &Job, file: &str, model: &str) -> Value {
    json!({
        "url": cdn(job, file),
        "mime_type": "image/png",
        "width": 1024,
        "height": 1024,
        "size_bytes": figure(&job.id, file, 900_000, 1_400_000),
        "model": model,
    })
}

/// The `result` of a job that completed.
pub fn result(job: &Job) -> Value {
    match job.kind {
        Kind::VideoGeneration => video(job, "sume-video-2"),
        Kind::AdVideo => video(job, "sume-ads-1"),
        Kind::AvatarVideo => video(job, "sume-avatar-video-1"),
        Kind::ImageGeneration => json!({
            "images": [image(job, "image-0.png", "sume-image-3"), image(job, "image-1.png", "sume-image-3")],
            "seed": figure(&job.id, "seed", 1, 4_000_000_000),
            "credits_used": 2,
        }),
        Kind::FaceSwap => json!({
            "image": image(job, "swap.png", "sume-faceswap-1"),
            "faces_detected": figure(&job.id, "faces", 1, 3),
            "credits_used": 1,
        }),
        Kind::ReferenceAnalysis => json!({
            "analysis": {
                "subjects": ["person", "product"],
                "style": "studio lighting, shallow depth of field",
                "palette": ["#1f2a44", "#f2c14e", "#f5f5f5"],
                "aspect_ratio": "16:9",
            },
            "model": "sume-vision-1",
            "credits_used": 1,
        }),
        Kind::Avatar => json!({
            "avatar": {
                "id": format!("avt_{}", &hex::encode(digest(&[&job.id, "avatar"]))[..16]),
                "preview_url": cdn(job, "preview.jpg"),
                "voice": "neutral-en-1",
            },
            "credits_used": 20,
        }),
    }
}

/// The `error` of a job that did not complete.
pub fn error(outcome: Outcome) -> Value {
    let (code, message) = match outcome {
        Outcome::Failed => (
            "generation_failed",
            "The model could not produce an output for this input.",
        ),
        Outcome::Canceled => ("canceled", "The job was canceled before it finished."),
        Outcome::Expired => (
            "expired",
            "The job waited in the queue past its deadline and expired.",
        ),
        Outcome::Completed => ("none", "The job completed."),
    };
    json!({ "code": code, "message": message })
}

/// One webhook event, built once and sent as the same bytes on every attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub job_id: String,
    pub event_id: String,
    pub event_type: String,
    pub body: Vec<u8>,
}

/// The event that reports a job's end.
pub fn terminal_event(job: &Job) -> Event {
    build(job, Phase::Ended, job.outcome.event_type())
}

/// The `job.running` event the late-non-terminal fault sends after the terminal one.
pub fn running_event(job: &Job) -> Event {
    build(job, Phase::Running, "job.running")
}

fn build(job: &Job, phase: Phase, event_type: &str) -> Event {
    let event_id = event_id(&job.id, event_type);
    let object = job.object_in(phase);
    let at = match phase {
        Phase::Ended => job.ended_wall(),
        _ => job.running_wall(),
    };
    let body = if job.envelope {
        json!({
            "id": event_id,
            "object": "event",
            "type": event_type,
            "api_version": API_VERSION,
            "created_at": rfc3339(at),
            "data": { "object": object },
        })
    } else {
        let mut flat = Map::new();
        flat.insert("event".into(), event_type.into());
        flat.insert("job_id".into(), job.id.clone().into());
        flat.insert("status".into(), object.status.into());
        flat.insert("job_type".into(), job.kind.object().into());
        for (k, v) in [
            ("created_at", object.created_at),
            ("completed_at", object.completed_at),
            ("result", object.result),
            ("error", object.error),
        ] {
            if let Some(v) = v {
                flat.insert(k.into(), v);
            }
        }
        Value::Object(flat)
    };
    Event {
        job_id: job.id.clone(),
        event_id,
        event_type: event_type.to_owned(),
        body: serde_json::to_vec(&body).expect("event serializes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_stable_and_distinct() {
        let a = event_id("job_1", "job.completed");
        assert_eq!(a, event_id("job_1", "job.completed"));
        assert_ne!(a, event_id("job_1", "job.running"));
        assert_ne!(a, event_id("job_2", "job.completed"));
        assert!(a.starts_with("evt_") && a.len() == 28);
    }

    #[test]
    fn errors_name_a_code() {
        for o in [Outcome::Failed, Outcome::Canceled, Outcome::Expired] {
            assert!(error(o)["code"].is_string());
        }
    }
}
