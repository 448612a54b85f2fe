//! Per API key, how the sweep settles open jobs: by walking the key's list at Sume (one read
//! answers up to a hundred jobs) or by reading each due job by itself; and, for a key whose
//! jobs walks settle, when its next walk falls due. Pure: the numbers come from the database
//! (`Store::jobs_open_by_key`, `sume.key_sweeps`, the reads left in `sume.rate_buckets`), the
//! poll acts.
//!
//! The choice, over half of POLL_MAX_INTERVAL:
//! - reading jobs one by one costs one read per poll that falls due in it;
//! - a walk costs the pages it reads: about the pages of the key's jobs back to its oldest open
//!   one if the list is newest first (the last walk's count, or, before any, the open jobs over
//!   a hundred, plus one), and at most [`page_cap`]; every job it did not see is then read by
//!   itself, so a list in another order costs more, never a wrong answer.
//!
//! A walk is chosen when it is expected to cost fewer reads than the polls it replaces.
//!
//! The schedule ([`next_walk`], [`pace_gap`]): a key's next walk falls due when its oldest
//! unsettled job's own poll does (never polled: POLL_AFTER after registration; else the time
//! its backoff set), so a lost webhook is found at the poll that would have found it one job
//! at a time. It never comes sooner than the key's pace allows: after a walk that read `p`
//! pages, the next waits `p` reads at the pace of the reads left today beyond [`reserve`],
//! spread evenly to UTC midnight. A walk that read no page (its jobs were not yet past
//! POLL_AFTER) sets no wait; with nothing to spare, the next walk waits for the next UTC day.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// Jobs a page of Sume's list holds at most.
pub const PAGE: i64 = 100;

/// The reads a walk of the key's list is expected to cost.
pub fn expected_pages(open: i64, last_pages: Option<i32>) -> i64 {
    match last_pages {
        Some(p) => i64::from(p.max(1)),
        None => open / PAGE + 1,
    }
}

/// Whether walking the list is expected to cost fewer reads than the `polls_due` one-by-one
/// reads it replaces.
pub fn walk_pays(open: i64, polls_due: i64, last_pages: Option<i32>) -> bool {
    expected_pages(open, last_pages) < polls_due
}

/// The most pages one walk may read before the jobs it has not seen are read by themselves:
/// never as many as the reads it replaces (one per claimed job), and at most twice the last
/// walk's and two more (room for the workspace to grow), so a list whose order hides the jobs
/// costs a bounded excess.
pub fn page_cap(claimed: usize, last_pages: Option<i32>) -> usize {
    let grown = last_pages.map_or(usize::MAX, |p| 2 * p.max(0) as usize + 2);
    grown.min(claimed.saturating_sub(1)).max(1)
}

/// The reads of a key's UTC day that its walks leave to everything else: a fifth of
/// SUME_READ_DAILY (1,800 of the default 9,000). Give-up rechecks stop below a tenth of the
/// day (900); the other tenth keeps room above it for the key's checks (288 a day for each
/// instance holding the key), the inbox checks, the rechecks and a `reconcile` (250 pages for
/// six hours of 100,000 jobs a day).
pub fn reserve(daily_reads: u32) -> i64 {
    i64::from(daily_reads) / 5
}

/// A key's day as the walks' pace sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Day {
    /// Reads the key has left today, for the whole fleet.
    pub reads_left: i64,
    /// Time to the next UTC midnight, when the day's reads come back.
    pub until_midnight: Duration,
    /// Reads kept back from the walks ([`reserve`]).
    pub reserve: i64,
}

impl Day {
    /// The day of `now`, with `reads_left` and `reserve`.
    pub fn at(now: DateTime<Utc>, reads_left: i64, reserve: i64) -> Day {
        Day {
            reads_left,
            until_midnight: until_utc_midnight(now),
            reserve,
        }
    }
}

/// From `now` to the next UTC midnight: more than zero, at most a day.
pub fn until_utc_midnight(now: DateTime<Utc>) -> Duration {
    let midnight = now
        .date_naive()
        .succ_opt()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc());
    midnight
        .and_then(|m| (m - now).to_std().ok())
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(86_400))
}

/// How long after a walk that read `pages` pages the key's next walk may start: those pages at
/// the day's pace, the reads left beyond the reserve spread evenly to UTC midnight. No page
/// read costs no wait; a walk that would not fit in what is left waits for the next UTC day,
/// which is never exceeded.
pub fn pace_gap(pages: usize, day: Day) -> Duration {
    let spare = day.reads_left - day.reserve;
    if spare <= 0 {
        return day.until_midnight;
    }
    if pages == 0 {
        return Duration::ZERO;
    }
    day.until_midnight
        .mul_f64(pages as f64 / spare as f64)
        .min(day.until_midnight)
}

/// When a key's next walk falls due: at its oldest unsettled job's own poll (`oldest_poll`),
/// and not before its pace allows (`not_before`, the last walk's end plus [`pace_gap`]).
/// `None`: the key has no open job, and no walk is due.
pub fn next_walk(
    oldest_poll: Option<DateTime<Utc>>,
    not_before: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    oldest_poll.map(|poll| poll.max(not_before))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_is_chosen_when_its_pages_cost_less_than_the_polls() {
        // A few open jobs: reading them is as cheap as a page.
        assert!(!walk_pays(1, 1, None));
        assert!(!walk_pays(3, 1, None));
        // Hundreds in flight, most due in the interval: a handful of pages.
        assert!(walk_pays(380, 300, None));
        assert_eq!(expected_pages(380, None), 4);
        // The last walk read 18 pages (a workspace busier than our own jobs show).
        assert!(!walk_pays(380, 18, Some(18)));
        assert!(walk_pays(380, 19, Some(18)));
    }

    #[test]
    fn a_walk_never_reads_as_many_pages_as_the_jobs_it_replaces() {
        assert_eq!(page_cap(1, None), 1);
        assert_eq!(page_cap(50, None), 49);
        assert_eq!(page_cap(5000, Some(3)), 8);
        assert_eq!(page_cap(5, Some(30)), 4);
    }

    fn at(hms: &str) -> DateTime<Utc> {
        format!("2026-12-01T{hms}Z").parse().expect("a time")
    }

    const MIN: Duration = Duration::from_secs(60);
    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn the_pace_spreads_the_reads_left_beyond_the_reserve_to_utc_midnight() {
        let reserve = reserve(9_000);
        assert_eq!(reserve, 1_800);
        // (pages read, reads left, now) -> the wait before the next walk.
        let table = [
            // Midnight: 7,200 reads for walks over 24 hours, one a 12 s.
            (1, 9_000, "00:00:00", Duration::from_secs(12)),
            (18, 9_000, "00:00:00", Duration::from_secs(216)),
            // Noon, half the day's reads spent as paced: the same pace.
            (18, 5_400, "12:00:00", Duration::from_secs(216)),
            // Noon, the reads spent faster than paced: walks slow down.
            (18, 2_520, "12:00:00", Duration::from_secs(1_080)),
            // A walk that read no page (nothing past POLL_AFTER): no wait.
            (0, 9_000, "06:00:00", Duration::ZERO),
            (0, 1_801, "23:00:00", Duration::ZERO),
            // Nearly spent: the walk that does not fit waits for the next UTC day.
            (40, 1_810, "18:00:00", 6 * HOUR),
            // Only the reserve left: whatever the walk read, the next is tomorrow's.
            (0, 1_800, "18:00:00", 6 * HOUR),
            (3, 12, "23:59:00", MIN),
        ];
        for (pages, reads_left, now, want) in table {
            let day = Day::at(at(now), reads_left, reserve);
            let got = pace_gap(pages, day);
            let off = got.abs_diff(want);
            assert!(
                off < Duration::from_millis(1),
                "{pages} pages, {reads_left} left at {now}: {got:?}, not {want:?}"
            );
        }
    }

    #[test]
    fn the_next_walk_is_due_at_the_oldest_job_s_own_poll_and_not_before_the_pace() {
        let now = at("12:00:00");
        let min = chrono::Duration::minutes;
        let table = [
            // (oldest open job's own poll, pace allows from) -> due at
            // Jobs due a while: the pace decides.
            (Some(now - min(5)), now + min(1), Some(now + min(1))),
            // The pace allows a walk; the oldest job's first poll is two minutes away (one
            // registered after the last walk, say).
            (Some(now + min(2)), now - min(60), Some(now + min(2))),
            // Both at once.
            (Some(now), now, Some(now)),
            // No open job: no walk.
            (None, now - min(60), None),
        ];
        for (oldest_poll, not_before, want) in table {
            assert_eq!(
                next_walk(oldest_poll, not_before),
                want,
                "{oldest_poll:?}, {not_before}"
            );
        }
    }

    #[test]
    fn utc_midnight_is_never_now_and_never_more_than_a_day_away() {
        assert_eq!(until_utc_midnight(at("00:00:00")), 24 * HOUR);
        assert_eq!(until_utc_midnight(at("23:59:59")), Duration::from_secs(1));
        assert_eq!(until_utc_midnight(at("12:00:00")), 12 * HOUR);
        let late = at("23:59:59") + chrono::Duration::milliseconds(999);
        assert_eq!(until_utc_midnight(late), Duration::from_millis(1));
    }
}
