//! `sume.job_closes` (statements of `sql/queries/job_closes.sql`): the feed of closes, read
//! from a cursor that never passes a close a transaction could still commit, and the
//! `sume_job_closed` channel that announces each close.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sume_wire::JsonText;

use super::{sql, DbError, Store};

/// A position in the feed: the closing transaction's id and the entry's sequence number.
/// Written `"<xid>-<seq>"`; `"0"` is the start. Entries come in this order, and an entry that
/// commits later always sorts after every entry already answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct FeedCursor {
    xid: i64,
    seq: i64,
}

impl FeedCursor {
    /// The start of the feed: every entry comes after it.
    pub const START: FeedCursor = FeedCursor { xid: 0, seq: 0 };
}

impl fmt::Display for FeedCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == FeedCursor::START {
            f.write_str("0")
        } else {
            write!(f, "{}-{}", self.xid, self.seq)
        }
    }
}

/// PostgreSQL's first normal transaction id: 0 to 2 are reserved, so no close carries them.
const FIRST_XID: i64 = 3;

/// A cursor no answer can have given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadCursor {
    /// Neither `0` nor `<xid>-<seq>` of two non-negative integers.
    #[error("a feed cursor is \"0\" or the next_cursor of an earlier answer, not {0:?}")]
    Form(String),
    /// `<xid>-<seq>` with a transaction id below 3, PostgreSQL's first normal one (`0-5`).
    #[error(
        "the feed cursor {0:?} names transaction {1}, which no close carries (PostgreSQL's \
         transaction ids start at 3), so no answer gave it: resume from 0"
    )]
    Reserved(String, i64),
}

/// Read as numbers, leading zeros and all (`007-1` is `7-1`); the answer's cursors are written
/// without them.
impl FromStr for FeedCursor {
    type Err = BadCursor;

    fn from_str(s: &str) -> Result<FeedCursor, BadCursor> {
        let shown = || s.chars().take(64).collect::<String>();
        let bad = || BadCursor::Form(shown());
        if s == "0" {
            return Ok(FeedCursor::START);
        }
        let (xid, seq) = s.split_once('-').ok_or_else(bad)?;
        let number = |t: &str| -> Result<i64, BadCursor> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse().map_err(|_| bad())
        };
        let (xid, seq) = (number(xid)?, number(seq)?);
        if xid < FIRST_XID {
            return Err(BadCursor::Reserved(shown(), xid));
        }
        Ok(FeedCursor { xid, seq })
    }
}

/// One close, as the feed answers it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FeedEntry {
    /// This entry's position: resume after it with `GET /v1/closes?after=<cursor>`.
    pub cursor: String,
    /// Sume's job id.
    pub job_id: String,
    /// The state this close gave the job.
    #[schema(value_type = super::JobStateName)]
    pub state: String,
    /// `webhook`, `poll` or `give_up`.
    #[schema(value_type = super::CloserName)]
    pub closed_by: String,
    /// This close replaced a give-up: the job's state may have changed from `expired`.
    pub supersedes_give_up: bool,
    /// When the job was closed.
    pub closed_at: DateTime<Utc>,
    /// The application's own reference.
    pub order_id: Option<String>,
    /// The name of the API key that created the job.
    pub api_key: Option<String>,
    /// The job's result now, as stored.
    #[schema(value_type = Option<Value>)]
    pub result: Option<JsonText>,
}

/// A page of the feed.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FeedPage {
    /// The closes after the cursor asked for, oldest first.
    pub closes: Vec<FeedEntry>,
    /// Where to resume: the last entry's cursor, or the one asked for when there was none.
    pub next_cursor: String,
}

/// A connection listening on `sume_job_closed`: the ids of closed jobs.
pub type ClosesListener = super::Listener;

impl Store {
    /// Whether `cursor` names a transaction this database has not assigned yet: no answer of
    /// its feed gave it.
    pub async fn feed_cursor_ahead(&self, cursor: FeedCursor) -> Result<bool, DbError> {
        let client = self.client().await?;
        let row = sql::JOB_CLOSES_CURSOR_AHEAD
            .query_one(&client, &[&cursor.xid])
            .await?;
        Ok(row.get("ahead"))
    }

    /// Up to `limit` closes after `after`, oldest first; only closes of transactions that have
    /// ended, so a later answer never holds an entry before this one's last.
    pub async fn job_closes_after(
        &self,
        after: FeedCursor,
        limit: i64,
    ) -> Result<FeedPage, DbError> {
        let client = self.client().await?;
        let rows = sql::JOB_CLOSES_AFTER
            .query(&client, &[&after.xid, &after.seq, &limit])
            .await?;
        let mut next = after;
        let closes = rows
            .iter()
            .map(|r| {
                next = FeedCursor {
                    xid: r.get("xid"),
                    seq: r.get("seq"),
                };
                FeedEntry {
                    cursor: next.to_string(),
                    job_id: r.get("job_id"),
                    state: r.get("state"),
                    closed_by: r.get("closed_by"),
                    supersedes_give_up: r.get("supersedes_give_up"),
                    closed_at: r.get("closed_at"),
                    order_id: r.get("order_id"),
                    api_key: r.get("api_key"),
                    result: super::json_columns::sent_json_text(r, "result"),
                }
            })
            .collect();
        Ok(FeedPage {
            closes,
            next_cursor: next.to_string(),
        })
    }

    /// Opens a connection outside the pool that listens on `sume_job_closed` (to
    /// LISTEN_DATABASE_URL when set); an error when this store has no LISTEN connection.
    pub async fn job_closes_listen(&self) -> Result<ClosesListener, DbError> {
        self.listen(sql::JOB_CLOSES_LISTEN).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_what_they_write() {
        let c = FeedCursor { xid: 812, seq: 31 };
        assert_eq!(c.to_string(), "812-31");
        assert_eq!("812-31".parse::<FeedCursor>(), Ok(c));
        assert_eq!("0".parse::<FeedCursor>(), Ok(FeedCursor::START));
        assert_eq!(FeedCursor::START.to_string(), "0");
        for bad in [
            "",
            "-",
            "1-",
            "-1",
            "1-2-3",
            "a-1",
            "1--2",
            "+1-2",
            "99999999999999999999-1",
        ] {
            assert!(bad.parse::<FeedCursor>().is_err(), "{bad}");
        }
        assert!(FeedCursor { xid: 5, seq: 9 } < FeedCursor { xid: 6, seq: 1 });
    }

    /// Transaction ids 0 to 2 are PostgreSQL's reserved ones: a cursor naming one was taken
    /// and echoed as `next_cursor`, though no answer can have given it.
    #[test]
    fn a_cursor_of_a_reserved_transaction_id_is_refused_saying_to_resume_from_0() {
        for (reserved, xid) in [
            ("0-5", 0),
            ("1-1", 1),
            ("2-999", 2),
            ("000-5", 0),
            ("0-0", 0),
        ] {
            let e = reserved.parse::<FeedCursor>().unwrap_err();
            assert_eq!(e, BadCursor::Reserved(reserved.into(), xid));
            let said = e.to_string();
            assert!(said.contains(&format!("{reserved:?}")), "{said}");
            assert!(said.ends_with("resume from 0"), "{said}");
        }
        assert_eq!("3-0".parse(), Ok(FeedCursor { xid: 3, seq: 0 }));
    }

    /// A cursor written with leading zeros reads as its numbers, and is written back without.
    #[test]
    fn leading_zeros_read_as_the_cursor_they_pad() {
        let c: FeedCursor = "007-01".parse().unwrap();
        assert_eq!(c, FeedCursor { xid: 7, seq: 1 });
        assert_eq!(c.to_string(), "7-1");
        assert_eq!(
            "00".parse::<FeedCursor>(),
            Err(BadCursor::Form("00".into()))
        );
    }
}
