//! Signing and verifying webhook deliveries.
//!
//! A delivery carries `X-Sume-Timestamp: <unix seconds>` and `X-Sume-Signature: v1=<hex>`, the
//! HMAC-SHA256 of `"{timestamp}.{raw body}"` under the integration's signing secret. The header
//! may carry several `v1=` values (the sender signs with an old and a new secret while one is
//! rotated), and the receiver may hold several secrets for the same reason: a delivery is
//! authentic when any value matches any secret. Comparison is constant-time (`Mac::verify_slice`).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

use crate::Secret;

type HmacSha256 = Hmac<Sha256>;

/// Why a delivery was refused. None of these stores anything.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// The delivery has no `X-Sume-Timestamp`.
    #[error("missing X-Sume-Timestamp header")]
    MissingTimestamp,
    /// `X-Sume-Timestamp` is not Unix seconds in plain decimal digits (no sign, no leading
    /// zero): any other spelling of the same number would sign a different string than the
    /// one kept to re-verify the event.
    #[error("X-Sume-Timestamp is not Unix seconds written in decimal digits")]
    BadTimestamp,
    /// A verifying header sent more than once, or not as ASCII text.
    #[error("{name} {why}")]
    UnreadableHeader {
        /// The header, as Sume names it.
        name: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The signature is authentic but the timestamp is too far from now: a replay, or a clock
    /// out of step. The docs give no tolerance; the caller chooses it.
    #[error("timestamp is {age_secs}s away from now, outside the {tolerance_secs}s tolerance")]
    StaleTimestamp {
        /// `now - timestamp` in seconds; negative for a timestamp in the future.
        age_secs: i64,
        /// The tolerance the delivery was checked against, in seconds.
        tolerance_secs: u64,
    },
    /// The delivery has no `X-Sume-Signature`.
    #[error("missing X-Sume-Signature header")]
    MissingSignature,
    /// `X-Sume-Signature` holds no `v1=<64 hex>` value (other schemes and malformed values are
    /// skipped).
    #[error("X-Sume-Signature carries no v1= value")]
    NoV1Signature,
    /// `X-Sume-Signature` carries more than [`MAX_SIGNATURE_VALUES`] values.
    #[error("X-Sume-Signature carries more than {MAX_SIGNATURE_VALUES} values")]
    TooManySignatures,
    /// Forged, altered in transit, or signed under a secret this receiver does not hold.
    #[error("no v1 signature matches any configured secret")]
    Mismatch,
    /// The receiver was given no secret to check against: a configuration error, not the
    /// sender's.
    #[error("no webhook secret is configured")]
    NoSecrets,
}

/// The verifying headers of one delivery, as received (kept so the event can be re-verified).
#[derive(Debug, Clone, Copy)]
pub struct SignedHeaders<'a> {
    /// `X-Sume-Timestamp` as received, `None` when absent.
    pub timestamp: Option<&'a str>,
    /// `X-Sume-Signature` as received, `None` when absent.
    pub signature: Option<&'a str>,
}

fn mac(secret: &Secret, timestamp: &str, body: &[u8]) -> HmacSha256 {
    let mut mac =
        HmacSha256::new_from_slice(secret.expose().as_bytes()).expect("HMAC takes any key length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The hex HMAC-SHA256 of `"{timestamp}.{body}"` under `secret`.
pub fn sign(secret: &Secret, timestamp: i64, body: &[u8]) -> String {
    hex::encode(
        mac(secret, &timestamp.to_string(), body)
            .finalize()
            .into_bytes(),
    )
}

/// A complete `X-Sume-Signature` value: one `v1=` per secret, comma separated.
pub fn signature_header(secrets: &[Secret], timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| format!("v1={}", sign(s, timestamp, body)))
        .collect::<Vec<_>>()
        .join(",")
}

/// The most comma-separated values one `X-Sume-Signature` may carry: a rotation needs two, a
/// header with dozens is not a sender's and would make the receiver compute an HMAC for each.
pub const MAX_SIGNATURE_VALUES: usize = 5;

/// The length of a `v1=` value: the hex of a SHA-256 HMAC.
const V1_HEX_LEN: usize = 64;

/// Reads `X-Sume-Signature`: comma-separated `scheme=value` items, at most
/// [`MAX_SIGNATURE_VALUES`]; answers the `v1=<64 hex>` values, decoded. Other schemes and
/// malformed values are skipped (a sender may add a scheme before receivers know it), but a
/// header with no usable `v1=` value is refused.
pub fn parse_signature(header: Option<&str>) -> Result<Vec<[u8; 32]>, VerifyError> {
    let header = header.ok_or(VerifyError::MissingSignature)?;
    let items = header.split(',');
    if items.clone().count() > MAX_SIGNATURE_VALUES {
        return Err(VerifyError::TooManySignatures);
    }
    let values: Vec<[u8; 32]> = items
        .filter_map(|part| {
            let (k, v) = part.trim().split_once('=')?;
            let v = v.trim();
            if k.trim() != "v1" || v.len() != V1_HEX_LEN {
                return None;
            }
            let mut out = [0u8; 32];
            hex::decode_to_slice(v, &mut out).ok()?;
            Some(out)
        })
        .collect();
    if values.is_empty() {
        return Err(VerifyError::NoV1Signature);
    }
    Ok(values)
}

/// Reads `X-Sume-Timestamp` (Unix seconds), written as Sume writes it: decimal digits, no
/// sign, no leading zero. `+1700000000` or `01700000000` would verify (the signature covers
/// the string as sent) but could not be re-verified from the number kept.
pub fn parse_timestamp(header: Option<&str>) -> Result<i64, VerifyError> {
    let text = header.ok_or(VerifyError::MissingTimestamp)?.trim();
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    if !canonical {
        return Err(VerifyError::BadTimestamp);
    }
    text.parse().map_err(|_| VerifyError::BadTimestamp)
}

fn check_freshness(ts: i64, now: i64, tolerance_secs: u64) -> Result<(), VerifyError> {
    let age = now.saturating_sub(ts);
    if age.unsigned_abs() > tolerance_secs {
        return Err(VerifyError::StaleTimestamp {
            age_secs: age,
            tolerance_secs,
        });
    }
    Ok(())
}

/// What a receiver can check before it reads a body: both headers present and well formed,
/// and the timestamp within `tolerance_secs` of `now`. A delivery that fails here cannot
/// verify, so the receiver can refuse it without reading (or waiting for) its body; one that
/// passes still needs [`verify`].
pub fn check_headers(
    headers: SignedHeaders<'_>,
    now: i64,
    tolerance_secs: u64,
) -> Result<(), VerifyError> {
    let ts = parse_timestamp(headers.timestamp)?;
    parse_signature(headers.signature)?;
    check_freshness(ts, now, tolerance_secs)
}

/// Checks a delivery. On success, answers the index in `secrets` of the secret that verified it
/// (so an operator can tell when an old secret has stopped being used).
///
/// `now` is Unix seconds; a timestamp more than `tolerance_secs` away from it, either way, is
/// stale. The signature is checked first, so a forged delivery reports `Mismatch` whatever its
/// timestamp, and a stale one reports `StaleTimestamp` only when it was authentic.
pub fn verify(
    headers: SignedHeaders<'_>,
    body: &[u8],
    secrets: &[Secret],
    now: i64,
    tolerance_secs: u64,
) -> Result<usize, VerifyError> {
    if secrets.is_empty() {
        return Err(VerifyError::NoSecrets);
    }
    let ts = parse_timestamp(headers.timestamp)?;
    let ts_raw = headers.timestamp.unwrap_or_default().trim();
    let candidates = parse_signature(headers.signature)?;
    // Check every pair without an early exit on the byte level; the loop over pairs is public
    // knowledge (the number of values and secrets), the comparison itself is constant-time.
    let mut matched = None;
    for (i, secret) in secrets.iter().enumerate() {
        let base = mac(secret, ts_raw, body);
        for candidate in &candidates {
            if base.clone().verify_slice(candidate).is_ok() && matched.is_none() {
                matched = Some(i);
            }
        }
    }
    let index = matched.ok_or(VerifyError::Mismatch)?;
    check_freshness(ts, now, tolerance_secs)?;
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Vec<Secret> {
        vec![Secret::new("whsec_old"), Secret::new("whsec_new")]
    }

    fn headers<'a>(ts: &'a str, sig: &'a str) -> SignedHeaders<'a> {
        SignedHeaders {
            timestamp: Some(ts),
            signature: Some(sig),
        }
    }

    #[test]
    fn known_vector() {
        // HMAC-SHA256("key", "1700000000.{}") computed independently with openssl:
        // printf '1700000000.{}' | openssl dgst -sha256 -hmac key
        let sig = sign(&Secret::new("key"), 1_700_000_000, b"{}");
        assert_eq!(
            sig,
            "9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
        );
    }

    #[test]
    fn accepts_any_secret_and_any_value() {
        let body = br#"{"event":"job.completed","job_id":"job_1"}"#;
        let now = 1_700_000_000;
        let only_new = format!("v1={}", sign(&Secret::new("whsec_new"), now, body));
        let ts = now.to_string();
        assert_eq!(
            verify(headers(&ts, &only_new), body, &secrets(), now, 300),
            Ok(1)
        );
        let both = format!("v1=deadbeef, {only_new}");
        assert_eq!(
            verify(headers(&ts, &both), body, &secrets(), now, 300),
            Ok(1)
        );
        let by_old = signature_header(&[Secret::new("whsec_old")], now, body);
        assert_eq!(
            verify(headers(&ts, &by_old), body, &secrets(), now, 300),
            Ok(0)
        );
    }

    #[test]
    fn refuses_what_it_should() {
        let body = b"{}";
        let now = 1_700_000_000;
        let ts = now.to_string();
        let good = signature_header(&[Secret::new("whsec_new")], now, body);
        let wrong = signature_header(&[Secret::new("whsec_other")], now, body);
        assert_eq!(
            verify(headers(&ts, &wrong), body, &secrets(), now, 300),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify(headers(&ts, &good), b"{ }", &secrets(), now, 300),
            Err(VerifyError::Mismatch),
            "a changed body must not verify"
        );
        assert_eq!(
            verify(headers(&ts, &good), body, &secrets(), now + 301, 300),
            Err(VerifyError::StaleTimestamp {
                age_secs: 301,
                tolerance_secs: 300
            })
        );
        assert_eq!(
            verify(headers(&ts, &good), body, &secrets(), now - 301, 300),
            Err(VerifyError::StaleTimestamp {
                age_secs: -301,
                tolerance_secs: 300
            }),
            "a timestamp from the future is refused too"
        );
        assert!(verify(headers(&ts, &good), body, &secrets(), now + 300, 300).is_ok());
        let huge = "9".repeat(20);
        for ts in [
            "soon",
            "+1700000000",
            "01700000000",
            "-5",
            "1.7e9",
            "",
            &huge,
        ] {
            let refused = verify(headers(ts, &good), body, &secrets(), now, 300);
            assert_eq!(refused, Err(VerifyError::BadTimestamp), "{ts:?}");
        }
        assert_eq!(
            verify(headers(&ts, "sha256=abc"), body, &secrets(), now, 300),
            Err(VerifyError::NoV1Signature)
        );
        assert_eq!(
            verify(
                SignedHeaders {
                    timestamp: Some(&ts),
                    signature: None
                },
                body,
                &secrets(),
                now,
                300
            ),
            Err(VerifyError::MissingSignature)
        );
        assert_eq!(
            verify(
                SignedHeaders {
                    timestamp: None,
                    signature: Some(&good)
                },
                body,
                &secrets(),
                now,
                300
            ),
            Err(VerifyError::MissingTimestamp)
        );
        assert_eq!(
            verify(headers(&ts, &good), body, &[], now, 300),
            Err(VerifyError::NoSecrets)
        );
    }

    #[test]
    fn headers_are_checked_without_the_body() {
        let now = 1_700_000_000;
        let ts = now.to_string();
        let good = signature_header(&[Secret::new("whsec_new")], now, b"{}");
        assert_eq!(check_headers(headers(&ts, &good), now, 300), Ok(()));
        let rotated = format!("{good},{good},v2=abc");
        assert_eq!(check_headers(headers(&ts, &rotated), now, 300), Ok(()));
        let stale = (now - 301).to_string();
        assert!(matches!(
            check_headers(headers(&stale, &good), now, 300),
            Err(VerifyError::StaleTimestamp { .. })
        ));
        for (sig, why) in [
            ("v1=abc".to_owned(), VerifyError::NoV1Signature),
            ("v1=".to_owned(), VerifyError::NoV1Signature),
            ("sha256=abc".to_owned(), VerifyError::NoV1Signature),
            (format!("v1={}", "g".repeat(64)), VerifyError::NoV1Signature),
            ([good.as_str(); 6].join(","), VerifyError::TooManySignatures),
        ] {
            assert_eq!(
                check_headers(headers(&ts, &sig), now, 300),
                Err(why),
                "{sig}"
            );
        }
        let no_sig = SignedHeaders {
            timestamp: Some(&ts),
            signature: None,
        };
        assert_eq!(
            check_headers(no_sig, now, 300),
            Err(VerifyError::MissingSignature)
        );
        assert_eq!(
            check_headers(headers("soon", &good), now, 300),
            Err(VerifyError::BadTimestamp)
        );
    }
}
