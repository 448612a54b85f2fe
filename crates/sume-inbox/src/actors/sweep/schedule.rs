//! How the sweep's services schedule their work: `every` runs a pass at a jittered
//! interval, `serve` serves a batch of claims a few at a time, `send_deadline` keeps a
//! request inside its claim's lease. How far apart the asks about one job are is
//! [`crate::decisions::backoff`].

use std::future::Future;
use std::ops::AddAssign;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::give_up_recheck::RecheckStats;
use super::inbox_check::InboxCheckStats;
use super::poll::PollStats;
use crate::db::{DbError, Removed};
use crate::decisions::backoff::jitter;

/// The last moment a request may start and still finish within a claim made at `claimed`
/// (on the process clock: it bounds real requests, not the statements' clock).
pub(super) fn send_deadline(
    claimed: Instant,
    lease: Duration,
    request_timeout: Duration,
) -> Instant {
    claimed + lease.saturating_sub(request_timeout * 2)
}

/// Serves claims, `concurrency` at a time; answers the merged stats and the claims to give
/// back unserved.
pub(super) async fn serve<C, S, F, Fut>(
    claims: Vec<C>,
    concurrency: usize,
    serve_one: F,
) -> Result<(S, Vec<String>), DbError>
where
    S: Default + AddAssign,
    F: FnMut(C) -> Fut,
    Fut: Future<Output = Result<(S, Option<String>), DbError>>,
{
    let results: Vec<_> = futures_util::stream::iter(claims)
        .map(serve_one)
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut stats = S::default();
    let mut unserved = Vec::new();
    for r in results {
        let (s, released) = r?;
        stats += s;
        unserved.extend(released);
    }
    Ok((stats, unserved))
}

/// A service's loop: `pass` every `interval` (jittered, so instances drift apart) until
/// shutdown. A pass that did something is logged with its stats, a failed one is logged and
/// tried again at the next tick; the loop only schedules, `pass` does the work.
pub(super) async fn every<S, F, Fut>(
    what: &str,
    interval: Duration,
    shutdown: &CancellationToken,
    mut pass: F,
) where
    S: PassReport + Default + PartialEq,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<S, DbError>>,
{
    while !shutdown.is_cancelled() {
        match pass().await {
            Ok(stats) if stats != S::default() => stats.report(what),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "{what} pass failed; will retry"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(jitter(interval)) => {}
        }
    }
}

/// A pass's stats as one log line of flat, numeric fields (a log pipeline sums them).
pub(super) trait PassReport {
    /// Logs the pass of `what` at info.
    fn report(&self, what: &str);
}

impl PassReport for PollStats {
    fn report(&self, what: &str) {
        tracing::info!(
            jobs_claimed = self.jobs_claimed,
            closed_by_poll = self.closed_by_poll,
            still_open = self.still_open,
            given_up = self.given_up,
            disagreements = self.disagreements,
            deferred = self.deferred,
            requests = self.requests,
            list_pages = self.list_pages,
            seen_in_list = self.seen_in_list,
            "{what} pass"
        );
    }
}

impl PassReport for InboxCheckStats {
    fn report(&self, what: &str) {
        tracing::info!(
            orphans_resolved = self.orphans_resolved,
            checks_claimed = self.checks_claimed,
            foreign = self.foreign,
            events_set_aside = self.events_set_aside,
            orphans = self.orphans,
            events_orphaned = self.events_orphaned,
            checks_inconclusive = self.checks_inconclusive,
            left_to_other_keys = self.left_to_other_keys,
            deferred = self.deferred,
            requests = self.requests,
            "{what} pass"
        );
    }
}

impl PassReport for RecheckStats {
    fn report(&self, what: &str) {
        tracing::info!(
            claimed = self.claimed,
            superseded = self.superseded,
            stands = self.stands,
            again = self.again,
            deferred = self.deferred,
            expired = self.expired,
            requests = self.requests,
            "{what} pass"
        );
    }
}

impl PassReport for Removed {
    fn report(&self, what: &str) {
        tracing::info!(
            events_applied = self.events_applied,
            events_set_aside = self.events_set_aside,
            dead_letters = self.dead_letters,
            inbox_checks = self.inbox_checks,
            jobs = self.jobs,
            feed = self.feed,
            orphan_events = self.orphan_events,
            orphan_checks = self.orphan_checks,
            orphans_unmarked = self.orphans_unmarked,
            "{what} pass"
        );
    }
}
