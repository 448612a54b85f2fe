//! What a submission needs: where and how to create jobs ([`SubmitConfig`], one per API key)
//! and the order to submit ([`Submission`]).

use std::ops::RangeInclusive;
use std::time::Duration;

use serde_json::Value;
use sume_wire::Secret;

/// Where and how to create jobs.
#[derive(Debug, Clone)]
pub struct SubmitConfig {
    /// Sume's API base, e.g. `https://www.sume.so/api/v1` (no trailing slash needed).
    pub api_url: String,
    /// The key sent as `Authorization: Bearer`.
    pub api_key: Secret,
    /// The key's name in `SUME_API_KEYS`: what `sume.jobs.api_key` records, never the key.
    pub api_key_name: String,
    /// Where Sume posts this job's webhook (the daemon's `/webhooks/sume`); `None` leaves it to
    /// the integration's default.
    pub webhook_url: Option<String>,
    /// The create endpoint below `api_url`.
    pub endpoint: String,
    /// The slow work after the `202` (the "charge"), drawn uniformly per submission; the
    /// transaction holding the job row stays open that long.
    pub slow_work: RangeInclusive<Duration>,
    /// Timeout of one HTTP request.
    pub request_timeout: Duration,
    /// Attempts of the create call; transport errors, 429 and 5xx are retried with the same
    /// `Idempotency-Key`, so a retry never makes a second job.
    pub create_attempts: u32,
}

impl SubmitConfig {
    /// Video generations, no slow work, a 30 s timeout and three create attempts.
    pub fn new(
        api_url: impl Into<String>,
        api_key_name: impl Into<String>,
        api_key: Secret,
    ) -> Self {
        SubmitConfig {
            api_url: api_url.into(),
            api_key,
            api_key_name: api_key_name.into(),
            webhook_url: None,
            endpoint: "/videos/generations".to_owned(),
            slow_work: Duration::ZERO..=Duration::ZERO,
            request_timeout: Duration::from_secs(30),
            create_attempts: 3,
        }
    }

    /// Names the webhook URL of every job this client creates (the daemon's `/webhooks/sume`).
    pub fn with_webhook_url(mut self, url: impl Into<String>) -> Self {
        self.webhook_url = Some(url.into());
        self
    }

    /// Sets the range the slow work of each submission is drawn from.
    pub fn with_slow_work(mut self, range: RangeInclusive<Duration>) -> Self {
        self.slow_work = range;
        self
    }
}

/// One order to submit.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The application's order id; also the create call's `Idempotency-Key`, so submitting the
    /// same order twice answers the same job.
    pub order_id: String,
    /// The generation request (`prompt`, ...): a JSON object. `webhook_url` and `sim` are added
    /// by the client.
    pub request: Value,
    /// The simulator's per-job overrides (`{"early": true}`, `{"outcome": "failed"}`, ...),
    /// passed through as the body's `"sim"`; the real Sume has no such field.
    pub sim: Option<Value>,
}

impl Submission {
    /// An order whose generation request is `{"prompt": prompt}`, with no simulator overrides.
    pub fn new(order_id: impl Into<String>, prompt: &str) -> Submission {
        Submission {
            order_id: order_id.into(),
            request: serde_json::json!({ "prompt": prompt }),
            sim: None,
        }
    }

    /// Asks the simulator for a particular fate for this job (see [`Submission::sim`]).
    pub fn with_sim(mut self, sim: Value) -> Submission {
        self.sim = Some(sim);
        self
    }
}
