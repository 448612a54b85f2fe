//! The admin commands: `jobs show`, `inbox ls`, `dead-letters ls`, `replay`, `stats`.
//!
//! The commands read from the database directly (no daemon needs to run) or, with
//! `--admin-url`, from the admin API (`cli/source.rs`); this module renders what they read, for
//! a terminal by default and JSON with `--json`, and holds replay, which the admin API runs
//! too. Only `replay` writes, and only what the normal path would: an event back into the
//! inbox, a dead letter's event into it, an attach; all idempotent.

use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;
use sume_wire::Secret;

use crate::db::{DbError, Store};
use crate::db::{DeadLetterRow, JobDetail, Stats, StoredDelivery, WaitingEvent};
use crate::delivery::{verify_delivery, Delivery, Received};

/// Renders `value` as JSON, or as text with `text`.
fn render<T: Serialize>(value: &T, json: bool, text: impl FnOnce(&T) -> String) -> String {
    if json {
        serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    } else {
        text(value)
    }
}

fn ago(secs: f64) -> String {
    humantime::format_duration(Duration::from_secs(secs.max(0.0) as u64)).to_string()
}

/// `jobs show ID`. Answers the output and whether anything is known about the id.
pub fn render_job_detail(d: &JobDetail, json: bool) -> (String, bool) {
    let known = d.job.is_some() || !d.events.is_empty();
    let out = render(d, json, |d| {
        let mut s = job_text(d);
        history_text(&mut s, d);
        s
    });
    (out, known)
}

/// The job row of `jobs show`, or why there is none.
fn job_text(d: &JobDetail) -> String {
    let mut s = String::new();
    let Some(j) = &d.job else {
        if d.events.is_empty() {
            let _ = writeln!(s, "no job and no event for {}", d.job_id);
        } else {
            let _ = writeln!(s, "job {}: no row (its events wait in the inbox)", d.job_id);
        }
        return s;
    };
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let _ = writeln!(
        s,
        "job {}  state {}  sume_status {}",
        j.job_id,
        j.state,
        dash(&j.sume_status)
    );
    let _ = writeln!(s, "  order {}  key {}", dash(&j.order_id), dash(&j.api_key));
    let _ = writeln!(s, "  registered {}", j.created_at.to_rfc3339());
    match (&j.closed_by, j.closed_at) {
        (Some(by), Some(at)) => {
            let _ = writeln!(s, "  closed by {by} at {}", at.to_rfc3339());
        }
        _ => {
            let _ = writeln!(s, "  open");
        }
    }
    if let Some(reason) = &j.close_reason {
        let _ = writeln!(s, "  reason {reason}");
    }
    if let Some(g) = &j.superseded_give_up {
        let _ = writeln!(s, "  superseded a give-up: {g}");
    }
    if let Some(r) = &j.result {
        let _ = writeln!(s, "  result {r}");
    }
    s
}

/// The events, disagreements and inbox check of `jobs show`.
fn history_text(s: &mut String, d: &JobDetail) {
    if !d.events.is_empty() {
        let _ = writeln!(s, "events:");
    }
    for e in &d.events {
        let fate = match (&e.outcome, &e.set_aside_reason) {
            (Some(o), _) => format!("applied: {o}"),
            (None, Some(r)) => format!("set aside: {r}"),
            (None, None) => "waiting".to_owned(),
        };
        let _ = writeln!(
            s,
            "  {}  {}  {}  received {}  {fate}",
            e.event_id,
            e.event_type.as_deref().unwrap_or("-"),
            e.status.as_deref().unwrap_or("-"),
            e.received_at.to_rfc3339()
        );
    }
    for x in &d.disagreements {
        let _ = writeln!(
            s,
            "disagreement: kept {}, {} saw {} ({}) at {}",
            x.kept_state,
            x.source,
            x.seen_state,
            x.seen_status,
            x.recorded_at.to_rfc3339()
        );
    }
    if let Some(c) = &d.inbox_check {
        let _ = writeln!(
            s,
            "inbox check: {} after {} attempt(s), answers {}",
            c.verdict, c.attempts, c.answers
        );
    }
    if !d.polls.is_empty() {
        let _ = writeln!(s, "polls (latest {}):", d.polls.len());
    }
    for p in &d.polls {
        let _ = writeln!(
            s,
            "  #{} {}  key {}  {}  {} ms",
            p.seq,
            p.polled_at.to_rfc3339(),
            p.key_name,
            p.answer,
            p.latency_ms
        );
    }
}

/// `inbox ls [--older-than D]`.
pub fn render_inbox(rows: &[WaitingEvent], json: bool) -> String {
    render(&rows, json, |rows| {
        if rows.is_empty() {
            return "the inbox holds no waiting event of that age\n".to_owned();
        }
        let mut s = format!(
            "{:<40} {:<32} {:<10} {:>10}  {}\n",
            "EVENT", "JOB", "STATUS", "AGE", "WAITING FOR"
        );
        for r in rows.iter() {
            let why = match (r.job_exists, r.verdict.as_deref()) {
                (true, _) => "attach (row exists)".to_owned(),
                (false, Some("orphan")) => "its row: ORPHAN (Sume knows the job)".to_owned(),
                (false, Some(v)) => format!("its row (check: {v})"),
                (false, None) => "its row".to_owned(),
            };
            let _ = writeln!(
                s,
                "{:<40} {:<32} {:<10} {:>10}  {why}",
                r.event_id,
                r.job_id,
                r.status.as_deref().unwrap_or("-"),
                ago(r.age_secs)
            );
        }
        s
    })
}

/// `dead-letters ls`.
pub fn render_dead_letters(rows: &[DeadLetterRow], json: bool) -> String {
    render(&rows, json, |rows| {
        if rows.is_empty() {
            return "no dead letters\n".to_owned();
        }
        let mut s = format!(
            "{:<72} {:>7}  {:<25} {}\n",
            "ID", "BYTES", "RECEIVED", "REASON"
        );
        for r in rows.iter() {
            let replayed = r
                .replayed_at
                .map(|t| format!(" (replayed {})", t.to_rfc3339()))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{:<72} {:>7}  {:<25} {}{replayed}",
                r.dead_letter_id,
                r.bytes,
                r.received_at.to_rfc3339(),
                r.reason
            );
        }
        s
    })
}

/// `stats`.
pub fn render_stats(st: &Stats, json: bool) -> String {
    render(st, json, |st| {
        format!(
            "open jobs ............ {}\n\
             inbox waiting ........ {} (oldest {})\n\
             set aside (foreign) .. {}\n\
             orphans .............. {}\n\
             checks pending ....... {}\n\
             dead letters ......... {}\n\
             disagreements ........ {}\n\
             schema version ....... {} (this binary: {})\n",
            st.open_jobs,
            st.waiting,
            ago(st.oldest_waiting_secs),
            st.set_aside,
            st.orphans,
            st.checks_pending,
            st.dead_letters,
            st.disagreements,
            st.schema_version,
            crate::db::migrate::latest()
        )
    })
}

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

/// `replay EVENT_ID`: an event set aside goes back into the inbox; a waiting one is attached.
pub async fn replay_event(
    store: &Store,
    secrets: &[Secret],
    event_id: &str,
) -> Result<Replayed, DbError> {
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
        if report.events_applied > 0 {
            format!("applied to job {job_id}")
        } else {
            format!("back in the inbox, waiting for job {job_id}'s row")
        },
        true,
    ))
}

/// `replay --dead-letters`: each dead letter is verified and read again (a newer version may
/// understand it); one that now names a job goes into the inbox and is attached.
pub async fn replay_dead_letters(
    store: &Store,
    secrets: &[Secret],
    limit: i64,
) -> Result<Vec<Replayed>, DbError> {
    let mut out = Vec::new();
    for d in store.dead_letters_pending(limit).await? {
        let event = match reverify(&d, secrets) {
            Some(Delivery::Event(event)) => event,
            Some(Delivery::DeadLetter(letter)) => {
                out.push(Replayed {
                    id: d.id,
                    job_id: None,
                    result: format!("still names no job: {}", letter.reason),
                    ok: false,
                    not_verified: false,
                });
                continue;
            }
            None => {
                out.push(Replayed {
                    id: d.id,
                    job_id: None,
                    result: NOT_VERIFIED.into(),
                    ok: false,
                    not_verified: true,
                });
                continue;
            }
        };
        let job_id = event.job_id.clone();
        let mut event = [event];
        let new = store.write_inbox_batch(&mut event, &mut []).await?;
        store.dead_letters_mark_replayed(&d.id).await?;
        let report = store.attach_jobs(std::slice::from_ref(&job_id)).await?;
        let fate = match (new.is_empty(), report.events_applied > 0) {
            (true, _) => "its event was already in the inbox",
            (false, true) => "stored and applied",
            (false, false) => "stored; waiting for its job row",
        };
        out.push(Replayed {
            id: d.id,
            job_id: Some(job_id.clone()),
            result: format!("{fate} (job {job_id})"),
            ok: true,
            not_verified: false,
        });
    }
    Ok(out)
}

/// What `dead-letters drop` did, for a terminal or as JSON.
pub fn render_dropped(dropped: &[String], missing: &[&String], json: bool) -> String {
    let value = serde_json::json!({ "dropped": dropped, "not_found": missing });
    render(&value, json, |_| {
        let mut s = String::new();
        for id in dropped {
            let _ = writeln!(s, "{id}: dropped");
        }
        for id in missing {
            let _ = writeln!(s, "{id}: no such dead letter");
        }
        s
    })
}

/// What replay did, for a terminal or as JSON.
pub fn render_replayed(items: &[Replayed], json: bool) -> String {
    render(&items, json, |items| {
        if items.is_empty() {
            return "nothing to replay\n".to_owned();
        }
        items
            .iter()
            .map(|r| format!("{}: {}\n", r.id, r.result))
            .collect()
    })
}

/// `audit ls`: what operators did, newest first.
pub fn render_audit(entries: &[crate::db::AuditEntry], json: bool) -> String {
    render(&entries, json, |entries| {
        if entries.is_empty() {
            return "no operator action recorded\n".to_owned();
        }
        entries
            .iter()
            .map(|e| {
                format!(
                    "{}  {:<22} {:<36} {}\n",
                    e.at.to_rfc3339(),
                    e.action,
                    e.actor,
                    e.detail
                )
            })
            .collect()
    })
}
