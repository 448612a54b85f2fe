//! Per API key, how the sweep settles open jobs: by walking the key's list at Sume (one read
//! answers up to a hundred jobs) or by reading each due job by itself. Pure: the numbers come
//! from the database (`Store::jobs_open_by_key`, the last walk's pages), the poll acts.
//!
//! The arithmetic, over one walk interval (half of POLL_MAX_INTERVAL):
//! - reading jobs one by one costs one read per poll that falls due in the interval;
//! - a walk costs the pages it reads: about the pages of the key's jobs back to its oldest open
//!   one if the list is newest first (the last walk's count, or, before any, the open jobs over
//!   a hundred, plus one), and at most [`page_cap`]; every job it did not see is then read by
//!   itself, so a list in another order costs more, never a wrong answer.
//!
//! A walk is chosen when it is expected to cost fewer reads than the polls it replaces.

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
}
