//! Walks of a key's job list at Sume: where a key has many jobs in flight, one read of a page
//! settles up to a hundred of them.
//!
//! Every pass weighs, per configured key, the pages a walk is expected to read against the
//! one-by-one polls that fall due meanwhile ([`walk_pays`]). For a key where the walk pays, its
//! jobs are no longer polled one by one: a walk falls due when the key's oldest unsettled job's
//! own poll does, never sooner than the key's pace allows ([`next_walk`], [`pace_gap`]: the
//! pages the walk read, at the pace of the reads left today beyond a reserve, to UTC midnight).
//! Then one instance (under a lease in `sume.key_sweeps`) claims the key's open jobs older than
//! POLL_AFTER and reads the list page by page until every one of them was seen, the list ends,
//! or [`page_cap`] pages were read. A job seen with a status is settled by it through the
//! poll's fold (terminal: closed; in flight: still open). A job not seen is read by itself
//! afterwards, once its own poll is due: the list's order and paging are not documented, so an
//! absence never proves anything. The walk does not stop at the age of the oldest job it looks
//! for: a job may be registered long after Sume created it (a backfill), and the page cap
//! bounds the excess.

use std::collections::{HashMap, HashSet};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Poll, PollStats, Served};
use crate::actors::sweep::schedule::{send_deadline, serve};
use crate::config::ApiKey;
use crate::db::{ClaimedJob, DbError, PolledCall};
use crate::decisions::poll_decision::{PollFold, PollRules};
use crate::decisions::walk_choice::{next_walk, pace_gap, page_cap, reserve, walk_pays, Day};
use crate::sume_api::{Answer, ListAnswer, Reply};

/// The most jobs one walk claims; the rest wait for the next.
const WALK_MAX_JOBS: i64 = 10_000;

/// What the list said about a claimed job.
struct Seen {
    status: String,
    result: Option<sume_wire::JsonText>,
}

/// What reading the pages found.
#[derive(Default)]
struct Walked {
    seen: HashMap<String, Seen>,
    pages: usize,
    /// The pages up to the last one that held a claimed job: the next walk's estimate.
    useful_pages: usize,
    /// Claimed jobs the list showed twice with different statuses.
    contradicted: HashSet<String>,
}

impl Poll {
    /// Per key, walks where walking pays and a walk is due (the oldest open job's own poll
    /// is, and the key's pace allows one); answers the stats and the keys whose jobs walks
    /// settle (they are not polled one by one).
    pub(super) async fn walks(
        &self,
        shutdown: &CancellationToken,
    ) -> Result<(PollStats, Vec<String>), DbError> {
        if !self.config.list_walks {
            return Ok((PollStats::default(), Vec::new()));
        }
        let interval = self.config.poll_max_interval / 2;
        let poll_after = self.config.poll_after.as_secs_f64();
        let loads = self
            .store
            .jobs_open_by_key(poll_after, interval.as_secs_f64(), &self.clock)
            .await?;
        let names: Vec<String> = self.reader.keys().iter().map(|k| k.name.clone()).collect();
        let sweeps = self.store.key_sweeps_state(&names, &self.clock).await?;
        let mut stats = PollStats::default();
        let mut walked_keys = Vec::new();
        for key in self.reader.keys() {
            let Some(load) = loads
                .iter()
                .find(|l| l.key_name.as_ref() == Some(&key.name))
            else {
                continue;
            };
            let Some(sweep) = sweeps.iter().find(|s| s.key_name == key.name) else {
                continue;
            };
            if !walk_pays(load.open, load.polls_due, sweep.last_pages) {
                continue;
            }
            walked_keys.push(key.name.clone());
            let due = next_walk(load.oldest_poll, sweep.not_before)
                .is_some_and(|at| at <= sweep.now && !sweep.held);
            if due && !shutdown.is_cancelled() {
                stats += self.walk(key, shutdown).await?;
            }
        }
        Ok((stats, walked_keys))
    }

    /// One walk of `key`'s list, if no other instance holds it.
    async fn walk(&self, key: &ApiKey, shutdown: &CancellationToken) -> Result<PollStats, DbError> {
        let owner = self.reader.owner();
        let lease = self.config.lease.as_secs_f64();
        let Some((last_pages, at)) = self
            .store
            .key_sweeps_claim(&key.name, owner, lease, &self.clock)
            .await?
        else {
            return Ok(PollStats::default());
        };
        let claimed_at = Instant::now();
        let claims = self
            .store
            .jobs_claim_walk(&self.claim(WALK_MAX_JOBS), &key.name, &self.clock)
            .await?;
        let deadline = send_deadline(claimed_at, self.config.lease, self.config.request_timeout);
        let walked = match claims.is_empty() {
            true => Walked::default(),
            false => {
                let cap = page_cap(claims.len(), last_pages);
                self.read_pages(key, &claims, cap, deadline, shutdown)
                    .await?
            }
        };
        let mut stats = self
            .settle(key, claims, &walked, deadline, shutdown)
            .await?;
        stats.list_pages = walked.pages;
        stats.seen_in_list = walked.seen.len();
        // The pace counts every page read (a list in an unexpected order costs what it cost);
        // the next walk's estimate, the pages up to the last that held a job looked for.
        let now = at + chrono::Duration::from_std(claimed_at.elapsed()).unwrap_or_default();
        let reads_left = self.reader.reads_left_on(key, now.date_naive());
        let day = Day::at(now, reads_left, reserve(self.reader.daily_reads()));
        let next = pace_gap(walked.pages, day).as_secs_f64();
        let estimate = (walked.pages > 0).then(|| walked.useful_pages.max(1) as i32);
        let counts = (estimate, walked.seen.len() as i32);
        self.store
            .key_sweeps_done(&key.name, owner, next, counts, &self.clock)
            .await?;
        Ok(stats)
    }

    /// Reads `key`'s list until every claimed job was seen, the list ends, `cap` pages were
    /// read, a page answers badly or was cut at 1 MiB (its entries whole before the cut are
    /// taken, and nothing after it can be trusted), or the budget has nothing before `deadline`.
    async fn read_pages(
        &self,
        key: &ApiKey,
        claims: &[ClaimedJob],
        cap: usize,
        deadline: Instant,
        shutdown: &CancellationToken,
    ) -> Result<Walked, DbError> {
        let mut wanted: HashMap<&str, ()> =
            claims.iter().map(|c| (c.job_id.as_str(), ())).collect();
        let mut walked = Walked::default();
        let mut cursor: Option<String> = None;
        let mut cursors = HashSet::new();
        while !wanted.is_empty() && walked.pages < cap && !shutdown.is_cancelled() {
            let page = match self
                .reader
                .list_page(key, cursor.as_deref(), deadline)
                .await?
            {
                Some(ListAnswer::Page(page)) => page,
                Some(ListAnswer::Failed(why)) => {
                    tracing::info!(key = %key.name, answer = %why, "a list page was not read; the jobs it would have shown are read by themselves");
                    break;
                }
                None => break,
            };
            walked.pages += 1;
            let mut settled = 0;
            for job in &page.data {
                if let Some(first) = walked.seen.get(&job.id) {
                    // Listed twice, saying two things: the list settles nothing of it, a read
                    // of its own decides.
                    if first.status != job.status
                        || first.result.as_ref().and_then(|r| r.value()) != job.outcome_value()
                    {
                        tracing::warn!(key = %key.name, job_id = %job.id, first = %first.status, then = %job.status, "Sume's list showed a job twice, saying two things: it is read by itself");
                        walked.contradicted.insert(job.id.clone());
                    }
                    continue;
                }
                if wanted.remove(job.id.as_str()).is_some() {
                    settled += 1;
                    let seen = Seen {
                        status: job.status.clone(),
                        result: job.outcome_text(),
                    };
                    walked.seen.insert(job.id.clone(), seen);
                }
            }
            self.metrics.list_page_settled.observe(settled as f64);
            if settled > 0 {
                walked.useful_pages = walked.pages;
            }
            if page.cut {
                let entries = page.data.len() + page.unread;
                tracing::warn!(key = %key.name, entries, "a list page past 1 MiB was cut: {entries} entries read, the rest are read by themselves");
                break;
            }
            cursor = page.next_cursor.filter(|c| !c.is_empty());
            if let Some(again) = cursor.as_ref().filter(|c| !cursors.insert((*c).clone())) {
                tracing::warn!(key = %key.name, cursor = %again, "Sume's list answered a cursor it had given before: the walk stops, the jobs it would have shown are read by themselves");
                break;
            }
            if !page.has_more || cursor.is_none() {
                break;
            }
        }
        for id in &walked.contradicted {
            walked.seen.remove(id);
        }
        Ok(walked)
    }

    /// Settles every claimed job: by what the list said of it, or by a read of its own.
    async fn settle(
        &self,
        key: &ApiKey,
        claims: Vec<ClaimedJob>,
        walked: &Walked,
        deadline: Instant,
        shutdown: &CancellationToken,
    ) -> Result<PollStats, DbError> {
        let hold_verdicts = !self.reader.verdicts_allowed();
        let jobs_claimed = claims.len();
        // A job the list did not show is read by itself only when its own poll is due: the
        // walk never reads a job sooner than its backoff would.
        let (claims, not_due): (Vec<ClaimedJob>, Vec<ClaimedJob>) = claims
            .into_iter()
            .partition(|c| c.poll_due || walked.seen.contains_key(&c.job_id));
        let not_due: Vec<String> = not_due.into_iter().map(|c| c.job_id).collect();
        self.store
            .jobs_release(&not_due, self.reader.owner())
            .await?;
        let (served, unserved) = serve(claims, self.config.concurrency, |c| async {
            match walked.seen.get(&c.job_id) {
                Some(seen) => self.settle_seen(key, c, seen, hold_verdicts).await,
                None => self.poll(c, deadline, shutdown, hold_verdicts).await,
            }
        })
        .await?;
        self.record(&served.calls).await;
        self.store
            .jobs_release(&unserved, self.reader.owner())
            .await?;
        Ok(PollStats {
            jobs_claimed,
            ..served.stats
        })
    }

    /// A job the list showed: its status folded as a poll's answer.
    async fn settle_seen(
        &self,
        key: &ApiKey,
        job: ClaimedJob,
        seen: &Seen,
        hold_verdicts: bool,
    ) -> Result<(Served, Option<String>), DbError> {
        let age = std::time::Duration::try_from_secs_f64(job.age_secs).unwrap_or_default();
        let rules = PollRules {
            hold_verdicts,
            ..PollRules::of(&self.config)
        };
        let mut fold = PollFold::new(rules, age, job.poll_attempts);
        let text = format!("200 {} (list)", seen.status);
        fold.read(Answer {
            text: text.clone(),
            reply: Reply::Found {
                status: seen.status.clone(),
                result: seen.result.clone(),
            },
        });
        let mut stats = PollStats::default();
        let released = self
            .perform(&job.job_id, fold.decide(false), &mut stats)
            .await?;
        let call = PolledCall {
            job_id: job.job_id.clone(),
            key_name: key.name.clone(),
            answer: text,
            latency_ms: 0,
            at: Instant::now(),
        };
        let served = Served {
            stats,
            calls: vec![call],
        };
        Ok((served, released.then_some(job.job_id)))
    }
}
