//! Delivering one webhook event: sign each attempt afresh, POST it, retry with backoff.
//!
//! Whether Sume signs a retry afresh is not documented: `--retry-timestamp fresh` (the default)
//! gives every attempt a fresh `X-Sume-Timestamp`, `first` keeps the first attempt's (and its
//! signature) on every retry. The timestamp is read from the signing clock, which
//! `PATCH /sim/clock` can move.
//!
//! Every attempt gets an `X-Sume-Timestamp` and an `X-Sume-Signature` (one `v1=`
//! per configured secret, by this crate's own `wire::signature_value`), the same body bytes and the
//! same `X-Sume-Event-Id`. A non-2xx answer, a transport error or a timeout spends an attempt;
//! after the last one the event is given up. Every attempt lands in the delivery journal.
//! A semaphore bounds attempts in flight over all jobs, so thousands of jobs ending at once do
//! not open thousands of connections.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::header::{CONTENT_TYPE, USER_AGENT};
use chrono::Utc;
use tokio::sync::{oneshot, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::{DeliverySettings, RetryTimestamp};
use crate::job::rfc3339;
use crate::journal::{DeliveryKind, DeliveryRecord, Journal};
use crate::payload::Event;
use crate::store::random_id;
use crate::wire::{signature_value, Secret, EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};

/// The `User-Agent` of every delivery.
pub const WEBHOOK_USER_AGENT: &str = "Sume-Webhooks/1.0 (+https://www.sume.so/docs/webhooks)";

/// How one event's delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Delivered {
        attempts: u32,
    },
    GaveUp {
        attempts: u32,
    },
    /// The simulator shut down first.
    Aborted {
        attempts: u32,
    },
}

/// One event to deliver, and how.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    pub event: &'a Event,
    pub url: &'a str,
    pub kind: DeliveryKind,
    /// Sign every attempt with a secret the receiver does not hold.
    pub wrong_secret: bool,
    /// The first attempt goes out while the create call is still waiting for it.
    pub early: bool,
}

/// Sends events; one per simulator, shared by every job's task.
#[derive(Debug)]
pub struct Deliverer {
    http: reqwest::Client,
    settings: DeliverySettings,
    secrets: Vec<Secret>,
    wrong: Vec<Secret>,
    permits: Semaphore,
    journal: Arc<Journal<DeliveryRecord>>,
    /// Seconds added to the real time in `X-Sume-Timestamp` (`PATCH /sim/clock`).
    clock_offset: Arc<AtomicI64>,
}

impl Deliverer {
    pub fn new(
        settings: DeliverySettings,
        secrets: Vec<Secret>,
        journal: Arc<Journal<DeliveryRecord>>,
        clock_offset: Arc<AtomicI64>,
    ) -> Result<Deliverer, reqwest::Error> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(settings.webhook_timeout)
            .build()?;
        Ok(Deliverer {
            http,
            permits: Semaphore::new(settings.max_concurrent_deliveries),
            settings,
            secrets,
            wrong: vec![Secret::new(random_id("whsec_wrong_", 24))],
            journal,
            clock_offset,
        })
    }

    /// The signing clock: Unix seconds now, moved by `PATCH /sim/clock`.
    fn signing_now(&self) -> i64 {
        Utc::now().timestamp() + self.clock_offset.load(Ordering::SeqCst)
    }

    /// Delivers `out` until a 2xx, the last attempt, or shutdown. `first_done` is told after
    /// the first attempt has its answer; `on_attempt` after each one.
    pub async fn deliver(
        &self,
        out: Outgoing<'_>,
        mut first_done: Option<oneshot::Sender<()>>,
        on_attempt: impl Fn(u32),
        shutdown: &CancellationToken,
    ) -> Delivery {
        let max = self.settings.webhook_attempts.max(1);
        let mut first_timestamp = None;
        for attempt in 1..=max {
            let timestamp = match self.settings.retry_timestamp {
                RetryTimestamp::Fresh => self.signing_now(),
                RetryTimestamp::First => *first_timestamp.get_or_insert_with(|| self.signing_now()),
            };
            let ok = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Delivery::Aborted { attempts: attempt - 1 },
                ok = self.attempt(&out, attempt, timestamp) => ok,
            };
            on_attempt(attempt);
            if let Some(tx) = first_done.take() {
                let _ = tx.send(());
            }
            if ok {
                return Delivery::Delivered { attempts: attempt };
            }
            if attempt == max {
                break;
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return Delivery::Aborted { attempts: attempt },
                _ = tokio::time::sleep(self.settings.backoff(attempt)) => {}
            }
        }
        Delivery::GaveUp { attempts: max }
    }

    /// One signed POST; answers whether it got a 2xx.
    async fn attempt(&self, out: &Outgoing<'_>, attempt: u32, timestamp: i64) -> bool {
        let _permit = self.permits.acquire().await.expect("never closed");
        let secrets = if out.wrong_secret {
            &self.wrong
        } else {
            &self.secrets
        };
        let signature = signature_value(secrets, timestamp, &out.event.body);
        let request = self
            .http
            .post(out.url)
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, WEBHOOK_USER_AGENT)
            .header(EVENT_ID_HEADER, &out.event.event_id)
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, signature)
            .body(out.event.body.clone());
        let sent_at = Utc::now();
        let answered = tokio::time::timeout(self.settings.webhook_timeout, async {
            let response = request.send().await?;
            let status = response.status();
            response.bytes().await?;
            Ok::<_, reqwest::Error>(status)
        })
        .await;
        let (answer, http_status) = match answered {
            Err(_) => ("timeout".to_owned(), None),
            Ok(Err(e)) if e.is_timeout() => ("timeout".to_owned(), None),
            Ok(Err(e)) => (format!("error: {}", error_chain(&e)), None),
            Ok(Ok(status)) => (status.as_u16().to_string(), Some(status.as_u16())),
        };
        let ok = http_status.is_some_and(|s| (200..300).contains(&s));
        self.journal.push(|seq| DeliveryRecord {
            seq,
            job_id: out.event.job_id.clone(),
            event_id: out.event.event_id.clone(),
            event_type: out.event.event_type.clone(),
            kind: out.kind,
            attempt,
            url: out.url.to_owned(),
            sent_at: rfc3339(sent_at),
            answered_at: rfc3339(Utc::now()),
            answer,
            http_status,
            ok,
            timestamp,
            wrong_secret: out.wrong_secret,
            early: out.early && attempt == 1,
            body_bytes: out.event.body.len(),
        });
        ok
    }

    /// The pause after a delivered event before its duplicate.
    pub fn duplicate_delay(&self) -> Duration {
        self.settings.duplicate_delay
    }

    /// The pause after the terminal event before the late non-terminal one.
    pub fn late_delay(&self) -> Duration {
        self.settings.late_delay
    }
}

/// An error and its causes, `: ` separated (reqwest's own message alone names no cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
