//! A faithful simulator of Sume's API, for testing the inbox daemon without Sume.
//!
//! It serves Sume's create, read and list endpoints with per-member key isolation, rate
//! limits and Sume's error envelope; moves every job from `queued` through `running` to a
//! terminal status after a drawn duration; delivers signed webhooks with Sume's retry rules;
//! and injects the faults the daemon must survive (early, duplicate, dropped, late and
//! wrongly signed webhooks; slow, failing and rate-limited status reads). Everything it did
//! is open to inspection under `/sim/`.
//!
//! The protocol itself (signatures, the job object, the error envelope, header names) is this
//! crate's own reading of Sume's docs ([`wire`]), not the daemon's `sume-wire`: both are
//! checked against the fixed vectors of `fixtures/sume/`, computed outside Rust. Start it with [`run`] (the `sume-dev sim`
//! subcommand flattens [`SimConfig`]) or, in tests, [`RunningSim::start`].

#![warn(missing_docs)]

mod api;
mod app;
mod choices;
mod config;
mod control;
mod dialect;
mod duration;
mod faults;
mod inspect;
mod job;
mod journal;
mod keys;
mod lifecycle;
mod payload;
mod ratelimit;
pub mod secret_files;
mod server;
mod stats;
mod store;
mod webhook;
pub mod wire;

pub use app::StartError;
pub use config::{
    BodyShape, ConfigError, DeliverySettings, JobTiming, ListOrder, RateLimits, RetryTimestamp,
    SimConfig, TEST_WEBHOOK_SECRET,
};
pub use control::{Access, KeyAccess};
pub use duration::{DurationError, DurationRange};
pub use faults::{AppliedFaults, Count, FaultError, Faults, JobOverrides};
pub use inspect::{DeliveriesAnswer, JobsAnswer, KeyStats, RequestsAnswer, SimStats};
pub use job::{JobTruth, Outcome, WebhookProgress, WebhookState};
pub use journal::{DeliveryKind, DeliveryRecord, RequestRecord};
pub use keys::{KeyError, KeySpec};
pub use payload::event_id;
pub use ratelimit::WindowCount;
pub use server::{run, RunningSim};
pub use stats::{KeyCount, PollCount};
pub use webhook::WEBHOOK_USER_AGENT;
pub use wire::Secret;
