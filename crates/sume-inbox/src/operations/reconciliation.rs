//! `sume-inbox reconcile --since 6h`: after a database restore or a failover to an
//! asynchronous replica, events that were acknowledged can be gone, and the jobs they closed
//! are open again (or the rows are back without them). Reconcile reads Sume's own job list,
//! `GET /jobs?limit=&cursor=`, newest first, with every configured key, within the fleet's read
//! budget (`sume.rate_buckets`: the same per-minute bucket and daily allowance the sweep takes
//! from, so a running fleet and a reconcile never exceed Sume's limits together), and closes
//! every registered job that Sume reports terminal through the normal fold
//! ([`crate::db::Store::close_reconciled`], `closed_by = poll`): a job already closed in the
//! same state is untouched, a different terminal state is a recorded disagreement, a give-up is
//! superseded. Ids with no row are counted, never registered.
//!
//! Listing stops at the first job created before `--since` (the list is newest first; that
//! order and `created_at` are this project's assumption about the list, see
//! `fixtures/sume/docs/index.json`; `created_at` is read as RFC 3339 or Unix seconds,
//! [`crate::sume_api::created_at`]; a list seen in another order is read on), at the last
//! page, or when the budget has nothing left before `--max-wait` has passed. It also stops at
//! `--max-pages` pages, and where the list leads nowhere (a cursor given before or none, pages
//! showing nothing new: [`ListWalk`]); then the key's report says where it stopped.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sume_wire::StatusClient;
use tokio::time::Instant;

use crate::config::{ApiKey, Rate};
use crate::db::{DbError, ReconcileObservation, Store};
use crate::decisions::job_fold::Outcome;
use crate::operations::list_walk::{ListWalk, Next, MAX_PAGES_DEFAULT};
use crate::sume_api::read_budget::{Budget, BudgetError};

/// Jobs asked for per page (the most the list serves, per the simulator; an assumption).
pub const PAGE_SIZE: u32 = 100;

/// What reconcile did with one key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KeyReport {
    /// The key's name.
    pub key: String,
    /// Pages read.
    pub pages: usize,
    /// Jobs listed within `--since` (and those whose creation time does not read).
    pub listed: usize,
    /// Of those, jobs Sume reports terminal.
    pub terminal: usize,
    /// Registered jobs this run closed.
    pub closed: usize,
    /// Registered jobs already closed in the same state.
    pub already_closed: usize,
    /// Registered jobs closed in another state: recorded in `sume.disagreements`.
    pub disagreements: usize,
    /// Terminal jobs with no row here (another application's, or never registered).
    pub not_registered: usize,
    /// Of the jobs listed, those whose `created_at` did not read as a time: looked at all the
    /// same, they cannot show where `--since` falls.
    pub undated: usize,
    /// The first such `created_at`, as sent (`none` when absent).
    pub undated_example: Option<String>,
    /// Entries of the list that did not read as a job (`null`, no string `id` or `status`):
    /// left out, the rest of their page read.
    pub unread: usize,
    /// The first such entry, as sent, cut.
    pub unread_example: Option<String>,
    /// Where the list showed it is not newest first, when it did: then a job created before
    /// `--since` does not end the walk, which reads on to the list's end or `--max-pages`.
    pub out_of_order: Option<String>,
    /// Whether the listing reached `--since` or its last page.
    pub complete: bool,
    /// Why it stopped early, when it did.
    pub stopped: Option<String>,
}

/// What one reconcile run did, key by key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileReport {
    /// Jobs created before this were not looked at.
    pub since: DateTime<Utc>,
    /// One report per configured key.
    pub keys: Vec<KeyReport>,
}

impl ReconcileReport {
    /// Whether every key's listing was read to its end.
    pub fn complete(&self) -> bool {
        self.keys.iter().all(|k| k.complete)
    }
}

/// Sume's job list, the budget and the store: what a reconcile run needs.
pub struct Reconcile {
    store: Store,
    client: StatusClient,
    keys: Vec<ApiKey>,
    budget: Budget,
    page_size: u32,
    max_pages: u32,
}

impl Reconcile {
    /// Reads with `keys` under `rate` a minute and `daily` reads a day per key (the fleet's).
    pub fn new(
        store: Store,
        client: StatusClient,
        keys: Vec<ApiKey>,
        rate: Rate,
        daily: u32,
    ) -> Reconcile {
        Reconcile {
            budget: Budget::new(store.clone(), rate).with_daily_reads(daily),
            store,
            client,
            keys,
            page_size: PAGE_SIZE,
            max_pages: MAX_PAGES_DEFAULT,
        }
    }

    /// The same reading at most `n` pages per key (`--max-pages`).
    pub fn with_max_pages(self, n: u32) -> Reconcile {
        Reconcile {
            max_pages: n.max(1),
            ..self
        }
    }

    /// The same asking for pages of `n` jobs (tests reach a second page with a few jobs).
    pub fn with_page_size(self, n: u32) -> Reconcile {
        Reconcile {
            page_size: n.max(1),
            ..self
        }
    }

    /// Lists the jobs created within `since` with every key, closing what Sume reports
    /// terminal; waits at most `max_wait` for the budget (in all).
    pub async fn run(
        &self,
        since: Duration,
        max_wait: Duration,
    ) -> Result<ReconcileReport, DbError> {
        let names: Vec<String> = self.keys.iter().map(|k| k.name.clone()).collect();
        self.budget.ensure(&names).await?;
        let now = Utc::now();
        let cutoff = now - chrono::Duration::from_std(since).unwrap_or(chrono::Duration::MAX);
        let deadline = Instant::now() + max_wait;
        let mut report = ReconcileReport {
            since: cutoff,
            keys: Vec::new(),
        };
        for key in &self.keys {
            let walk = ListWalk::new(cutoff, now, self.max_pages);
            report.keys.push(self.key(key, walk, deadline).await?);
        }
        Ok(report)
    }

    async fn key(
        &self,
        key: &ApiKey,
        mut walk: ListWalk,
        deadline: Instant,
    ) -> Result<KeyReport, DbError> {
        let mut report = KeyReport {
            key: key.name.clone(),
            ..KeyReport::default()
        };
        let mut cursor: Option<String> = None;
        // What Sume last said about its limit: when the wait it asked for outlasts --max-wait,
        // it is Sume refusing, not this fleet's own budget.
        let mut refused: Option<String> = None;
        loop {
            match self.budget.acquire(&key.name, deadline).await {
                Ok(_) => {}
                Err(BudgetError::Deadline) => {
                    report.stopped = Some(match refused.take() {
                        Some(said) => format!(
                            "Sume {said} and the wait it asked for does not end within \
                             --max-wait: run it again later"
                        ),
                        None => "no read budget left within --max-wait (the minute's or the \
                                 day's): run it again later"
                            .into(),
                    });
                    break;
                }
                Err(BudgetError::Db(e)) => return Err(e),
            }
            let reply = match self
                .client
                .list_jobs(&key.key, self.page_size, cursor.as_deref(), None)
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    report.stopped = Some(e.to_string());
                    break;
                }
            };
            self.budget
                .observe(&key.name, reply.http_status, &reply.rate)
                .await?;
            let request_id = reply.request_id.as_deref().unwrap_or("-");
            refused = match (reply.http_status, reply.rate.remaining) {
                (429, _) => Some(format!("answered 429 (request_id {request_id})")),
                (_, Some(0)) => Some("said no read remains (RateLimit-Remaining: 0)".into()),
                _ => None,
            };
            if reply.http_status == 429 {
                continue; // the pause it asked for is in the budget now
            }
            let Some(page) = reply.page.clone() else {
                report.stopped = Some(no_page(&reply));
                break;
            };
            report.pages += 1;
            let (seen, next) = walk.page(&page, &mut report);
            self.close(&seen, &mut report).await?;
            match next {
                Next::Read(next) => cursor = Some(next),
                Next::Done => {
                    report.complete = true;
                    break;
                }
                Next::Stop(why) => {
                    report.stopped = Some(why);
                    break;
                }
            }
        }
        Ok(report)
    }

    async fn close(
        &self,
        seen: &[ReconcileObservation],
        report: &mut KeyReport,
    ) -> Result<(), DbError> {
        if seen.is_empty() {
            return Ok(());
        }
        // The same entry twice says nothing new (two that differ are both folded: the second
        // a disagreement).
        let mut distinct: Vec<ReconcileObservation> = Vec::with_capacity(seen.len());
        for o in seen {
            let again = distinct
                .iter()
                .any(|d| d.job_id == o.job_id && d.status == o.status && d.result == o.result);
            if !again {
                distinct.push(o.clone());
            }
        }
        let seen = &distinct;
        let outcomes = self.store.close_reconciled(seen).await?;
        report.not_registered += seen.len() - outcomes.len();
        for (job_id, outcome) in outcomes {
            match outcome {
                Outcome::Closed => {
                    report.closed += 1;
                    tracing::info!(%job_id, key = %report.key, "reconcile closed a job Sume reports terminal");
                }
                Outcome::Disagreement => report.disagreements += 1,
                _ => report.already_closed += 1,
            }
        }
        Ok(())
    }
}

/// Why a list answer that holds no page stops the walk.
fn no_page(reply: &sume_wire::ListReply) -> String {
    let request_id = reply.request_id.as_deref().unwrap_or("-");
    match &reply.redirect {
        Some(moved) => format!(
            "the list answered {moved}, a redirect, which is not followed (what answers there \
             is not Sume's API): check SUME_API_URL"
        ),
        None if reply.http_status == 200 => format!(
            "Sume answered 200 with a body that does not read as a page of jobs ({}request_id \
             {request_id}): check SUME_API_URL",
            reply
                .body_kind
                .as_deref()
                .map(|k| format!("{k}, "))
                .unwrap_or_default()
        ),
        None if reply.http_status == 304 => format!(
            "the list answered 304 Not Modified, though it sent no validator (request_id \
             {request_id}): something in front of Sume answers for it; check SUME_API_URL"
        ),
        None => format!(
            "Sume answered {} (request_id {request_id})",
            reply.http_status
        ),
    }
}
