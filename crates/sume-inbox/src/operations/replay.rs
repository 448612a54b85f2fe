//! Replay, for the operator's commands, the admin API and the console: a stored delivery is
//! verified again with the current secrets and read as the webhook handler would, then goes
//! where the normal path would have put it (an event back into the inbox, a dead letter's event
//! into it, an attach). Only what the normal path would write, and all of it idempotent.

use serde::Serialize;
use sume_wire::Secret;

use crate::db::{DbError, NewEvent, Store, StoredDelivery};
use crate::decisions::delivery::{verify_delivery, Delivery, Received};
use crate::decisions::reused_id::{EventFate, StoredKey};

/// What replay did with one delivery.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Replayed {
    /// The event id or dead letter id.
    pub id: String,
    /// The job it was for, when known.
    pub job_id: Option<String>,
    /// What happened, for a person.
    pub result: String,
    /// Whether the delivery is now where the normal path would have put it.
    pub ok: bool,
    /// The current secrets do not verify it (rotated away?): left as it is.
    #[serde(skip)]
    pub not_verified: bool,
}

/// Replay's answer for a stored delivery the current secrets do not verify.
pub const NOT_VERIFIED: &str =
    "does not verify with the current SUME_WEBHOOK_SECRET; left as it is";

/// Verifies a stored delivery again with the current secrets and reads it, as the webhook
/// handler did. Freshness is not checked: the delivery was fresh when it arrived, and replay
/// is meant for later.
fn reverify(d: &StoredDelivery, secrets: &[Secret]) -> Option<Delivery> {
    let timestamp = d.signed_at.to_string();
    let received = Received {
        timestamp: Some(&timestamp),
        signature: Some(&d.signature),
        event_id: d.header_event_id.as_deref(),
    };
    verify_delivery(received, d.body.clone(), secrets, d.signed_at, 0)
        .ok()
        .map(|v| v.delivery)
}

/// What [`replay_event_audited`] could not do.
#[derive(Debug)]
pub enum Unrecorded {
    /// The replay itself failed: nothing recorded.
    Replay(DbError),
    /// The replay was made, its audit entry not written.
    Audit(DbError),
}

/// [`replay_event`], then its `replay_event` entry in the audit log under `actor`, whether the
/// event was found or not (`"ok": false` for an unknown one, as `sume-inbox replay` records
/// it): the one way of the admin API's `POST /v1/events/{id}/replay` and the console's form.
pub async fn replay_event_audited(
    store: &Store,
    secrets: &[Secret],
    event_id: &str,
    actor: &str,
    request_id: Option<&str>,
) -> Result<Replayed, Unrecorded> {
    let replayed = replay_event(store, secrets, event_id)
        .await
        .map_err(Unrecorded::Replay)?;
    let detail = serde_json::json!({ "event_id": event_id, "result": replayed });
    store
        .audit_log_insert(actor, "replay_event", &detail, request_id)
        .await
        .map_err(Unrecorded::Audit)?;
    Ok(replayed)
}

/// `replay EVENT_ID`: an event set aside goes back into the inbox; a waiting one is attached.
pub async fn replay_event(
    store: &Store,
    secrets: &[Secret],
    event_id: &str,
) -> Result<Replayed, DbError> {
    store.audit_log_ensure_writable().await?;
    let Some(d) = store.events_get(event_id).await? else {
        return Ok(Replayed {
            id: event_id.to_owned(),
            job_id: None,
            result: "no such event (dead letters are replayed with --dead-letters)".into(),
            ok: false,
            not_verified: false,
        });
    };
    let job_id = d.job_id.clone().unwrap_or_default();
    let done = |result: String, ok: bool| Replayed {
        id: d.id.clone(),
        job_id: Some(job_id.clone()),
        result,
        ok,
        not_verified: false,
    };
    if reverify(&d, secrets).is_none() {
        return Ok(Replayed {
            not_verified: true,
            ..done(NOT_VERIFIED.into(), false)
        });
    }
    if let Some(outcome) = &d.applied {
        return Ok(done(
            format!("already applied ({outcome}); nothing to do"),
            true,
        ));
    }
    if d.set_aside {
        store.unset_aside(&d.id, &job_id).await?;
    }
    let report = store.attach_jobs(std::slice::from_ref(&job_id)).await?;
    Ok(done(
        if applied_now(store, &d.id, report.events_applied).await? {
            format!("applied to job {job_id}")
        } else {
            format!("back in the inbox, waiting for job {job_id}'s row")
        },
        true,
    ))
}

/// The most dead letters one `replay --dead-letters` run takes (and the admin API's `limit`).
pub const REPLAY_LIMIT_MAX: i64 = 10_000;

/// The most dead letters one run reads, replayed or not: letters that still cannot be replayed
/// are passed over, and the run ends here however few were replayed.
pub const REPLAY_READ_MAX: usize = 20_000;

/// `replay --dead-letters`: each dead letter is verified and read again (a newer version may
/// understand it); one that now names a job goes into the inbox and is attached, unless its
/// event id is still stored for another job or status (reported, left a dead letter). `limit` counts
/// the letters replayed: the run reads on, page after page, past those that still name no job
/// or no longer verify (reported, left as they are), so that they never hold the others back.
pub async fn replay_dead_letters(
    store: &Store,
    secrets: &[Secret],
    limit: i64,
) -> Result<Vec<Replayed>, DbError> {
    store.audit_log_ensure_writable().await?;
    let mut out = Vec::new();
    let (mut replayed, mut after) = (0, None);
    while replayed < limit && out.len() < REPLAY_READ_MAX {
        let (page, last) = store.dead_letters_pending(after.as_ref(), 500).await?;
        for d in page {
            if replayed == limit || out.len() == REPLAY_READ_MAX {
                return Ok(out);
            }
            let one = replay_letter(store, secrets, d).await?;
            replayed += i64::from(one.ok);
            out.push(one);
        }
        match last {
            Some(last) => after = Some(last),
            None => break,
        }
    }
    Ok(out)
}

/// One dead letter, verified and read again, stored and attached when it now names a job.
async fn replay_letter(
    store: &Store,
    secrets: &[Secret],
    d: StoredDelivery,
) -> Result<Replayed, DbError> {
    let event = match reverify(&d, secrets) {
        Some(Delivery::Event(event)) => event,
        Some(Delivery::DeadLetter(letter)) => {
            return Ok(Replayed {
                id: d.id,
                job_id: None,
                result: format!("still names no job: {}", letter.reason),
                ok: false,
                not_verified: false,
            })
        }
        None => {
            return Ok(Replayed {
                id: d.id,
                job_id: None,
                result: NOT_VERIFIED.into(),
                ok: false,
                not_verified: true,
            })
        }
    };
    let job_id = event.job_id.clone();
    let written = store
        .write_inbox_batch(std::slice::from_ref(&event), &[])
        .await?;
    if let Some(EventFate::Reused {
        stored,
        dead_letter_id,
    }) = written.first()
    {
        return reused(store, d, &event, stored, dead_letter_id).await;
    }
    store.dead_letters_mark_replayed(&d.id).await?;
    let report = store.attach_jobs(std::slice::from_ref(&job_id)).await?;
    let fate = if !matches!(written.first(), Some(EventFate::New { .. })) {
        "its event was already in the inbox"
    } else if applied_now(store, &event.event_id, report.events_applied).await? {
        "stored and applied"
    } else {
        "stored; waiting for its job row"
    };
    Ok(Replayed {
        id: d.id,
        job_id: Some(job_id.clone()),
        result: format!("{fate} (job {job_id})"),
        ok: true,
        not_verified: false,
    })
}

/// Whether the event under `event_id` is applied, after an attach of its job that applied
/// `applied_here` events: by that attach, or by an instance's attach task that the event's
/// return to the inbox woke first (which leaves this one nothing to apply).
async fn applied_now(store: &Store, event_id: &str, applied_here: usize) -> Result<bool, DbError> {
    if applied_here > 0 {
        return Ok(true);
    }
    let stored = store.events_get(event_id).await?;
    Ok(stored.is_some_and(|e| e.applied.is_some()))
}

/// A dead letter whose event id is still stored for another job or status: nothing applied, and
/// the delivery stays a dead letter. Kept under the body's hash, as ingest keeps such a
/// delivery: when that is another letter than this one (kept first for another reason), this
/// one is marked replayed, the other holding it now.
async fn reused(
    store: &Store,
    d: StoredDelivery,
    event: &NewEvent,
    stored: &StoredKey,
    kept_as: &str,
) -> Result<Replayed, DbError> {
    let moved = kept_as != d.id;
    if moved {
        store.dead_letters_mark_replayed(&d.id).await?;
    }
    let status = stored.status.as_deref().unwrap_or("no status");
    let held = format!(
        "its event id {} is still stored for job {} ({status}), so it is another event \
         under that id: not applied",
        event.event_id, stored.job_id
    );
    Ok(Replayed {
        id: d.id,
        job_id: Some(event.job_id.clone()),
        result: if moved {
            format!("{held}; kept as dead letter {kept_as}")
        } else {
            format!("{held}; left as a dead letter")
        },
        ok: false,
        not_verified: false,
    })
}
