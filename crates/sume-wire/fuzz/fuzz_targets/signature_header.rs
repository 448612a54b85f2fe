//! The header checks made before a body is read (`parse_signature`, `parse_timestamp`,
//! `check_headers`) with any header values: never panic, never accept more than five values,
//! and never accept headers that `verify` would refuse for their form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sume_wire::{check_headers, parse_signature, parse_timestamp, SignedHeaders};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (timestamp, signature) = text.split_once('\n').unwrap_or((&text, ""));
    if let Ok(values) = parse_signature(Some(signature)) {
        assert!(!values.is_empty() && values.len() <= 5);
    }
    let _ = parse_timestamp(Some(timestamp));
    let headers = SignedHeaders {
        timestamp: Some(timestamp),
        signature: Some(signature),
    };
    if check_headers(headers, 1_790_000_000, 300).is_ok() {
        let ts = parse_timestamp(Some(timestamp)).unwrap();
        assert!((ts - 1_790_000_000).abs() <= 300);
        assert!(parse_signature(Some(signature)).is_ok());
    }
});
