//! Signed webhook deliveries as Sume sends them: a `job.completed` envelope of about 600 bytes,
//! each with its own job id and event id, signed with `sume_wire::signature_header`.
//!
//! The ids carry a per-run prefix, so two runs against the same database never collide, and a
//! counter, so every delivery of a run is new to the inbox: the benchmark measures stores, not
//! duplicates.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use sume_wire::{signature_header, Secret};

/// One delivery, ready to send: the three headers and the raw body.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The body's `id`, the key the daemon stores it under.
    pub event_id: String,
    /// `X-Sume-Event-Id`: the body's `id`, or another id of the same delivery when the
    /// generator was made [`Generator::with_other_header_ids`].
    pub header_id: String,
    /// The job the event is about; new for every delivery.
    pub job_id: String,
    /// `X-Sume-Timestamp`, Unix seconds.
    pub timestamp: i64,
    /// `X-Sume-Signature`, `v1=<hex>`.
    pub signature: String,
    /// The JSON envelope exactly as signed.
    pub body: Bytes,
}

/// Makes deliveries with ids unique within a run. Shared by every sender (`&self`).
#[derive(Debug)]
pub struct Generator {
    secrets: Vec<Secret>,
    run_id: String,
    next: AtomicU64,
    other_header_ids: bool,
    mixed: bool,
}

impl Generator {
    /// `run_id` prefixes every id; keep it short (a few characters) and unique per run.
    pub fn new(secret: Secret, run_id: impl Into<String>) -> Generator {
        Generator {
            secrets: vec![secret],
            run_id: run_id.into(),
            next: AtomicU64::new(0),
            other_header_ids: false,
            mixed: false,
        }
    }

    /// Deliveries whose `X-Sume-Event-Id` is not the body's `id` (`hdr_<id>`): the daemon
    /// then looks for a row stored under the header's id before 0004_signed_keys, once per
    /// delivery, as for every body whose key differs from the header's.
    pub fn with_other_header_ids(mut self) -> Generator {
        self.other_header_ids = true;
        self
    }

    /// Deliveries of every shape in turn: the documented envelope with its `id` as the header's
    /// id, the same under another header id, the guide's flat body (no `id`) under the header
    /// id `evt_<job>`, and the flat body under its own key as the header's id.
    pub fn with_mixed_shapes(mut self) -> Generator {
        self.mixed = true;
        self
    }

    /// How many deliveries this generator has made.
    pub fn made(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// The job id of delivery `n` (the `n`-th made, from 0), known before it is made: what an
    /// application that registers its job before the webhook arrives would hold.
    pub fn job_id(&self, n: u64) -> String {
        format!("job_{}_{n}", self.run_id)
    }

    /// The next delivery, signed at `now` (Unix seconds).
    pub fn next(&self, now: i64) -> Delivery {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let job_id = self.job_id(n);
        let shape = if self.mixed { n % 4 } else { 0 };
        let (event_id, body) = match shape {
            0 | 1 => {
                let event_id = format!("evt_{}_{n}", self.run_id);
                let body = envelope(&event_id, &job_id, n, now);
                (event_id, body)
            }
            _ => (format!("{job_id}/job.completed"), flat(&job_id)),
        };
        let body = Bytes::from(body);
        let header_id = match shape {
            1 => format!("hdr_{event_id}"),
            2 => format!("evt_{job_id}"),
            _ if self.other_header_ids => format!("hdr_{event_id}"),
            _ => event_id.clone(),
        };
        Delivery {
            signature: signature_header(&self.secrets, now, &body),
            event_id,
            header_id,
            job_id,
            timestamp: now,
            body,
        }
    }
}

fn rfc3339(unix: i64) -> String {
    DateTime::<Utc>::from_timestamp(unix, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The guide's flat body: no `id`, so the daemon keys it `<job>/job.completed`.
pub fn flat(job_id: &str) -> String {
    format!(
        concat!(
            r#"{{"event":"job.completed","job_id":"{job}","status":"completed","#,
            r#""result":{{"url":"https://cdn.sume.so/o/{job}/0.mp4"}}}}"#
        ),
        job = job_id
    )
}

/// The documented envelope: `{"id","type","data":{"object":<the job>}}` with a realistic
/// result (two image URLs with their dimensions, a seed, a duration).
pub fn envelope(event_id: &str, job_id: &str, n: u64, now: i64) -> String {
    // A cheap, deterministic spread of values, so bodies differ beyond their ids.
    let mix = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let seed = mix >> 33;
    let duration_ms = 1_500 + (mix >> 52);
    let created = rfc3339(now - 2 - (duration_ms as i64) / 1000);
    let completed = rfc3339(now);
    let mut s = String::with_capacity(720);
    let _ = write!(
        s,
        concat!(
            r#"{{"id":"{evt}","object":"event","type":"job.completed","created_at":"{done}","#,
            r#""data":{{"object":{{"id":"{job}","object":"job","model":"sume-image-2","#,
            r#""status":"completed","created_at":"{created}","completed_at":"{done}","#,
            r#""input":{{"prompt":"a lighthouse on a basalt cliff at dusk, volumetric light","#,
            r#""width":1024,"height":1024}},"result":{{"images":["#,
            r#"{{"url":"https://cdn.sume.so/o/{job}/0.png","width":1024,"height":1024,"#,
            r#""content_type":"image/png"}},"#,
            r#"{{"url":"https://cdn.sume.so/o/{job}/1.png","width":1024,"height":1024,"#,
            r#""content_type":"image/png"}}],"seed":{seed},"duration_ms":{duration_ms}}}}}}}}}"#,
        ),
        evt = event_id,
        job = job_id,
        created = created,
        done = completed,
        seed = seed,
        duration_ms = duration_ms,
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use sume_wire::{dedupe_key, parse_event, verify, SignedHeaders};

    const NOW: i64 = 1_760_000_000;

    #[test]
    fn deliveries_verify_and_parse_like_sumes() {
        let secret = Secret::new("whsec_bench");
        let generator = Generator::new(secret.clone(), "r1");
        let d = generator.next(NOW);
        let ts = d.timestamp.to_string();
        let headers = SignedHeaders {
            timestamp: Some(&ts),
            signature: Some(&d.signature),
        };
        assert_eq!(verify(headers, &d.body, &[secret], NOW, 300), Ok(0));
        let other = Secret::new("whsec_other");
        assert!(verify(headers, &d.body, &[other], NOW, 300).is_err());

        let parsed = parse_event(&d.body).expect("the body is a valid envelope");
        assert_eq!(parsed.job_id, d.job_id);
        assert_eq!(parsed.body_event_id.as_deref(), Some(d.event_id.as_str()));
        assert_eq!(parsed.status.as_deref(), Some("completed"));
        assert_eq!(parsed.event_type.as_deref(), Some("job.completed"));
        let result: serde_json::Value = serde_json::from_str(
            parsed
                .result
                .as_deref()
                .expect("a completed job has a result"),
        )
        .unwrap();
        assert_eq!(result["images"][1]["width"], 1024);
        assert_eq!(dedupe_key(&parsed), d.event_id);
    }

    #[test]
    fn mixed_shapes_are_keyed_as_the_daemon_keys_them() {
        let g = Generator::new(Secret::new("whsec_t"), "t").with_mixed_shapes();
        let made: Vec<Delivery> = (0..4).map(|_| g.next(NOW)).collect();
        for d in &made {
            let parsed = parse_event(&d.body).expect("a body the daemon parses");
            assert_eq!(dedupe_key(&parsed), d.event_id);
        }
        let equal: Vec<bool> = made.iter().map(|d| d.header_id == d.event_id).collect();
        assert_eq!(equal, [true, false, false, true]);
        assert!(made[2].body.starts_with(b"{\"event\""));
    }

    #[test]
    fn ids_are_unique_and_bodies_realistic() {
        let generator = Generator::new(Secret::new("s"), "r2");
        let mut ids = std::collections::HashSet::new();
        for i in 0..2_000 {
            let d = generator.next(NOW + i);
            assert!(ids.insert(d.event_id.clone()), "event id repeated");
            assert!(ids.insert(d.job_id.clone()), "job id repeated");
            assert!(
                (550..=700).contains(&d.body.len()),
                "body of {} bytes",
                d.body.len()
            );
        }
        assert_eq!(generator.made(), 2_000);
    }
}
