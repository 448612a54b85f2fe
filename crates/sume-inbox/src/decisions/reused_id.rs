//! An event id met again: a redelivery, or another event under an id already stored.
//!
//! Sume's event id is "stable per job and terminal event type", so a delivery whose key is
//! stored already is a redelivery when it names the same job and, as this service reads
//! statuses ([`Status::parse`]: `succeeded` is `completed`, `running` and `processing` are both
//! in flight), the same status. One naming another job, or another status of the same job, is
//! another event under that id (a fault on Sume's side): answered "duplicate" it would be
//! dropped without a trace, so it is kept as a dead letter whose reason says what the id
//! holds, and never applied. The same holds inside one batch: the first delivery of an id is
//! the one stored, and each later one is held to it.

use std::collections::HashMap;

use sume_wire::job::MAX_STATUS_CHARS;
use sume_wire::{body_key, Status};

use crate::db::{Inserted, NewDeadLetter, NewEvent};

/// What an event id holds in the inbox: the job and status of the row stored under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// The job of the stored row.
    pub job_id: String,
    /// The status of the stored row, as it came.
    pub status: Option<String>,
}

impl StoredKey {
    /// What `event` would hold once stored.
    pub fn of(event: &NewEvent) -> StoredKey {
        StoredKey {
            job_id: event.job_id.clone(),
            status: event.status.clone(),
        }
    }

    /// Whether `event` repeats what the id holds: the same job, and the same status as this
    /// service reads it (none, in flight, or one terminal state).
    pub fn repeated_by(&self, event: &NewEvent) -> bool {
        let read = |status: Option<&str>| status.map(Status::parse);
        self.job_id == event.job_id && read(self.status.as_deref()) == read(event.status.as_deref())
    }
}

/// What became of one event of an ingest batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventFate {
    /// Stored now, with whether its job's row existed when it was.
    New {
        /// The job's row existed in the inserting statement's snapshot.
        job_known: bool,
    },
    /// A redelivery: its id holds the same job and status, or it names by its header, for its
    /// job, a row stored before the key came from the body (0004_signed_keys).
    Duplicate,
    /// Its id holds another job, or another status of its job: kept as the dead letter
    /// `dead_letter_id` ([`reused_letter`]), not applied.
    Reused {
        /// What the id holds.
        stored: StoredKey,
        /// The dead letter that keeps the delivery.
        dead_letter_id: String,
    },
}

/// The fate of each of `events` (in their order, ids repeating or not) once the first of each
/// id was offered to the inbox: `inserted` answers the ids written now, `found` what the ids
/// not written hold (nothing for a legacy row's redelivery). Answers with them the dead letters
/// to keep, one per reused body.
pub fn settle(
    events: &[NewEvent],
    inserted: &Inserted,
    found: &HashMap<String, StoredKey>,
) -> (Vec<EventFate>, Vec<NewDeadLetter>) {
    let mut stored_now: HashMap<&str, StoredKey> = HashMap::new();
    let mut letters: Vec<NewDeadLetter> = Vec::new();
    let fates = events
        .iter()
        .map(|e| {
            let id = e.event_id.as_str();
            if let Some(&job_known) = inserted.get(id) {
                if !stored_now.contains_key(id) {
                    stored_now.insert(id, StoredKey::of(e));
                    return EventFate::New { job_known };
                }
            }
            match stored_now.get(id).or_else(|| found.get(id)) {
                Some(stored) if !stored.repeated_by(e) => {
                    let letter = reused_letter(e, stored);
                    let dead_letter_id = letter.dead_letter_id.clone();
                    if !letters.iter().any(|l| l.dead_letter_id == dead_letter_id) {
                        letters.push(letter);
                    }
                    EventFate::Reused {
                        stored: stored.clone(),
                        dead_letter_id,
                    }
                }
                _ => EventFate::Duplicate,
            }
        })
        .collect();
    (fates, letters)
}

/// The dead letter that keeps `event`, whose id holds `stored`: keyed by the body's hash (a
/// redelivery of it is kept once, and the id's own event is never touched), the body and
/// signature as received, so a replay verifies it again; the reason names what the id holds.
pub fn reused_letter(event: &NewEvent, stored: &StoredKey) -> NewDeadLetter {
    let shown = |status: Option<&str>| match status {
        Some(s) => format!(
            "status {}",
            s.chars().take(MAX_STATUS_CHARS).collect::<String>()
        ),
        None => "no status".to_owned(),
    };
    let this = if stored.job_id == event.job_id {
        format!("for the same job, with {}", shown(event.status.as_deref()))
    } else {
        format!(
            "for job {}, with {}",
            event.job_id,
            shown(event.status.as_deref())
        )
    };
    NewDeadLetter {
        dead_letter_id: body_key(&event.body),
        reason: format!(
            "its event id is already stored for job {}, with {}; this delivery is {this}: \
             another event under the same id, not applied",
            stored.job_id,
            shown(stored.status.as_deref()),
        ),
        body: event.body.clone(),
        header_event_id: event.header_event_id.clone(),
        signed_at: event.signed_at,
        signature: event.signature.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, job: &str, status: &str) -> NewEvent {
        NewEvent {
            event_id: id.into(),
            header_event_id: None,
            job_id: job.into(),
            event_type: Some(format!("job.{status}")),
            status: Some(status.into()),
            result: None,
            body: bytes::Bytes::from(format!("{id} {job} {status}")),
            signed_at: 1,
            signature: "v1=00".into(),
        }
    }

    fn stored(job: &str, status: &str) -> StoredKey {
        StoredKey {
            job_id: job.into(),
            status: Some(status.into()),
        }
    }

    #[test]
    fn the_same_job_and_status_as_this_service_reads_it_is_a_redelivery() {
        let held = stored("job_a", "completed");
        assert!(held.repeated_by(&event("e", "job_a", "completed")));
        assert!(held.repeated_by(&event("e", "job_a", "Succeeded ")));
        assert!(stored("job_a", "running").repeated_by(&event("e", "job_a", "processing")));
        assert!(!held.repeated_by(&event("e", "job_b", "completed")));
        assert!(!held.repeated_by(&event("e", "job_a", "failed")));
        assert!(!held.repeated_by(&event("e", "job_a", "running")));
        let mut none = event("e", "job_a", "completed");
        none.status = None;
        assert!(!held.repeated_by(&none));
    }

    #[test]
    fn another_jobs_event_under_a_stored_id_is_kept_as_a_dead_letter_naming_what_it_holds() {
        let events = [event("evt_c", "job_colB", "completed")];
        let found = HashMap::from([("evt_c".to_owned(), stored("job_colA", "completed"))]);
        let (fates, letters) = settle(&events, &Inserted::new(), &found);
        let key = body_key(&events[0].body);
        assert_eq!(
            fates,
            [EventFate::Reused {
                stored: stored("job_colA", "completed"),
                dead_letter_id: key.clone(),
            }]
        );
        assert_eq!(letters.len(), 1);
        assert_eq!(letters[0].dead_letter_id, key);
        assert_eq!(
            letters[0].reason,
            "its event id is already stored for job job_colA, with status completed; this \
             delivery is for job job_colB, with status completed: another event under the same \
             id, not applied"
        );
    }

    #[test]
    fn inside_a_batch_the_first_of_an_id_is_stored_and_the_others_are_held_to_it() {
        let events = [
            event("evt_x", "job_1", "completed"),
            event("evt_x", "job_1", "failed"),
            event("evt_x", "job_1", "completed"),
            event("evt_x", "job_1", "failed"),
            event("evt_y", "job_2", "completed"),
        ];
        let inserted = Inserted::from([("evt_x".to_owned(), true)]);
        let found = HashMap::from([("evt_y".to_owned(), stored("job_2", "succeeded"))]);
        let (fates, letters) = settle(&events, &inserted, &found);
        let reused = EventFate::Reused {
            stored: stored("job_1", "completed"),
            dead_letter_id: body_key(&events[1].body),
        };
        assert_eq!(
            fates,
            [
                EventFate::New { job_known: true },
                reused.clone(),
                EventFate::Duplicate,
                reused,
                EventFate::Duplicate,
            ]
        );
        assert_eq!(letters.len(), 1, "one letter per body");
        assert!(letters[0]
            .reason
            .contains("this delivery is for the same job, with status failed"));
    }

    #[test]
    fn an_id_that_holds_nothing_is_a_legacy_rows_redelivery() {
        let events = [event("evt_z", "job_1", "completed")];
        let (fates, letters) = settle(&events, &Inserted::new(), &HashMap::new());
        assert_eq!(fates, [EventFate::Duplicate]);
        assert!(letters.is_empty());
    }
}
