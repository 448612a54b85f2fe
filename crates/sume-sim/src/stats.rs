//! Counters a test asserts on: reads in flight per job, and what each key did.
//!
//! [`Polls`] counts every read of one job (`GET /jobs/{id}`, `/status`, `/result`) from its
//! arrival until its answer leaves (a [`PollGuard`] is held that long, and released even when
//! the client hangs up), and remembers the most that were ever in flight at once, per job and
//! overall: the proof that two daemon instances never polled one job at the same time.
//! [`KeyCounters`] tallies each key's answers by kind, and its reads by way (one job, or a page
//! of the list).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Reads of one job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollCount {
    /// Reads of the job ever begun, whatever the key or the answer (a 401 or 429 included).
    pub reads: u64,
    /// Reads still waiting for their answer now.
    pub in_flight: u64,
    /// The most reads in flight at one moment: above 1 means overlapping polls of the job.
    pub max_in_flight: u64,
}

/// In-flight reads per job id (ids nobody created included: a read of one is still a read).
#[derive(Debug, Default)]
pub struct Polls {
    inner: Mutex<PollsInner>,
}

#[derive(Debug, Default)]
struct PollsInner {
    per_job: HashMap<String, PollCount>,
    max_in_flight: u64,
    max_job: Option<String>,
}

/// Held while one read of a job is in flight.
#[derive(Debug)]
pub struct PollGuard {
    polls: Arc<Polls>,
    job_id: String,
}

impl Polls {
    pub fn begin(self: &Arc<Self>, job_id: &str) -> PollGuard {
        let mut inner = self.inner.lock().expect("polls lock");
        let count = inner.per_job.entry(job_id.to_owned()).or_default();
        count.reads += 1;
        count.in_flight += 1;
        count.max_in_flight = count.max_in_flight.max(count.in_flight);
        let in_flight = count.in_flight;
        if in_flight > inner.max_in_flight {
            inner.max_in_flight = in_flight;
            inner.max_job = Some(job_id.to_owned());
        }
        PollGuard {
            polls: self.clone(),
            job_id: job_id.to_owned(),
        }
    }

    pub fn get(&self, job_id: &str) -> PollCount {
        let inner = self.inner.lock().expect("polls lock");
        inner.per_job.get(job_id).cloned().unwrap_or_default()
    }

    /// The most reads of any one job ever in flight at once, and that job.
    pub fn max(&self) -> (u64, Option<String>) {
        let inner = self.inner.lock().expect("polls lock");
        (inner.max_in_flight, inner.max_job.clone())
    }

    pub fn snapshot(&self) -> BTreeMap<String, PollCount> {
        let inner = self.inner.lock().expect("polls lock");
        inner
            .per_job
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl Drop for PollGuard {
    fn drop(&mut self) {
        let mut inner = self.polls.inner.lock().expect("polls lock");
        if let Some(count) = inner.per_job.get_mut(&self.job_id) {
            count.in_flight = count.in_flight.saturating_sub(1);
        }
    }
}

/// What one key did, over the simulator's life.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyCount {
    /// Requests answered to the key, reads and creates together.
    pub requests: u64,
    /// Reads (job reads and lists, anything but a POST), refused ones included.
    pub reads: u64,
    /// Of `reads`, those of one job (`GET /jobs/{id}`, `/status`, `/result`).
    #[serde(default)]
    pub job_reads: u64,
    /// Of `reads`, those of the list (`GET /jobs`, a key check's `limit=1` included).
    #[serde(default)]
    pub list_reads: u64,
    /// POST requests to a create endpoint, refused ones included.
    pub creates: u64,
    /// 429s for being over the limit.
    pub rate_limited: u64,
    /// 429s injected by the status-429 fault.
    pub fault_429: u64,
    /// 500, 502 and 503 answers injected by the status-5xx fault.
    pub fault_5xx: u64,
    /// Reads slowed by the status-slow fault (whatever they then answered).
    pub fault_slow: u64,
    /// 404 answers: a job this key may not see, or no such job.
    pub not_found: u64,
}

/// What a request asked for, as the tallies count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// A POST to a create endpoint.
    Create,
    /// A read of one job.
    Job,
    /// A page of the key's job list.
    List,
    /// Any other read.
    OtherRead,
}

/// Per-key tallies, plus the requests that named no usable key.
#[derive(Debug, Default)]
pub struct KeyCounters {
    inner: Mutex<(BTreeMap<String, KeyCount>, u64)>,
}

impl KeyCounters {
    /// Tallies one answered request; `faults` are the faults injected into its answer.
    pub fn record(&self, key: Option<&str>, asked: Asked, status: u16, faults: &[&str]) {
        let mut inner = self.inner.lock().expect("key counters lock");
        let Some(key) = key else {
            inner.1 += 1;
            return;
        };
        let c = inner.0.entry(key.to_owned()).or_default();
        c.requests += 1;
        match asked {
            Asked::Create => c.creates += 1,
            Asked::Job => (c.reads, c.job_reads) = (c.reads + 1, c.job_reads + 1),
            Asked::List => (c.reads, c.list_reads) = (c.reads + 1, c.list_reads + 1),
            Asked::OtherRead => c.reads += 1,
        }
        let has = |f: &str| faults.contains(&f);
        c.fault_429 += u64::from(has("status_429"));
        c.fault_5xx += u64::from(has("status_5xx"));
        c.fault_slow += u64::from(has("status_slow"));
        c.rate_limited += u64::from(status == 429 && !has("status_429"));
        c.not_found += u64::from(status == 404);
    }

    /// Every key's tallies, and the count of requests with a missing or unknown key.
    pub fn snapshot(&self) -> (BTreeMap<String, KeyCount>, u64) {
        self.inner.lock().expect("key counters lock").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_reads_in_flight() {
        let polls = Arc::new(Polls::default());
        let a = polls.begin("job_1");
        let b = polls.begin("job_1");
        let c = polls.begin("job_2");
        assert_eq!(polls.get("job_1").in_flight, 2);
        drop(a);
        drop(b);
        let _d = polls.begin("job_1");
        let count = polls.get("job_1");
        assert_eq!(
            (count.reads, count.in_flight, count.max_in_flight),
            (3, 1, 2)
        );
        assert_eq!(polls.max(), (2, Some("job_1".to_owned())));
        drop(c);
        assert_eq!(polls.get("job_2").in_flight, 0);
    }

    #[test]
    fn tallies_answers_by_kind() {
        let k = KeyCounters::default();
        k.record(Some("a"), Asked::Job, 429, &[]);
        k.record(Some("a"), Asked::Job, 429, &["status_slow", "status_429"]);
        k.record(Some("a"), Asked::Create, 202, &[]);
        k.record(Some("a"), Asked::List, 200, &["status_slow"]);
        k.record(None, Asked::Job, 401, &[]);
        let (keys, unknown) = k.snapshot();
        let a = &keys["a"];
        assert_eq!((a.requests, a.reads, a.creates), (4, 3, 1));
        assert_eq!((a.job_reads, a.list_reads), (2, 1));
        assert_eq!((a.rate_limited, a.fault_429, a.fault_slow), (1, 1, 2));
        assert_eq!(unknown, 1);
    }
}
