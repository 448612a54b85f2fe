//! One ingest batch written to the inbox (`events_insert`, `events_stored`,
//! `dead_letters_insert`), and what became of each of its events: new, a redelivery, or
//! another event under an id already stored, kept as a dead letter
//! ([`crate::decisions::reused_id`]).

use std::collections::HashMap;

use super::dead_letters::{self, NewDeadLetter};
use super::events::{self, Inserted, NewEvent};
use super::{sql, DbError, Session, Store};
use crate::decisions::reused_id::{self, EventFate, StoredKey};

/// `events_stored`: what the ids a batch did not write hold.
async fn stored<C: Session>(db: &C, ids: &[&str]) -> Result<HashMap<String, StoredKey>, DbError> {
    let rows = sql::EVENTS_STORED.query(db, &[&ids]).await?;
    Ok(rows
        .iter()
        .map(|r| {
            let key = StoredKey {
                job_id: r.get("job_id"),
                status: r.get("status"),
            };
            (r.get("event_id"), key)
        })
        .collect())
}

/// Writes the first event of each id (the batch's events sorted by id: two batches sharing ids
/// never wait on each other in opposite orders) and settles every event: when some id was not
/// new, one more statement reads what those ids hold. Answers each event's fate, in the order
/// of `events`, and the dead letters that keep the events reusing a stored id.
async fn write_events<C: Session>(
    db: &C,
    events: &[NewEvent],
) -> Result<(Vec<EventFate>, Vec<NewDeadLetter>), DbError> {
    let mut sorted: Vec<&NewEvent> = events.iter().collect();
    // Stable: the first delivery of an id, in the batch's order, is the one offered.
    sorted.sort_by(|a, b| a.event_id.cmp(&b.event_id));
    sorted.dedup_by(|later, first| later.event_id == first.event_id);
    let inserted: Inserted = events::insert(db, &sorted).await?;
    let not_new: Vec<&str> = sorted
        .iter()
        .map(|e| e.event_id.as_str())
        .filter(|id| !inserted.contains_key(*id))
        .collect();
    if not_new.is_empty() && sorted.len() == events.len() {
        let fates = events
            .iter()
            .map(|e| EventFate::New {
                job_known: inserted[&e.event_id],
            })
            .collect();
        return Ok((fates, Vec::new()));
    }
    let found = if not_new.is_empty() {
        HashMap::new()
    } else {
        stored(db, &not_new).await?
    };
    Ok(reused_id::settle(events, &inserted, &found))
}

/// Dead letters in id order, each id once, as `dead_letters_insert` takes them.
fn in_id_order(mut letters: Vec<NewDeadLetter>) -> Vec<NewDeadLetter> {
    letters.sort_by(|a, b| a.dead_letter_id.cmp(&b.dead_letter_id));
    letters.dedup_by(|later, first| later.dead_letter_id == first.dead_letter_id);
    letters
}

impl Store {
    /// Stores one batch of deliveries and answers the fate of each event, in the order given:
    /// new (with whether its job's row existed), a redelivery, or another event under an id
    /// already stored (another job, or another status of its job), kept as a dead letter
    /// before this returns. Ids may repeat: the first of each is the one offered, and each
    /// later one is held to it. Rows are written sorted by id.
    ///
    /// A batch of events whose ids are all new (the usual case) is one statement in autocommit:
    /// its own transaction, committed before the server answers it, so one round trip instead
    /// of three (begin, insert, commit). An id not new costs one more statement (what the ids
    /// hold), and a reused one the insert of its dead letter, each committed before this
    /// returns: should this stop between them, no delivery of the batch has been answered, and
    /// a redelivery of the reused one is kept then. A batch with dead letters of its own takes
    /// an explicit transaction for all of it (dead letters alone, one statement). Either way
    /// this returns only once every commit is durable.
    pub async fn write_inbox_batch(
        &self,
        events: &[NewEvent],
        dead: &[NewDeadLetter],
    ) -> Result<Vec<EventFate>, DbError> {
        let mut client = self.client().await?;
        match (events.is_empty(), dead.is_empty()) {
            (true, true) => Ok(Vec::new()),
            (true, false) => {
                dead_letters::insert(&client, &in_id_order(dead.to_vec())).await?;
                Ok(Vec::new())
            }
            (false, true) => {
                let (fates, letters) = write_events(&client, events).await?;
                if !letters.is_empty() {
                    dead_letters::insert(&client, &in_id_order(letters)).await?;
                }
                Ok(fates)
            }
            (false, false) => {
                let tx = super::begin(&mut client, "write_inbox_batch").await?;
                let (fates, mut letters) = write_events(&tx, events).await?;
                letters.extend_from_slice(dead);
                dead_letters::insert(&tx, &in_id_order(letters)).await?;
                super::commit(tx, "write_inbox_batch").await?;
                Ok(fates)
            }
        }
    }
}
