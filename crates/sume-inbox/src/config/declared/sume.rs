//! Sume: the secrets its webhooks are signed with, and its API (where, with which keys, within
//! which budget). `reconcile` reads the API settings exactly as `serve` does.

use super::declare;
use crate::config::setting::{Form, Setting, POSITIVE};

/// Sume's documented read limit per key and minute.
pub const SUME_READS_A_MINUTE: u32 = 120;

/// Sume's documented read limit per key and UTC day.
pub const SUME_READS_A_DAY: usize = 10_000;

declare! { SUME, "Sume",
    /// The webhook signing secrets.
    SUME_WEBHOOK_SECRET {
        flag: Some("webhook-secret"),
        form: Form::Secrets,
        required: true,
        secret: true,
        about: "signing secrets, separated by commas or newlines (a file of one a line); any of them verifies (rotation); a control character in one, or an empty entry (a stray comma), stops the start",
    }
    /// Sume's API base.
    SUME_API_URL {
        flag: Some("sume-api-url"),
        default: Some(sume_wire::DEFAULT_API_URL),
        form: Form::HttpUrl { example: sume_wire::DEFAULT_API_URL },
        about: "Sume's API base",
    }
    /// An `http://` API URL to another host.
    SUME_API_ALLOW_PLAINTEXT {
        flag: Some("sume-api-allow-plaintext"),
        default: Some("0"),
        form: Form::Switch,
        about: "`1` allows an `http://` `SUME_API_URL` to another host than this one (the API keys then travel in clear: a private network only, e.g. the compose simulator); without it such a URL is refused at start",
    }
    /// The API keys, by name.
    SUME_API_KEYS {
        flag: Some("sume-api-keys"),
        form: Form::ApiKeys,
        secret: true,
        about: "`name:key,name:key`, or one pair a line (a file's lines); the names are what `sume.jobs.api_key` holds, each unique ignoring case, and a key is given under one name only (the read budget is kept per name: a key under two would spend Sume's limits twice); a control character in a key, or an empty entry (a stray comma: `main:KEY,`), stops the start. Without a key the sweep asks Sume nothing: nothing is set aside or polled",
    }
    /// One API key, named `default`.
    SUME_API_KEY {
        flag: Some("sume-api-key"),
        form: Form::Secret,
        secret: true,
        about: "a single key, used whole and named `default`, when `SUME_API_KEYS` is unset (beside it, ignored with a warning; one written `name:key` is warned of too)",
    }
    /// The fleet's reads per key and window.
    SUME_READ_RATE {
        flag: Some("sume-read-rate"),
        default: Some("100"),
        form: Form::Rate,
        about: "requests per key for the whole fleet: `100` (a minute) or `100/1m`; a rate that lets the fleet read more than Sume's documented 120 a minute (a burst of a tenth of the count included) is warned of at start, not refused (a workspace's limit may be raised)",
    }
    /// The fleet's reads per key and UTC day.
    SUME_READ_DAILY {
        flag: Some("sume-read-daily"),
        default: Some("9000"),
        form: Form::Count { min: 1, max: i32::MAX as usize },
        about: "reads per key and UTC day for the whole fleet (Sume allows 10,000 a day; the rest is left to the application sharing the key; more is warned of at start, not refused); list walks (`LIST_WALKS=auto`) keep a fifth of it for everything else and spread the rest evenly to UTC midnight; once spent, the sweep waits for the next UTC day, most overdue work first; `sume_inbox_sume_api_reads_left_today` shows what is left",
    }
    /// One call's timeout.
    SUME_TIMEOUT {
        flag: Some("sume-timeout"),
        default: Some("10s"),
        form: POSITIVE,
        about: "timeout of one call to Sume",
    }
}

/// The settings of Sume's API (without the webhook secrets): what `reconcile` shares with
/// `serve`.
pub static SUME_API: &[&Setting] = &[
    &SUME_API_URL,
    &SUME_API_ALLOW_PLAINTEXT,
    &SUME_API_KEYS,
    &SUME_API_KEY,
    &SUME_READ_RATE,
    &SUME_READ_DAILY,
    &SUME_TIMEOUT,
];
