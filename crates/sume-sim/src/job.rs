//! One simulated job: what was asked, what it drew, and where it stands.
//!
//! A job's status is a pure function of time: `queued` until `queued_for` has passed, `running`
//! until `duration` has, then its drawn terminal status. So a read never races the job's own
//! task, and a job that was created "early" is terminal from its first instant. The only
//! mutable part is the webhook progress, written by the job's task in [`crate::lifecycle`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::faults::{AppliedFaults, JobOverrides};
use crate::keys::Caller;
use crate::payload;
use crate::wire::JobObject;

/// What a create endpoint makes; it decides the create answer's `object` and the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    ImageGeneration,
    VideoGeneration,
    AdVideo,
    FaceSwap,
    ReferenceAnalysis,
    Avatar,
    AvatarVideo,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::ImageGeneration,
        Kind::VideoGeneration,
        Kind::AdVideo,
        Kind::FaceSwap,
        Kind::ReferenceAnalysis,
        Kind::Avatar,
        Kind::AvatarVideo,
    ];

    /// The `object` of the create answer, also the `type` filter of `GET /jobs`.
    pub fn object(self) -> &'static str {
        match self {
            Kind::ImageGeneration => "image_generation",
            Kind::VideoGeneration => "video_generation",
            Kind::AdVideo => "ad_video",
            Kind::FaceSwap => "face_swap",
            Kind::ReferenceAnalysis => "reference_analysis",
            Kind::Avatar => "avatar",
            Kind::AvatarVideo => "avatar_video",
        }
    }

    /// The create endpoint, below the API base.
    pub fn path(self) -> &'static str {
        match self {
            Kind::ImageGeneration => "/images/generations",
            Kind::VideoGeneration => "/videos/generations",
            Kind::AdVideo => "/ads/videos",
            Kind::FaceSwap => "/face-swap",
            Kind::ReferenceAnalysis => "/reference-analysis",
            Kind::Avatar => "/avatars",
            Kind::AvatarVideo => "/avatar-videos",
        }
    }

    pub fn from_object(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.object() == s)
    }
}

/// How a job ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Success: the job has a `result`, and reads say `completed` (`ready` for an avatar).
    Completed,
    /// The job has an `error` object instead of a result.
    Failed,
    /// The job was canceled; it has an `error` object.
    Canceled,
    /// Sume gave up on the job; it has an `error` object.
    Expired,
}

impl Outcome {
    /// The terminal status Sume reports for it (except an avatar's success, `ready`), also its
    /// spelling in a create body's `"sim"` overrides.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Canceled => "canceled",
            Outcome::Expired => "expired",
        }
    }

    /// The type of the webhook event that reports this outcome.
    pub fn event_type(self) -> &'static str {
        match self {
            Outcome::Completed => "job.completed",
            Outcome::Failed => "job.failed",
            Outcome::Canceled => "job.canceled",
            Outcome::Expired => "job.expired",
        }
    }
}

/// Where a job's webhook stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookState {
    /// The job has not ended yet.
    Waiting,
    /// Neither the create body nor `--webhook-url` named a URL.
    NoWebhookUrl,
    /// The drop fault: nothing is ever sent.
    Dropped,
    /// Attempts on the terminal event are under way.
    Delivering,
    /// The terminal event got a 2xx; duplicates and a late event may still follow.
    Delivered,
    /// Every attempt was spent without a 2xx.
    GaveUp,
    /// The simulator shut down first.
    Aborted,
}

/// The webhook progress of a job (its terminal event; duplicates and late events only count
/// toward `settled`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookProgress {
    /// Where the terminal event stands.
    pub state: WebhookState,
    /// Attempts spent on the terminal event.
    pub attempts: u32,
    /// When the terminal event got its 2xx (RFC 3339); `None` unless `state` is `Delivered`.
    pub delivered_at: Option<String>,
    /// Every delivery this job will ever make (duplicates and late events too) is done.
    pub settled: bool,
}

/// The three phases a status moves through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Queued,
    Running,
    Ended,
}

/// A job as the simulator keeps it.
#[derive(Debug)]
pub struct Job {
    pub id: String,
    pub kind: Kind,
    pub owner: Arc<Caller>,
    pub webhook_url: Option<String>,
    pub idempotency_key: Option<String>,
    pub created_wall: DateTime<Utc>,
    pub created: Instant,
    /// Time spent `queued` before `running`.
    pub queued_for: Duration,
    /// Time from creation to the terminal status.
    pub duration: Duration,
    pub outcome: Outcome,
    pub faults: AppliedFaults,
    pub overrides: Option<JobOverrides>,
    /// Whether this job's events use the envelope shape (else the guide's).
    pub envelope: bool,
    pub progress: Mutex<WebhookProgress>,
}

impl Job {
    pub fn phase(&self, now: Instant) -> Phase {
        let age = now.saturating_duration_since(self.created);
        if age >= self.duration {
            Phase::Ended
        } else if age >= self.queued_for {
            Phase::Running
        } else {
            Phase::Queued
        }
    }

    pub fn ends_at(&self) -> Instant {
        self.created + self.duration
    }

    /// The terminal status string, in the dialect of the job's kind (see `dialect.rs`).
    pub fn final_status(&self) -> &'static str {
        crate::dialect::terminal(self.kind, self.outcome)
    }

    pub fn status(&self, now: Instant) -> &str {
        match self.phase(now) {
            Phase::Queued => "queued",
            Phase::Running => self.working_status(),
            Phase::Ended => self.final_status(),
        }
    }

    /// The in-flight status: the kind's, unless the job's overrides spell it otherwise.
    fn working_status(&self) -> &str {
        self.overrides
            .as_ref()
            .and_then(|o| o.working_status.as_deref())
            .unwrap_or(crate::dialect::working(self.kind))
    }

    /// When the job's status last changed, as of `now`: its creation, its start, or its end.
    pub fn updated(&self, now: Instant) -> Instant {
        match self.phase(now) {
            Phase::Queued => self.created,
            Phase::Running => self.created + self.queued_for,
            Phase::Ended => self.created + self.duration,
        }
    }

    pub fn running_wall(&self) -> DateTime<Utc> {
        self.created_wall + chrono::Duration::from_std(self.queued_for).unwrap_or_default()
    }

    pub fn ended_wall(&self) -> DateTime<Utc> {
        self.created_wall + chrono::Duration::from_std(self.duration).unwrap_or_default()
    }

    /// The job object of `GET /jobs/{id}` as of `now`.
    pub fn object(&self, now: Instant) -> JobObject {
        self.object_in(self.phase(now))
    }

    /// The job object as it reads in `phase`: webhooks build theirs from the phase they report.
    pub fn object_in(&self, phase: Phase) -> JobObject {
        let ended = phase == Phase::Ended;
        let status = match phase {
            Phase::Queued => "queued",
            Phase::Running => self.working_status(),
            Phase::Ended => self.final_status(),
        };
        JobObject {
            id: self.id.clone(),
            object: "job".to_owned(),
            status: status.to_owned(),
            created_at: Some(rfc3339(self.created_wall).into()),
            completed_at: ended.then(|| rfc3339(self.ended_wall()).into()),
            result: (ended && self.outcome == Outcome::Completed).then(|| payload::result(self)),
            error: (ended && self.outcome != Outcome::Completed)
                .then(|| payload::error(self.outcome)),
        }
    }

    pub fn progress(&self) -> WebhookProgress {
        self.progress.lock().expect("progress lock").clone()
    }

    pub fn update_progress(&self, f: impl FnOnce(&mut WebhookProgress)) {
        f(&mut self.progress.lock().expect("progress lock"));
    }
}

/// Timestamps as Sume writes them: RFC 3339, UTC, milliseconds.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A job's full truth, as `GET /sim/jobs` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobTruth {
    /// The job id the create call answered (`job_...`).
    pub id: String,
    /// The create endpoint's `object`, e.g. `video_generation`.
    pub kind: String,
    /// The name of the key that created the job.
    pub key: String,
    /// The member owning that key: only this member's keys can read the job.
    pub member: String,
    /// The member's workspace.
    pub workspace: String,
    /// Where the webhook goes: the create body's `webhook_url`, else `--webhook-url`; `None`
    /// when neither named one.
    pub webhook_url: Option<String>,
    /// The `Idempotency-Key` of the create call, trimmed; `None` when it sent none.
    pub idempotency_key: Option<String>,
    /// The status a read would answer now.
    pub status: String,
    /// Whether the job has reached its terminal status by now.
    pub terminal: bool,
    /// The status the job ends with.
    pub final_status: String,
    /// The event that reports the end, with its id (stable across retries and duplicates).
    pub event_type: String,
    /// The `X-Sume-Event-Id` of that event (see [`event_id`](crate::event_id)).
    pub event_id: String,
    /// When the job was created (RFC 3339, UTC, milliseconds).
    pub created_at: String,
    /// When its status turns, or turned, `running`.
    pub running_at: String,
    /// When it reaches, or reached, its terminal status.
    pub ended_at: String,
    /// From creation to the terminal status, in milliseconds (0 for an early job).
    pub duration_ms: u64,
    /// The faults the job drew.
    pub faults: AppliedFaults,
    /// The create body's `"sim"` object, as read; `None` when it had none.
    pub overrides: Option<JobOverrides>,
    /// The shape of its webhook bodies: `envelope` or `guide`.
    pub body_shape: String,
    /// Where its webhook deliveries stand.
    pub webhook: WebhookProgress,
    /// Reads of this job's status (any key, any answer).
    pub status_reads: u64,
    /// The most reads of this job that were in flight at one moment.
    pub max_concurrent_status_reads: u64,
}

impl Job {
    pub fn truth(&self, now: Instant, status_reads: u64, max_concurrent: u64) -> JobTruth {
        JobTruth {
            id: self.id.clone(),
            kind: self.kind.object().to_owned(),
            key: self.owner.name.clone(),
            member: self.owner.member.clone(),
            workspace: self.owner.workspace.clone(),
            webhook_url: self.webhook_url.clone(),
            idempotency_key: self.idempotency_key.clone(),
            status: self.status(now).to_owned(),
            terminal: self.phase(now) == Phase::Ended,
            final_status: self.final_status().to_owned(),
            event_type: self.outcome.event_type().to_owned(),
            event_id: payload::event_id(&self.id, self.outcome.event_type()),
            created_at: rfc3339(self.created_wall),
            running_at: rfc3339(self.running_wall()),
            ended_at: rfc3339(self.ended_wall()),
            duration_ms: self.duration.as_millis() as u64,
            faults: self.faults.clone(),
            overrides: self.overrides.clone(),
            body_shape: if self.envelope { "envelope" } else { "guide" }.to_owned(),
            webhook: self.progress(),
            status_reads,
            max_concurrent_status_reads: max_concurrent,
        }
    }
}
