//! From a signed request to the row it becomes: the one path that the webhook handler, the
//! operator's replay and the benchmark's per-request baseline share.
//!
//! [`verify_delivery`] checks the signature (any configured secret, timestamp within the
//! tolerance), reads the body, and answers a [`Delivery`]: an event keyed for dedupe, or, for
//! a verified body that names no job, a dead letter kept for an operator. Nothing here touches
//! the database.

use bytes::Bytes;
use sume_wire::{
    body_key, dedupe_key, parse_event, usable_header_id, verify, Secret, SignedHeaders, VerifyError,
};

use crate::db::{NewDeadLetter, NewEvent};

/// The headers of a delivery that matter, as received.
#[derive(Debug, Clone, Copy, Default)]
pub struct Received<'a> {
    /// `X-Sume-Timestamp`.
    pub timestamp: Option<&'a str>,
    /// `X-Sume-Signature`.
    pub signature: Option<&'a str>,
    /// `X-Sume-Event-Id`.
    pub event_id: Option<&'a str>,
}

/// A verified delivery, ready for the inbox.
#[derive(Debug)]
pub enum Delivery {
    /// An event for a job.
    Event(NewEvent),
    /// Valid signature, but the body names no job: kept as a dead letter.
    DeadLetter(NewDeadLetter),
}

impl Delivery {
    /// The signature's timestamp (Unix seconds).
    pub fn signed_at(&self) -> i64 {
        match self {
            Delivery::Event(e) => e.signed_at,
            Delivery::DeadLetter(d) => d.signed_at,
        }
    }
}

/// A delivery whose signature checked out.
#[derive(Debug)]
pub struct Verified {
    /// What to store.
    pub delivery: Delivery,
    /// Which of the configured secrets verified it (rotation is watched by this).
    pub secret_index: usize,
    /// The body has an event id of its own and `X-Sume-Event-Id` names another: counted and
    /// kept with the row, the body's id is the key.
    pub header_mismatch: bool,
}

/// What the headers alone can refuse (malformed or missing signature or timestamp, a stale
/// timestamp): checked before the body is read, so a request that cannot verify costs no wait.
pub fn check_headers(
    received: Received<'_>,
    now: i64,
    tolerance_secs: u64,
) -> Result<(), VerifyError> {
    let signed = SignedHeaders {
        timestamp: received.timestamp,
        signature: received.signature,
    };
    sume_wire::check_headers(signed, now, tolerance_secs)
}

/// Verifies `body` against `secrets` at `now` (Unix seconds; the timestamp must be within
/// `tolerance_secs` of it, 0 for no freshness check) and reads it into what the inbox stores.
pub fn verify_delivery(
    received: Received<'_>,
    body: Bytes,
    secrets: &[Secret],
    now: i64,
    tolerance_secs: u64,
) -> Result<Verified, VerifyError> {
    let signed = SignedHeaders {
        timestamp: received.timestamp,
        signature: received.signature,
    };
    let secret_index = verify(signed, &body, secrets, now, tolerance_secs)?;
    // verify() has read both headers, so they are present and the timestamp is a number.
    let signed_at: i64 = received
        .timestamp
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or_default();
    let signature = received.signature.unwrap_or_default().to_owned();
    let header_id = usable_header_id(received.event_id).map(str::to_owned);
    let mut header_mismatch = false;
    let delivery = match parse_event(&body) {
        Ok(parsed) => Delivery::Event(NewEvent {
            event_id: {
                let key = dedupe_key(&parsed);
                header_mismatch =
                    parsed.body_event_id.is_some() && header_id.as_ref().is_some_and(|h| *h != key);
                key
            },
            header_event_id: header_id,
            job_id: parsed.job_id,
            event_type: parsed.event_type,
            status: parsed.status,
            result: parsed.result,
            body,
            signed_at,
            signature,
        }),
        Err(e) => Delivery::DeadLetter(NewDeadLetter {
            dead_letter_id: body_key(&body),
            reason: e.to_string(),
            header_event_id: header_id,
            body,
            signed_at,
            signature,
        }),
    };
    Ok(Verified {
        delivery,
        secret_index,
        header_mismatch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new("whsec_test")
    }

    fn received<'a>(ts: &'a str, sig: &'a str) -> Received<'a> {
        Received {
            timestamp: Some(ts),
            signature: Some(sig),
            event_id: Some("evt_header"),
        }
    }

    #[test]
    fn a_signed_event_becomes_an_event_row() {
        let body = Bytes::from_static(
            br#"{"id":"evt_1","type":"job.completed","data":{"object":{"id":"job_1","status":"completed"}}}"#,
        );
        let sig = sume_wire::signature_header(&[secret()], 1000, &body);
        let v = verify_delivery(received("1000", &sig), body, &[secret()], 1010, 300).unwrap();
        let Delivery::Event(e) = v.delivery else {
            panic!("not an event")
        };
        assert_eq!(e.job_id, "job_1");
        assert_eq!(e.signed_at, 1000);
        assert_eq!(e.signature, sig);
    }

    #[test]
    fn a_signed_body_naming_no_job_is_a_dead_letter() {
        let body = Bytes::from_static(b"not json");
        let sig = sume_wire::signature_header(&[secret()], 1000, &body);
        let v = verify_delivery(received("1000", &sig), body, &[secret()], 1000, 300).unwrap();
        let Delivery::DeadLetter(d) = v.delivery else {
            panic!("not a dead letter")
        };
        assert_eq!(d.header_event_id.as_deref(), Some("evt_header"));
        assert!(!d.reason.is_empty());
    }

    #[test]
    fn a_wrong_or_stale_signature_is_refused() {
        let body = Bytes::from_static(b"{}");
        let sig = sume_wire::signature_header(&[Secret::new("whsec_other")], 1000, &body);
        assert!(
            verify_delivery(received("1000", &sig), body.clone(), &[secret()], 1000, 300).is_err()
        );
        let sig = sume_wire::signature_header(&[secret()], 1000, &body);
        assert!(verify_delivery(received("1000", &sig), body, &[secret()], 5000, 300).is_err());
    }
}
