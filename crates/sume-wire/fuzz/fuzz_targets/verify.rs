//! `verify` with any timestamp and signature header and any body: never panics, and accepts only
//! what a secret signed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sume_wire::{signature_header, verify, Secret, SignedHeaders};

fuzz_target!(|data: &[u8]| {
    // The input is "timestamp\nsignature\nbody"; missing parts read as absent headers.
    let mut parts = data.splitn(3, |b| *b == b'\n');
    let timestamp = parts.next().and_then(|p| std::str::from_utf8(p).ok());
    let signature = parts.next().and_then(|p| std::str::from_utf8(p).ok());
    let body = parts.next().unwrap_or_default();
    let secrets = [Secret::new("whsec_fuzz")];
    let headers = SignedHeaders {
        timestamp,
        signature,
    };
    if verify(headers, body, &secrets, 1_790_000_000, 300).is_ok() {
        // Only a correct signature of this very body, at a timestamp within the tolerance.
        let raw = timestamp.unwrap().trim();
        let ts: i64 = raw.parse().unwrap();
        assert!((ts - 1_790_000_000).abs() <= 300);
        // The signed string holds the timestamp as sent: compare where it is the plain number
        // (hex may come in either case).
        if raw == ts.to_string() {
            let expected = signature_header(&secrets, ts, body);
            let expected = expected.trim_start_matches("v1=");
            assert!(signature.unwrap().to_ascii_lowercase().contains(expected));
        }
    }
});
