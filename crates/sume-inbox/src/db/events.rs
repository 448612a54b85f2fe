//! `sume.events`, the inbox (statements of `sql/queries/events.sql`): storing verified
//! deliveries, finding what waits, and what the admin commands read.

use super::Session;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

use super::{sql, DbError, Store};
use crate::db::clock::Clock;

/// A verified event, ready to store.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The dedupe key, from the signed body ([`sume_wire::dedupe_key`]).
    pub event_id: String,
    /// `X-Sume-Event-Id` as received: a hint, never the key (it is not signed).
    pub header_event_id: Option<String>,
    /// The job the event is about.
    pub job_id: String,
    /// The body's `type`, when it has one.
    pub event_type: Option<String>,
    /// The job status the event reports.
    pub status: Option<String>,
    /// The job's result, JSON text as received.
    pub result: Option<String>,
    /// The raw body, exactly as signed.
    pub body: Bytes,
    /// The signature's timestamp (Unix seconds).
    pub signed_at: i64,
    /// The signature header, kept so that a replay can verify again.
    pub signature: String,
}

/// One event of a job, for `jobs show`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct EventRow {
    /// The dedupe key.
    pub event_id: String,
    /// The body's `type`.
    pub event_type: Option<String>,
    /// The job status the event reports.
    pub status: Option<String>,
    /// When Sume signed it (its `X-Sume-Timestamp`); absent from an older daemon's answer.
    #[serde(default)]
    pub signed_at: Option<DateTime<Utc>>,
    /// When it was stored.
    pub received_at: DateTime<Utc>,
    /// When it was applied to its job.
    pub applied_at: Option<DateTime<Utc>>,
    /// What applying it did: `closed` (it closed the job), `status` (an in-flight status of the
    /// open job), `ignored` (nothing to do) or `disagreement` (a terminal state other than the
    /// job's).
    #[schema(value_type = Option<super::OutcomeName>)]
    pub outcome: Option<String>,
    /// When it was set aside as not ours.
    pub set_aside_at: Option<DateTime<Utc>>,
    /// Why it was set aside, with Sume's answers.
    pub set_aside_reason: Option<String>,
}

/// An event waiting in the inbox, for `inbox ls`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct WaitingEvent {
    /// The dedupe key.
    pub event_id: String,
    /// The job it waits for.
    pub job_id: String,
    /// The body's `type`.
    pub event_type: Option<String>,
    /// The job status the event reports.
    pub status: Option<String>,
    /// When it was stored.
    pub received_at: DateTime<Utc>,
    /// Seconds since it was stored, by the database's clock.
    pub age_secs: f64,
    /// Whether the job row exists (attach applies it at its next pass).
    pub job_exists: bool,
    /// The inbox check's verdict so far, if one was made.
    #[schema(value_type = Option<super::VerdictName>)]
    pub verdict: Option<String>,
}

/// A stored delivery (an event or a dead letter), as replay needs it.
#[derive(Debug, Clone)]
pub struct StoredDelivery {
    /// The event id or dead letter id.
    pub id: String,
    /// The job, for an event.
    pub job_id: Option<String>,
    /// The raw body, exactly as signed.
    pub body: Bytes,
    /// `X-Sume-Event-Id` as received, for a dead letter.
    pub header_event_id: Option<String>,
    /// The signature's timestamp.
    pub signed_at: i64,
    /// The signature header as received.
    pub signature: String,
    /// What applying it did, when it was applied.
    pub applied: Option<String>,
    /// Whether it was set aside as not ours.
    pub set_aside: bool,
    /// Why it was set aside or is a dead letter.
    pub reason: Option<String>,
}

/// The ids of a batch's events that were new, each with whether its job's row existed when
/// they were stored (in the inserting statement's snapshot).
pub type Inserted = HashMap<String, bool>;

/// `events_insert` for a batch sorted by id, each id once; answers the ids that were new.
pub(super) async fn insert<C: Session>(db: &C, events: &[&NewEvent]) -> Result<Inserted, DbError> {
    let ids: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    let jobs: Vec<&str> = events.iter().map(|e| e.job_id.as_str()).collect();
    let types: Vec<Option<&str>> = events.iter().map(|e| e.event_type.as_deref()).collect();
    let statuses: Vec<Option<&str>> = events.iter().map(|e| e.status.as_deref()).collect();
    let results: Vec<Option<&str>> = events.iter().map(|e| e.result.as_deref()).collect();
    let bodies: Vec<&[u8]> = events.iter().map(|e| e.body.as_ref()).collect();
    let signed: Vec<i64> = events.iter().map(|e| e.signed_at).collect();
    let sigs: Vec<&str> = events.iter().map(|e| e.signature.as_str()).collect();
    let hints: Vec<Option<&str>> = events
        .iter()
        .map(|e| e.header_event_id.as_deref())
        .collect();
    let rows = sql::EVENTS_INSERT
        .query(
            db,
            &[
                &ids, &jobs, &types, &statuses, &results, &bodies, &signed, &sigs, &hints,
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, bool>(1)))
        .collect())
}

fn delivery(r: &tokio_postgres::Row) -> StoredDelivery {
    let body: Vec<u8> = r.get("body");
    StoredDelivery {
        id: r.get("event_id"),
        job_id: Some(r.get("job_id")),
        body: Bytes::from(body),
        header_event_id: None,
        signed_at: r.get("signed_at"),
        signature: r.get("signature"),
        applied: r.get("outcome"),
        set_aside: r.get::<_, Option<DateTime<Utc>>>("set_aside_at").is_some(),
        reason: r.get("set_aside_reason"),
    }
}

/// A waiting event as the inbox listings read it (`events_waiting_list`, `_page`).
pub(super) fn waiting_event(r: &tokio_postgres::Row) -> WaitingEvent {
    WaitingEvent {
        event_id: r.get("event_id"),
        job_id: r.get("job_id"),
        event_type: r.get("event_type"),
        status: r.get("status"),
        received_at: r.get("received_at"),
        age_secs: r.get("age_secs"),
        job_exists: r.get("job_exists"),
        verdict: r.get("verdict"),
    }
}

/// What one catch-up scan found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attachable {
    /// Jobs with a row and waiting events, each once, oldest event first.
    pub job_ids: Vec<String>,
    /// The scan stopped at its limit: there may be more.
    pub more: bool,
}

/// A step of [`Store::events_orphan_unmark_askable`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AskAgainStep {
    /// Marked events that lost their mark (no orphan verdict on their job id).
    pub unmarked: u64,
    /// Waiting events walked, marked or not.
    pub walked: u64,
    /// The last event walked, `(received_at, event_id)`: where the next step starts.
    pub last: Option<(DateTime<Utc>, String)>,
}

impl Store {
    /// Sets aside the events that arrived after their job id was judged foreign and waited
    /// longer than `grace_secs`; answers how many.
    pub async fn events_set_aside_late_foreign(
        &self,
        grace_secs: f64,
        clock: &Clock,
    ) -> Result<u64, DbError> {
        let client = self.client().await?;
        let now = clock.now();
        sql::EVENTS_SET_ASIDE_LATE_FOREIGN
            .execute(&client, &[&grace_secs, &now])
            .await
    }

    /// Marks up to `limit` events that waited longer than `grace_secs` (by `clock`) with no job
    /// row and that nobody will ask about: their job id is an orphan, or `no_keys` (no key here
    /// nor on any live instance, [`Store::instances_keyed_live`]). Answers how many.
    pub async fn events_orphan_late(
        &self,
        grace_secs: f64,
        no_keys: bool,
        limit: i64,
        clock: &Clock,
    ) -> Result<u64, DbError> {
        let client = self.client().await?;
        let now = clock.now();
        sql::EVENTS_ORPHAN_LATE
            .execute(&client, &[&grace_secs, &no_keys, &limit, &now])
            .await
    }

    /// Walks up to `limit` waiting events after `after` (from the first when `None`) and
    /// clears the marks of those marked with no orphan verdict on their job id: events marked
    /// while no key could ask, asked about again by an instance with keys.
    pub async fn events_orphan_unmark_askable(
        &self,
        after: Option<&(DateTime<Utc>, String)>,
        limit: i64,
    ) -> Result<AskAgainStep, DbError> {
        let client = self.client().await?;
        let (at, id) = (after.map(|a| a.0), after.map(|a| a.1.as_str()));
        let row = sql::EVENTS_ORPHAN_UNMARK_ASKABLE
            .query_one(&client, &[&at, &id, &limit])
            .await?;
        let last_at: Option<DateTime<Utc>> = row.get("last_received_at");
        let last_id: Option<String> = row.get("last_event_id");
        Ok(AskAgainStep {
            unmarked: row.get::<_, i64>("unmarked") as u64,
            walked: row.get::<_, i64>("walked") as u64,
            last: last_at.zip(last_id),
        })
    }

    /// The catch-up scan: jobs that have a row and waiting events, from up to `limit` events,
    /// oldest first.
    pub async fn events_attachable_scan(&self, limit: i64) -> Result<Attachable, DbError> {
        let client = self.client().await?;
        let rows = sql::EVENTS_ATTACHABLE_SCAN
            .query(&client, &[&limit])
            .await?;
        let mut seen = HashSet::new();
        let job_ids = rows
            .iter()
            .map(|r| r.get::<_, String>(0))
            .filter(|id| seen.insert(id.clone()))
            .collect();
        Ok(Attachable {
            job_ids,
            more: rows.len() as i64 >= limit,
        })
    }

    /// Events waiting at least `older_than_secs`, oldest first.
    pub async fn events_waiting_list(
        &self,
        older_than_secs: f64,
        limit: i64,
    ) -> Result<Vec<WaitingEvent>, DbError> {
        let client = self.client().await?;
        let rows = sql::EVENTS_WAITING_LIST
            .query(&client, &[&older_than_secs, &limit])
            .await?;
        Ok(rows.iter().map(waiting_event).collect())
    }

    /// The event stored under `event_id`.
    pub async fn events_get(&self, event_id: &str) -> Result<Option<StoredDelivery>, DbError> {
        let client = self.client().await?;
        let row = sql::EVENTS_GET.query_opt(&client, &[&event_id]).await?;
        Ok(row.as_ref().map(delivery))
    }

    /// Puts a set-aside event back in the inbox and forgets its job's foreign verdict, in one
    /// transaction; answers whether the event was set aside.
    pub async fn unset_aside(&self, event_id: &str, job_id: &str) -> Result<bool, DbError> {
        let mut client = self.client().await?;
        let tx = super::begin(&mut client, "unset_aside").await?;
        let n = sql::EVENTS_UNSET_ASIDE.execute(&tx, &[&event_id]).await?;
        sql::INBOX_CHECKS_FORGET.execute(&tx, &[&job_id]).await?;
        super::commit(tx, "unset_aside").await?;
        Ok(n == 1)
    }
}
