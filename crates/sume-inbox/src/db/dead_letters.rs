//! `sume.dead_letters` (statements of `sql/queries/dead_letters.sql`): verified deliveries
//! whose body names no job, kept for an operator to read and replay.

use super::Session;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{sql, DbError, Store, StoredDelivery};

/// A verified delivery whose body names no job.
#[derive(Debug, Clone)]
pub struct NewDeadLetter {
    /// A key derived from the delivery, so a redelivery is stored once.
    pub dead_letter_id: String,
    /// Why it could not be stored as an event.
    pub reason: String,
    /// The raw body, exactly as signed.
    pub body: Bytes,
    /// `X-Sume-Event-Id` as received.
    pub header_event_id: Option<String>,
    /// The signature's timestamp (Unix seconds).
    pub signed_at: i64,
    /// The signature header, kept so that a replay can verify again.
    pub signature: String,
}

/// A dead letter, for `dead-letters ls`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct DeadLetterRow {
    /// Its key.
    pub dead_letter_id: String,
    /// Why it is dead.
    pub reason: String,
    /// `X-Sume-Event-Id` as received.
    pub header_event_id: Option<String>,
    /// The body's size.
    pub bytes: i32,
    /// When it was stored.
    pub received_at: DateTime<Utc>,
    /// When an operator replayed it.
    pub replayed_at: Option<DateTime<Utc>>,
}

/// `dead_letters_insert` for a batch sorted by id.
pub(super) async fn insert<C: Session>(db: &C, dead: &[NewDeadLetter]) -> Result<(), DbError> {
    let ids: Vec<&str> = dead.iter().map(|d| d.dead_letter_id.as_str()).collect();
    let reasons: Vec<&str> = dead.iter().map(|d| d.reason.as_str()).collect();
    let bodies: Vec<&[u8]> = dead.iter().map(|d| d.body.as_ref()).collect();
    let headers: Vec<Option<&str>> = dead.iter().map(|d| d.header_event_id.as_deref()).collect();
    let signed: Vec<i64> = dead.iter().map(|d| d.signed_at).collect();
    let sigs: Vec<&str> = dead.iter().map(|d| d.signature.as_str()).collect();
    sql::DEAD_LETTERS_INSERT
        .execute(db, &[&ids, &reasons, &bodies, &headers, &signed, &sigs])
        .await?;
    Ok(())
}

/// A dead letter as the listings read it (`dead_letters_list`, `_page`, and with its body's
/// head for the console).
pub(super) fn dead_letter_row(r: &tokio_postgres::Row) -> DeadLetterRow {
    DeadLetterRow {
        dead_letter_id: r.get("dead_letter_id"),
        reason: r.get("reason"),
        header_event_id: r.get("header_event_id"),
        bytes: r.get("bytes"),
        received_at: r.get("received_at"),
        replayed_at: r.get("replayed_at"),
    }
}

impl Store {
    /// The newest dead letters first.
    pub async fn dead_letters_list(&self, limit: i64) -> Result<Vec<DeadLetterRow>, DbError> {
        let client = self.client().await?;
        let rows = sql::DEAD_LETTERS_LIST.query(&client, &[&limit]).await?;
        Ok(rows.iter().map(dead_letter_row).collect())
    }

    /// Dead letters not replayed yet, oldest first, after `after` (the position the last page
    /// answered); with the position of the last one.
    pub async fn dead_letters_pending(
        &self,
        after: Option<&PendingAfter>,
        limit: i64,
    ) -> Result<(Vec<StoredDelivery>, Option<PendingAfter>), DbError> {
        let client = self.client().await?;
        let (at, id) = (after.map(|a| a.0), after.map(|a| a.1.as_str()));
        let rows = sql::DEAD_LETTERS_PENDING
            .query(&client, &[&at, &id, &limit])
            .await?;
        let last = rows
            .last()
            .map(|r| PendingAfter(r.get("received_at"), r.get("dead_letter_id")));
        let letters = rows
            .iter()
            .map(|r| {
                let body: Vec<u8> = r.get("body");
                StoredDelivery {
                    id: r.get("dead_letter_id"),
                    job_id: None,
                    body: Bytes::from(body),
                    header_event_id: r.get("header_event_id"),
                    signed_at: r.get("signed_at"),
                    signature: r.get("signature"),
                    applied: None,
                    set_aside: false,
                    reason: r.get("reason"),
                }
            })
            .collect();
        Ok((letters, last))
    }

    /// Removes these dead letters; answers the ids that were there.
    pub async fn dead_letters_drop(&self, ids: &[String]) -> Result<Vec<String>, DbError> {
        self.audit_log_ensure_writable().await?;
        let client = self.client().await?;
        let rows = sql::DEAD_LETTERS_DROP.query(&client, &[&ids]).await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Marks a dead letter replayed (once).
    pub async fn dead_letters_mark_replayed(&self, id: &str) -> Result<(), DbError> {
        let client = self.client().await?;
        sql::DEAD_LETTERS_MARK_REPLAYED
            .execute(&client, &[&id])
            .await?;
        Ok(())
    }
}

/// A position in the dead letters not replayed yet: a letter's arrival and id.
#[derive(Debug, Clone)]
pub struct PendingAfter(pub DateTime<Utc>, pub String);

/// A dead letter with the head of its raw body, for the console.
#[derive(Debug, Clone)]
pub struct DeadLetterBody {
    /// The dead letter's row.
    pub row: DeadLetterRow,
    /// The first 8 KiB of the body as received.
    pub body_head: Vec<u8>,
}

impl Store {
    /// The newest `limit` dead letters with the head of each body, in one query.
    pub async fn dead_letters_with_bodies(
        &self,
        limit: i64,
    ) -> Result<Vec<DeadLetterBody>, DbError> {
        let client = self.client().await?;
        let rows = sql::DEAD_LETTERS_CONSOLE_PAGE
            .query(&client, &[&limit])
            .await?;
        Ok(rows
            .iter()
            .map(|r| DeadLetterBody {
                row: dead_letter_row(r),
                body_head: r.get("body_head"),
            })
            .collect())
    }
}
