//! Sume's wire protocol, shared by the daemon and the simulator.
//!
//! Everything both sides of a webhook or a status call must agree on lives here and nowhere
//! else: how an event body is read ([`event`]), how it is signed and verified ([`signature`]),
//! what a job status means ([`status`]), the job object and error envelope ([`job`]), and the
//! client for Sume's status endpoint ([`client`]). Secrets are wrapped in [`Secret`] so they
//! never reach a log line or a `Debug` print.

#![warn(missing_docs)]

pub mod client;
pub mod event;
pub mod job;
#[cfg(feature = "client")]
mod job_page;
pub mod json_text;
pub mod readable;
pub mod secret;
#[cfg(feature = "client")]
mod shown;
pub mod signature;
pub mod status;
#[cfg(feature = "client")]
mod status_answer;
#[cfg(feature = "client")]
pub mod status_client;
pub mod surrogates;

pub use client::{RateLimit, StatusOutcome, StatusReply};
pub use event::{
    body_key, dedupe_key, parse_event, usable_header_id, usable_id, ParseError, ParsedEvent,
};
pub use job::{ErrorBody, ErrorEnvelope, JobObject};
pub use json_text::JsonText;
pub use readable::{numeric_holds, readable_json_text, MAX_RESULT_DEPTH, NUMERIC_MAX_SCALE};
pub use secret::Secret;
pub use signature::{
    check_headers, parse_signature, parse_timestamp, sign, signature_header, verify, SignedHeaders,
    VerifyError, MAX_SIGNATURE_VALUES,
};
pub use status::{JobState, Status};
#[cfg(feature = "client")]
pub use status_client::{
    askable_job_id, error_chain, ClientError, JobPage, KeyCheck, ListReply, StatusClient,
    DEFAULT_API_URL, MAX_ANSWER_BYTES,
};
pub use surrogates::mend_lone_surrogates;

/// Header names of a Sume webhook delivery.
pub mod headers {
    /// Stable per job and terminal event type: a redelivery repeats it.
    pub const EVENT_ID: &str = "x-sume-event-id";
    /// Unix seconds at which this delivery attempt was signed.
    pub const TIMESTAMP: &str = "x-sume-timestamp";
    /// `v1=<hex>`, possibly several, comma separated.
    pub const SIGNATURE: &str = "x-sume-signature";
}
