//! One key's walk of Sume's job list for `reconcile`, page after page: which jobs of a page it
//! looks at, and whether the walk goes on, ends, or stops because the list leads nowhere. Pure:
//! [`super::reconciliation`] reads the pages within the budget and closes what this returns.
//!
//! The walk ends at the first job created before the cutoff (the list is taken to be newest
//! first) or at the list's last page. Sume's docs do not fix the order, so the walk checks it: a
//! job created more than [`ORDER_SLACK`] after one listed before it shows another order (oldest
//! first, or by update), in which the first old job says nothing of those after it; from then
//! on only the list's end (or a stop below) ends the walk, and the report says why. It stops, saying so, when a page says more follows but
//! gives no cursor or a cursor it gave before, when [`IDLE_PAGES`] pages in a row showed no job
//! it had not shown before (an endless run of empty pages), and when it has read `--max-pages`
//! pages: a list that never reaches the cutoff (or whose `created_at` this version cannot read)
//! would otherwise be read until the key's day of reads is spent, the fleet's polls with it.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use chrono::{DateTime, Utc};
use sume_wire::{JobPage, Status};

use super::reconciliation::KeyReport;
use crate::db::ReconcileObservation;
use crate::sume_api::created_at::created_at;

/// The most pages a key's walk reads unless `--max-pages` says otherwise: a hundred thousand
/// jobs at a hundred a page, a tenth of a key's documented 10,000 reads a day.
pub const MAX_PAGES_DEFAULT: u32 = 1000;

/// The most `--max-pages` takes: a key's documented reads for a whole day.
pub const MAX_PAGES_LIMIT: u32 = 10_000;

/// Pages in a row, each saying more follows, that showed no job not shown before (empty, or
/// only repeats), after which the walk stops: the list does not move on.
pub const IDLE_PAGES: usize = 5;

/// How much newer than a job listed before it a job may be created and the list still be
/// newest first: the skew between the clocks of the servers that stamp `created_at`.
pub const ORDER_SLACK: chrono::Duration = chrono::Duration::seconds(1);

/// What follows a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Read the page this cursor names.
    Read(String),
    /// The walk reached the cutoff or the list's last page: the key's listing is complete.
    Done,
    /// The walk cannot go on, for the reason given (said in the key's report).
    Stop(String),
}

/// Where one key's walk is.
pub struct ListWalk {
    cutoff: DateTime<Utc>,
    now: DateTime<Utc>,
    max_pages: usize,
    cursors: HashSet<String>,
    /// The jobs shown so far, by a hash of their id (a hundred thousand ids cost little).
    ids: HashSet<u64>,
    hasher: RandomState,
    /// Pages in a row that showed no job not shown before.
    idle: usize,
    /// The oldest creation time listed so far.
    oldest: Option<DateTime<Utc>>,
}

impl ListWalk {
    /// A walk looking at the jobs created from `cutoff` on, as of `now`, reading at most
    /// `max_pages` pages.
    pub fn new(cutoff: DateTime<Utc>, now: DateTime<Utc>, max_pages: u32) -> ListWalk {
        ListWalk {
            cutoff,
            now,
            max_pages: max_pages.max(1) as usize,
            cursors: HashSet::new(),
            ids: HashSet::new(),
            hasher: RandomState::new(),
            idle: 0,
            oldest: None,
        }
    }

    /// Reads `page`, counted in `report` (its `pages` already counting it): the terminal jobs to
    /// close, those created from the cutoff on and those whose `created_at` does not read as a
    /// time (counted `undated`: what Sume reports terminal is closed whenever it was created);
    /// then what follows.
    pub fn page(
        &mut self,
        page: &JobPage,
        report: &mut KeyReport,
    ) -> (Vec<ReconcileObservation>, Next) {
        let mut seen = Vec::new();
        let mut reached = false;
        let mut moved = false;
        report.unread += page.unread;
        if let Some(entry) = &page.unread_example {
            report.unread_example.get_or_insert_with(|| entry.clone());
        }
        for job in &page.data {
            moved |= self.ids.insert(self.hasher.hash_one(&job.id));
            match created_at(job.created_at.as_ref(), self.now) {
                Ok(at) => {
                    self.check_order(at, report);
                    if at < self.cutoff {
                        reached = true;
                        continue;
                    }
                }
                Err(sent) => {
                    report.undated += 1;
                    report.undated_example.get_or_insert(sent);
                }
            }
            report.listed += 1;
            if Status::parse(&job.status).terminal().is_some() {
                report.terminal += 1;
                seen.push(ReconcileObservation {
                    job_id: job.id.clone(),
                    status: job.status.clone(),
                    result: job.outcome_text(),
                });
            }
        }
        self.idle = if moved { 0 } else { self.idle + 1 };
        (seen, self.next(page, reached, report))
    }

    /// Notes, the first time, a job created at `at` listed after an older one.
    fn check_order(&mut self, at: DateTime<Utc>, report: &mut KeyReport) {
        let oldest = *self.oldest.get_or_insert(at);
        if at > oldest + ORDER_SLACK && report.out_of_order.is_none() {
            report.out_of_order = Some(format!(
                "a job created at {} listed after one created at {}",
                at.to_rfc3339(),
                oldest.to_rfc3339()
            ));
        }
        self.oldest = Some(oldest.min(at));
    }

    /// What follows a page that `reached` the cutoff or not.
    fn next(&mut self, page: &JobPage, reached: bool, report: &KeyReport) -> Next {
        if reached && report.out_of_order.is_none() {
            return Next::Done;
        }
        if page.cut {
            return Next::Stop(format!(
                "a page of Sume's list was past 1 MiB and cut: the {} entries whole before the \
                 cut were read, and no cursor of a cut page is trusted, so the jobs after them \
                 were not looked at (the sweep reads them by themselves)",
                page.data.len() + page.unread
            ));
        }
        if !page.has_more {
            return Next::Done;
        }
        let Some(cursor) = page.next_cursor.clone().filter(|c| !c.is_empty()) else {
            return Next::Stop(
                "Sume's list said more follows but gave no cursor to read it with: the rest of \
                 it cannot be read"
                    .into(),
            );
        };
        if !self.cursors.insert(cursor.clone()) {
            return Next::Stop(format!(
                "Sume's list answered a cursor it had given before ({cursor:?}): it does not \
                 move on, so the rest of it cannot be read"
            ));
        }
        if self.idle >= IDLE_PAGES {
            return Next::Stop(format!(
                "Sume's list answered {IDLE_PAGES} pages in a row showing no job it had not \
                 shown before (empty, or repeats), each saying more follows: it does not move \
                 on, so the rest of it cannot be read"
            ));
        }
        if report.pages >= self.max_pages {
            return Next::Stop(self.page_limit(report));
        }
        Next::Read(cursor)
    }

    /// Why a walk stops at `--max-pages`, with what it did and did not look at.
    fn page_limit(&self, report: &KeyReport) -> String {
        let undated = match &report.undated_example {
            Some(example) => format!(
                " ({} of the {} jobs listed had a created_at not read as a time, such as \
                 {example}: those cannot show where --since falls)",
                report.undated, report.listed
            ),
            None => String::new(),
        };
        let max = self.max_pages;
        match &report.out_of_order {
            Some(order) => format!(
                "read {max} page(s), the most --max-pages lets it: the list is not newest first \
                 ({order}), so a job created before --since does not end the walk{undated}: the \
                 jobs past them were not looked at; run it again with a larger --max-pages"
            ),
            None => format!(
                "read {max} page(s), the most --max-pages lets it, without reaching a job \
                 created before --since{undated}: the jobs past them were not looked at; run it \
                 again with a larger --max-pages or a shorter --since"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn walk(max_pages: u32) -> ListWalk {
        ListWalk::new(
            at("2026-06-01T11:00:00Z"),
            at("2026-06-01T12:00:00Z"),
            max_pages,
        )
    }

    fn page(jobs: Vec<Value>, has_more: bool, cursor: &str) -> JobPage {
        serde_json::from_value(json!({"data": jobs, "has_more": has_more, "next_cursor": cursor}))
            .unwrap()
    }

    /// Reads `page` as the next one, as the reconcile does.
    fn read(w: &mut ListWalk, p: &JobPage, r: &mut KeyReport) -> (usize, Next) {
        r.pages += 1;
        let (seen, next) = w.page(p, r);
        (seen.len(), next)
    }

    #[test]
    fn the_walk_ends_at_the_first_job_created_before_the_cutoff_however_it_is_dated() {
        let mut w = walk(100);
        let mut r = KeyReport::default();
        let p = page(
            vec![
                json!({"id": "a", "status": "completed", "created_at": "2026-06-01T11:30:00Z"}),
                json!({"id": "b", "status": "running", "created_at": 1_780_313_400.5}),
                json!({"id": "c", "status": "failed", "created_at": 1_590_000_000}),
            ],
            true,
            "c",
        );
        assert_eq!(read(&mut w, &p, &mut r), (1, Next::Done));
        assert_eq!((r.listed, r.terminal, r.undated), (2, 1, 0));
    }

    #[test]
    fn jobs_without_a_creation_time_are_looked_at_and_counted() {
        let mut w = walk(100);
        let mut r = KeyReport::default();
        let p = page(
            vec![
                json!({"id": "a", "status": "completed"}),
                json!({"id": "b", "status": "failed", "created_at": 1_780_311_600_000_i64}),
            ],
            false,
            "",
        );
        assert_eq!(read(&mut w, &p, &mut r), (2, Next::Done));
        assert_eq!((r.listed, r.undated), (2, 2));
        assert_eq!(r.undated_example.as_deref(), Some("none"));
    }

    #[test]
    fn pages_showing_nothing_new_stop_the_walk_after_a_few() {
        let mut w = walk(100);
        let mut r = KeyReport::default();
        let job = json!({"id": "a", "status": "running", "created_at": "2026-06-01T11:30:00Z"});
        let first = page(vec![job.clone()], true, "c0");
        assert_eq!(read(&mut w, &first, &mut r).1, Next::Read("c0".into()));
        for n in 1..IDLE_PAGES {
            let again = page(
                if n % 2 == 0 {
                    vec![job.clone()]
                } else {
                    vec![]
                },
                true,
                &format!("c{n}"),
            );
            assert_eq!(read(&mut w, &again, &mut r).1, Next::Read(format!("c{n}")));
        }
        let last = page(vec![], true, "c_last");
        let Next::Stop(why) = read(&mut w, &last, &mut r).1 else {
            panic!("the walk went on");
        };
        assert!(why.contains("5 pages in a row showing no job"), "{why}");
    }

    #[test]
    fn the_walk_stops_at_max_pages_saying_what_it_did_not_look_at() {
        let mut w = walk(3);
        let mut r = KeyReport::default();
        for n in 0..2 {
            let p = page(
                vec![json!({"id": format!("j{n}"), "status": "queued"})],
                true,
                &format!("c{n}"),
            );
            assert_eq!(read(&mut w, &p, &mut r).1, Next::Read(format!("c{n}")));
        }
        let p = page(
            vec![json!({"id": "j2", "status": "queued", "created_at": "soon"})],
            true,
            "c2",
        );
        let Next::Stop(why) = read(&mut w, &p, &mut r).1 else {
            panic!("the walk went on");
        };
        assert!(
            why.starts_with("read 3 page(s), the most --max-pages lets it"),
            "{why}"
        );
        assert!(
            why.contains(
                "3 of the 3 jobs listed had a created_at not read as a time, such as none"
            ),
            "{why}"
        );
        // The last page is complete all the same.
        assert!(read(&mut w, &page(vec![], false, ""), &mut r).1 == Next::Done);
    }

    #[test]
    fn a_list_seen_oldest_first_is_read_past_the_cutoff_to_its_end() {
        let mut w = walk(100);
        let mut r = KeyReport::default();
        let job = |id: &str, at: &str| json!({"id": id, "status": "completed", "created_at": at});
        // Newest first, within a second's skew: the first old job ends the walk.
        let p = page(
            vec![
                job("a", "2026-06-01T11:30:00.000Z"),
                job("b", "2026-06-01T11:30:00.900Z"),
                job("c", "2026-06-01T10:00:00Z"),
            ],
            true,
            "c1",
        );
        assert_eq!(read(&mut w, &p, &mut r), (2, Next::Done));
        assert_eq!(r.out_of_order, None);

        let mut w = walk(2);
        let mut r = KeyReport::default();
        let p = page(
            vec![
                job("x", "2020-01-01T00:00:00Z"),
                job("y", "2020-01-01T00:00:02Z"),
            ],
            true,
            "c1",
        );
        assert_eq!(read(&mut w, &p, &mut r), (0, Next::Read("c1".into())));
        let order = r.out_of_order.clone().unwrap();
        assert!(order.contains("created at 2020-01-01T00:00:02+00:00 listed after one created at 2020-01-01T00:00:00+00:00"), "{order}");
        let p = page(vec![job("z", "2026-06-01T11:59:00Z")], true, "c2");
        let Next::Stop(why) = read(&mut w, &p, &mut r).1 else {
            panic!("the walk went on");
        };
        assert!(
            why.contains("the list is not newest first (a job created at"),
            "{why}"
        );
        assert_eq!((r.listed, r.terminal), (1, 1));
    }

    #[test]
    fn a_cursor_given_before_or_none_with_more_to_come_stops_the_walk() {
        let mut w = walk(100);
        let mut r = KeyReport::default();
        let p = |c: &str| page(vec![json!({"id": c, "status": "queued"})], true, c);
        assert_eq!(read(&mut w, &p("x"), &mut r).1, Next::Read("x".into()));
        let Next::Stop(why) = read(&mut w, &p("x"), &mut r).1 else {
            panic!("the walk went on");
        };
        assert!(
            why.contains("a cursor it had given before (\"x\")"),
            "{why}"
        );
        let Next::Stop(why) = read(&mut w, &p(""), &mut r).1 else {
            panic!("the walk went on");
        };
        assert!(why.contains("gave no cursor"), "{why}");
    }
}
