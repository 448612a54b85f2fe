//! The simulator's logs: every API request and every webhook delivery attempt.
//!
//! A [`Journal`] is an in-memory, bounded, append-only list with a sequence number per entry;
//! past its capacity the oldest entries go and `dropped` counts them, so a test can tell "not
//! logged" from "did not happen". The defaults keep a million entries, far more than a test of
//! a few thousand jobs writes.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// A bounded log.
#[derive(Debug)]
pub struct Journal<T> {
    capacity: usize,
    inner: Mutex<Inner<T>>,
}

#[derive(Debug)]
struct Inner<T> {
    entries: VecDeque<T>,
    next_seq: u64,
    dropped: u64,
}

impl<T: Clone> Journal<T> {
    pub fn new(capacity: usize) -> Journal<T> {
        Journal {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner {
                entries: VecDeque::new(),
                next_seq: 1,
                dropped: 0,
            }),
        }
    }

    /// Appends the entry `make` builds from its sequence number.
    pub fn push(&self, make: impl FnOnce(u64) -> T) {
        let mut inner = self.inner.lock().expect("journal lock");
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let entry = make(seq);
        inner.entries.push_back(entry);
        if inner.entries.len() > self.capacity {
            inner.entries.pop_front();
            inner.dropped += 1;
        }
    }

    /// The kept entries that pass `keep`, oldest first, and how many were ever dropped.
    pub fn select(&self, keep: impl Fn(&T) -> bool) -> (Vec<T>, u64) {
        let inner = self.inner.lock().expect("journal lock");
        let picked = inner.entries.iter().filter(|e| keep(e)).cloned().collect();
        (picked, inner.dropped)
    }

    /// Entries ever appended.
    pub fn total(&self) -> u64 {
        self.inner.lock().expect("journal lock").next_seq - 1
    }
}

/// One API request, as `GET /sim/requests` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Order in which answers were logged, from 1: a slow request may follow later arrivals.
    pub seq: u64,
    /// When it arrived (RFC 3339).
    pub at: String,
    /// The key's name; `None` when the key was missing or unknown.
    pub key: Option<String>,
    /// The HTTP method, e.g. `GET`.
    pub method: String,
    /// The route template, e.g. `/v1/jobs/{id}/status`.
    pub route: String,
    /// The path as requested, without the query string.
    pub path: String,
    /// The job concerned: the one a create made, or the id in a `/jobs/{id}` path (even one
    /// nobody created); `None` for a list or a refused create.
    pub job_id: Option<String>,
    /// The HTTP status answered.
    pub status: u16,
    /// The faults injected into this answer, comma separated: `status_slow`, `status_5xx`,
    /// `status_429`, `status_redirect`; `None` when there were none.
    pub fault: Option<String>,
    /// The `X-Request-Id` answered, which an error body repeats as its `request_id`.
    pub request_id: Option<String>,
    /// From arrival until the answer was ready, in milliseconds (an injected delay included).
    pub latency_ms: u64,
}

/// Why a webhook event was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryKind {
    /// The terminal event.
    Primary,
    /// The duplicate fault: the terminal event again, after it was delivered.
    Duplicate,
    /// The late-non-terminal fault: a `job.running` event after the terminal one.
    Late,
}

/// One webhook delivery attempt, as `GET /sim/deliveries` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// Order in which attempts finished, from 1.
    pub seq: u64,
    /// The job the event is about.
    pub job_id: String,
    /// The `X-Sume-Event-Id` sent: the same for every attempt and duplicate of one event.
    pub event_id: String,
    /// E.g. `job.completed`, or `job.running` for a late event.
    pub event_type: String,
    /// Why the event was sent.
    pub kind: DeliveryKind,
    /// 1-based, per delivery (a duplicate starts again at 1).
    pub attempt: u32,
    /// Where the attempt was POSTed.
    pub url: String,
    /// When the attempt was sent (RFC 3339).
    pub sent_at: String,
    /// When its answer, timeout or error came (RFC 3339).
    pub answered_at: String,
    /// The HTTP status answered (`"200"`), `"timeout"`, or `"error: ..."`.
    pub answer: String,
    /// The HTTP status answered; `None` for a timeout or an error.
    pub http_status: Option<u16>,
    /// Whether the answer was a 2xx.
    pub ok: bool,
    /// The `X-Sume-Timestamp` this attempt was signed with.
    pub timestamp: i64,
    /// Signed with a secret the receiver does not hold (the wrong-secret fault).
    pub wrong_secret: bool,
    /// Sent before the create call that made the job had answered.
    pub early: bool,
    /// Size of the body sent, in bytes.
    pub body_bytes: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_and_counts_the_rest() {
        let j: Journal<u64> = Journal::new(3);
        for _ in 0..5 {
            j.push(|seq| seq);
        }
        let (kept, dropped) = j.select(|_| true);
        assert_eq!(kept, vec![3, 4, 5]);
        assert_eq!(dropped, 2);
        assert_eq!(j.total(), 5);
        assert_eq!(j.select(|n| n % 2 == 0).0, vec![4]);
    }
}
