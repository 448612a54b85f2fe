//! The operator's pages of the admin API, across tables (statements `*_page` of
//! `sql/queries/`), and the audit log (`audit_log.sql`). Every page is keyset-paged: it is read
//! after a position (a [`PageKey`] or an id) made of the page's last row, so rows written or
//! removed meanwhile never shift a page.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::{sql, DbError, DeadLetterRow, Store, WaitingEvent};

/// The most rows one page or listing answers: the admin API's `limit` and the CLI's `--limit`.
pub const PAGE_LIMIT_MAX: i64 = 1000;

/// A keyset position of a page ordered by a time then an id, written `<rfc3339>|<id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageKey {
    /// The time of the last row answered.
    pub at: DateTime<Utc>,
    /// Its id.
    pub id: String,
}

impl PageKey {
    /// The key of a row.
    pub fn of(at: DateTime<Utc>, id: &str) -> PageKey {
        PageKey {
            at,
            id: id.to_owned(),
        }
    }

    /// As an API answers it in `next_after`.
    pub fn encode(&self) -> String {
        format!(
            "{}|{}",
            self.at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            self.id
        )
    }

    /// Reads what [`PageKey::encode`] wrote.
    pub fn decode(s: &str) -> Option<PageKey> {
        let (at, id) = s.split_once('|')?;
        let at = DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc);
        Some(PageKey::of(at, id))
    }
}

fn split(after: Option<&PageKey>) -> (Option<DateTime<Utc>>, Option<&str>) {
    (after.map(|k| k.at), after.map(|k| k.id.as_str()))
}

/// An event set aside as another workspace's, with the answers that decided it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SetAsideEvent {
    /// The dedupe key.
    pub event_id: String,
    /// The job id it names.
    pub job_id: String,
    /// The status it reports.
    pub status: Option<String>,
    /// When it was stored.
    pub received_at: DateTime<Utc>,
    /// When it was set aside.
    pub set_aside_at: DateTime<Utc>,
    /// Why.
    pub set_aside_reason: Option<String>,
    /// Each key's answer, as the inbox check recorded it (removed with it by retention).
    pub answers: Option<Value>,
    /// When the verdict was made.
    pub checked_at: Option<DateTime<Utc>>,
}

/// A job Sume knows, with events here, but no row.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Orphan {
    /// Sume's job id.
    pub job_id: String,
    /// Each key's answer.
    pub answers: Value,
    /// When the verdict was made.
    pub checked_at: Option<DateTime<Utc>>,
    /// When the check was opened.
    pub created_at: DateTime<Utc>,
    /// Its events still waiting.
    pub waiting_events: i64,
}

/// A terminal status that contradicted the one a job kept.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Disagreement {
    /// Its id, the key of the next page.
    pub id: i64,
    /// The job.
    pub job_id: String,
    /// The state kept.
    pub kept_state: String,
    /// The state seen.
    pub seen_state: String,
    /// Sume's status as seen.
    pub seen_status: String,
    /// `webhook` or `poll`.
    #[schema(value_type = super::SourceName)]
    pub source: String,
    /// The contradicting event, for a webhook.
    pub event_id: Option<String>,
    /// When it was recorded.
    pub recorded_at: DateTime<Utc>,
}

/// One operator action.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// Its id, newest highest.
    pub id: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// Who: `api:operator` (and the caller's X-Actor), `cli:<user>@<host>`, or
    /// `console:operator (session <first 8 characters of its id>)`.
    pub actor: String,
    /// `replay_event`, `replay_dead_letters`, `drop_dead_letters`, or `console_sign_in` (a
    /// sign-in to the console).
    pub action: String,
    /// On what, and what came of it.
    pub detail: Value,
    /// The admin request it came from.
    pub request_id: Option<String>,
}

impl Store {
    /// Waiting events at least `older_than_secs` old, oldest first, after `after`.
    pub async fn events_waiting_page(
        &self,
        older_than_secs: f64,
        after: Option<&PageKey>,
        limit: i64,
    ) -> Result<Vec<WaitingEvent>, DbError> {
        let client = self.client().await?;
        let (at, id) = split(after);
        let rows = sql::EVENTS_WAITING_PAGE
            .query(&client, &[&older_than_secs, &at, &id, &limit])
            .await?;
        Ok(rows.iter().map(super::events::waiting_event).collect())
    }

    /// Set-aside events, in the order they were set aside, after `after`.
    pub async fn events_set_aside_page(
        &self,
        after: Option<&PageKey>,
        limit: i64,
    ) -> Result<Vec<SetAsideEvent>, DbError> {
        let client = self.client().await?;
        let (at, id) = split(after);
        let rows = sql::EVENTS_SET_ASIDE_PAGE
            .query(&client, &[&at, &id, &limit])
            .await?;
        Ok(rows
            .iter()
            .map(|r| SetAsideEvent {
                event_id: r.get("event_id"),
                job_id: r.get("job_id"),
                status: r.get("status"),
                received_at: r.get("received_at"),
                set_aside_at: r.get("set_aside_at"),
                set_aside_reason: r.get("set_aside_reason"),
                answers: r.get("answers"),
                checked_at: r.get("checked_at"),
            })
            .collect())
    }

    /// Orphans, the oldest check first, after `after` (the key of a check's `created_at` and
    /// job id).
    pub async fn inbox_checks_orphans_page(
        &self,
        after: Option<&PageKey>,
        limit: i64,
    ) -> Result<Vec<Orphan>, DbError> {
        let client = self.client().await?;
        let (at, id) = split(after);
        let rows = sql::INBOX_CHECKS_ORPHANS_PAGE
            .query(&client, &[&at, &id, &limit])
            .await?;
        Ok(rows
            .iter()
            .map(|r| Orphan {
                job_id: r.get("job_id"),
                answers: r.get("answers"),
                checked_at: r.get("checked_at"),
                created_at: r.get("created_at"),
                waiting_events: r.get("waiting_events"),
            })
            .collect())
    }

    /// Disagreements in id order after `after`.
    pub async fn disagreements_page(
        &self,
        after: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Disagreement>, DbError> {
        let client = self.client().await?;
        let rows = sql::DISAGREEMENTS_PAGE
            .query(&client, &[&after, &limit])
            .await?;
        Ok(rows
            .iter()
            .map(|r| Disagreement {
                id: r.get("id"),
                job_id: r.get("job_id"),
                kept_state: r.get("kept_state"),
                seen_state: r.get("seen_state"),
                seen_status: r.get("seen_status"),
                source: r.get("source"),
                event_id: r.get("event_id"),
                recorded_at: r.get("recorded_at"),
            })
            .collect())
    }

    /// Dead letters, newest first, after `after`.
    pub async fn dead_letters_page(
        &self,
        after: Option<&PageKey>,
        limit: i64,
    ) -> Result<Vec<DeadLetterRow>, DbError> {
        let client = self.client().await?;
        let (at, id) = split(after);
        let rows = sql::DEAD_LETTERS_PAGE
            .query(&client, &[&at, &id, &limit])
            .await?;
        Ok(rows
            .iter()
            .map(super::dead_letters::dead_letter_row)
            .collect())
    }

    /// Refuses, before an operator's write, when the role may not record it in the audit log
    /// (a role granted its rights before the log existed): nothing is done then.
    pub async fn audit_log_ensure_writable(&self) -> Result<(), DbError> {
        let client = self.client().await?;
        let row = sql::AUDIT_LOG_WRITABLE.query_one(&client, &[]).await?;
        match row.get("writable") {
            true => Ok(()),
            false => Err(DbError::AuditUnwritable),
        }
    }

    /// Records what an operator did.
    pub async fn audit_log_insert(
        &self,
        actor: &str,
        action: &str,
        detail: &Value,
        request_id: Option<&str>,
    ) -> Result<(), DbError> {
        let client = self.client().await?;
        sql::AUDIT_LOG_INSERT
            .query_one(&client, &[&actor, &action, &detail, &request_id])
            .await?;
        Ok(())
    }

    /// What operators did, newest first, before the id `before`.
    pub async fn audit_log_page(
        &self,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<AuditEntry>, DbError> {
        let client = self.client().await?;
        let rows = sql::AUDIT_LOG_PAGE
            .query(&client, &[&before, &limit])
            .await?;
        Ok(rows
            .iter()
            .map(|r| AuditEntry {
                id: r.get("id"),
                at: r.get("at"),
                actor: r.get("actor"),
                action: r.get("action"),
                detail: r.get("detail"),
                request_id: r.get("request_id"),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_keys_read_back_what_they_write() {
        let at = DateTime::parse_from_rfc3339("2026-11-30T23:59:58.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        let key = PageKey::of(at, "dl_a|b");
        assert_eq!(PageKey::decode(&key.encode()), Some(key));
        assert_eq!(PageKey::decode("yesterday|x"), None);
        assert_eq!(PageKey::decode("no-bar"), None);
    }
}
