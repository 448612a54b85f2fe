//! A page of Sume's job list (`GET /jobs`), read entry by entry: one entry that is no job
//! spoils neither the page nor the walk reading it. A page whose body was cut at
//! [`crate::status_client::MAX_ANSWER_BYTES`] (a hundred jobs with large results) keeps the
//! entries that came whole before the cut ([`JobPage::read_cut`]).

use std::fmt;

use serde::de::{DeserializeSeed, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
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
    /// The body was cut at [`crate::status_client::MAX_ANSWER_BYTES`]: `data` holds the
    /// entries that came whole before the cut (never the one cut in it), and the rest of the
    /// list is not known: `has_more` is `false` and `next_cursor` `None`, whatever came before
    /// the cut (no cursor of a cut body is trusted).
    pub cut: bool,
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
            cut: false,
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

impl JobPage {
    /// The page a body holds; when it does not read and was `cut` at
    /// [`crate::status_client::MAX_ANSWER_BYTES`], the head of it ([`JobPage::read_cut`]).
    pub(crate) fn read(body: &[u8], cut: bool) -> Option<JobPage> {
        read_json::<JobPage>(body)
            .ok()
            .or_else(|| cut.then(|| JobPage::read_cut(body)).flatten())
    }

    /// The page of a body cut at [`crate::status_client::MAX_ANSWER_BYTES`]: the entries of its
    /// top-level `data` array that came whole before the cut, each read as in a whole page, with
    /// [`JobPage::cut`] set. `None` when the cut comes before `data`, when `data` is no array,
    /// or when the text is not valid JSON up to the cut (the reading must end at the cut, not
    /// at an error).
    pub(crate) fn read_cut(body: &[u8]) -> Option<JobPage> {
        let text = crate::status_answer::text_of_cut(body)?;
        let mut data = None;
        let mut reader = serde_json::Deserializer::from_str(&text);
        match reader.deserialize_map(CutPage { data: &mut data }) {
            Err(e) if e.is_eof() => {}
            _ => return None,
        }
        let mut page = JobPage::from(RawPage {
            data: data?,
            has_more: false,
            next_cursor: None,
        });
        page.cut = true;
        Some(page)
    }
}

/// The top level of a cut page: its `data` entries kept as they come, all else skipped.
struct CutPage<'a> {
    data: &'a mut Option<Vec<Box<RawValue>>>,
}

impl<'de> Visitor<'de> for CutPage<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a page of jobs")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key != "data" {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if std::mem::replace(&mut seen, true) {
                return Err(A::Error::duplicate_field("data"));
            }
            map.next_value_seed(Entries {
                data: &mut *self.data,
            })?;
        }
        Ok(())
    }
}

/// The `data` array of a cut page (set once its `[` came: a cut inside anything else is no
/// page): an entry is kept once what follows it (`,` or `]`) came, so the one cut in the
/// middle, or cut right after its last character, is never kept.
struct Entries<'a> {
    data: &'a mut Option<Vec<Box<RawValue>>>,
}

impl<'de> DeserializeSeed<'de> for Entries<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Entries<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of jobs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let into = self.data.insert(Vec::new());
        let mut last = None;
        while let Some(()) = seq.next_element_seed(Entry {
            into: &mut *into,
            last: &mut last,
        })? {}
        into.extend(last);
        Ok(())
    }
}

/// One entry of a cut page's `data`: reaching it means the `,` after the one before came, which
/// is then whole and kept.
struct Entry<'a> {
    into: &'a mut Vec<Box<RawValue>>,
    last: &'a mut Option<Box<RawValue>>,
}

impl<'de> DeserializeSeed<'de> for Entry<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.into.extend(self.last.take());
        *self.last = Some(Box::<RawValue>::deserialize(d)?);
        Ok(())
    }
}

#[cfg(test)]
#[path = "job_page_tests.rs"]
mod tests;
