//! `parse_event` and `dedupe_key` with any body: never panic; what they accept names a usable
//! job id, no NUL in what goes to text columns, a result `jsonb` can hold (JSON that
//! `serde_json` reads, which refuses a lone surrogate as PostgreSQL does, with no NUL), and a
//! dedupe key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sume_wire::{body_key, dedupe_key, parse_event, usable_header_id};

fuzz_target!(|body: &[u8]| {
    if let Ok(event) = parse_event(body) {
        assert!(!event.job_id.trim().is_empty());
        assert!(event.job_id.len() <= sume_wire::event::MAX_ID_LEN);
        assert!(!dedupe_key(&event).is_empty());
        for text in [&event.status, &event.event_type].into_iter().flatten() {
            assert!(!text.contains('\0'), "a NUL would be refused by the database");
        }
        if let Some(result) = &event.result {
            let value: serde_json::Value =
                serde_json::from_str(result).expect("jsonb would refuse this result");
            let text = serde_json::to_string(&value).unwrap();
            assert!(!text.contains("\\u0000"), "jsonb would refuse a NUL");
        }
    }
    assert!(body_key(body).starts_with("sha256:"));
    let _ = usable_header_id(std::str::from_utf8(body).ok());
});
