//! A page of Sume's job list (`GET /jobs`), read entry by entry: one entry that is no job
//! spoils neither the page nor the walk reading it.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::shown::cut_chars;
use crate::status_client::read_json;
use crate::JobObject;

/// One page of `GET /jobs`. The docs give only the parameters; the shape (`data`, `has_more`,
/// `next_cursor`) is this project's assumption, read leniently: a missing `has_more` is
/// `false`, a missing `next_cursor` ends the listing, and a job whose `result` no reader here
/// could take is listed without it ([`JobObject`]), so it does not spoil the page. Nor does an
/// entry of `data` that is no job at all (`null`, an object without a string `id` and
/// `status`, a NUL in them): it is left out of `data` and counted in `unread`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "RawPage")]
pub struct JobPage {
    /// The jobs of this page, newest first.
    pub data: Vec<JobObject>,
    /// Whether another page follows.
    pub has_more: bool,
    /// What to pass as `cursor` for the next page.
    pub next_cursor: Option<String>,
    /// Entries of the page's `data` that did not read as a job: not in `data`.
    pub unread: usize,
    /// The first of them as sent, cut at 64 characters.
    pub unread_example: Option<String>,
}

/// The most characters of an entry not read as a job that [`JobPage::unread_example`] keeps.
const SHOWN_ENTRY_CHARS: usize = 64;

/// A page as it comes: its entries raw, each read as a job on its own.
#[derive(Deserialize)]
struct RawPage {
    data: Vec<Box<RawValue>>,
    #[serde(default)]
    has_more: bool,
    #[serde(default)]
    next_cursor: Option<String>,
}

impl From<RawPage> for JobPage {
    fn from(raw: RawPage) -> JobPage {
        let mut page = JobPage {
            data: Vec::with_capacity(raw.data.len()),
            has_more: raw.has_more,
            next_cursor: raw.next_cursor,
            unread: 0,
            unread_example: None,
        };
        for entry in raw.data {
            let job = read_json::<JobObject>(entry.get().as_bytes()).ok();
            match job.and_then(JobObject::storable) {
                Some(job) => page.data.push(job),
                None => {
                    page.unread += 1;
                    page.unread_example.get_or_insert_with(|| {
                        let (cut, more) = cut_chars(entry.get(), SHOWN_ENTRY_CHARS);
                        format!("{cut}{more}")
                    });
                }
            }
        }
        page
    }
}
