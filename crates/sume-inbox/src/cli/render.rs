//! What the operator's commands print: `jobs show`, `inbox ls`, `dead-letters ls` and `drop`,
//! `replay`, `stats`, `audit ls`, for a terminal by default and as JSON with `--json` (the same
//! shapes the admin API answers). Rendering only: the commands read through `cli/source.rs`.

use std::borrow::Cow;
use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use crate::db::{DeadLetterRow, JobDetail, Stats, WaitingEvent};
use crate::operations::replay::Replayed;

/// Renders `value` as JSON, or as text with `text`.
fn render<T: Serialize>(value: &T, json: bool, text: impl FnOnce(&T) -> String) -> String {
    if json {
        serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    } else {
        text(value)
    }
}

/// A stored or typed string as a terminal may show it: every control character (C0, DEL, C1,
/// a newline too) and every format character (Unicode's `Cf`: the bidirectional overrides and
/// isolates, zero-width characters, a soft hyphen) escaped as `\u{1b}`, so that no row can move
/// the cursor, clear the screen, set a title, start a line of its own, or show its characters
/// reordered or hidden (a job id that reads as another). Every text renderer writes strings
/// through here; JSON keeps them exact.
pub fn shown(s: &str) -> Cow<'_, str> {
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                c if escaped(c) => format!("\\u{{{:x}}}", u32::from(c)),
                c => c.to_string(),
            })
            .collect(),
    )
}

/// What [`shown`] escapes: control and format characters.
fn escaped(c: char) -> bool {
    c.is_control() || c.general_category() == GeneralCategory::Format
}

/// An optional string [`shown`], `-` when there is none.
fn shown_or_dash(s: &Option<String>) -> Cow<'_, str> {
    s.as_deref().map_or(Cow::Borrowed("-"), shown)
}

/// A stored JSON value [`shown`] (its text escapes C0 but leaves DEL and C1 as they are).
fn shown_json(v: &serde_json::Value) -> String {
    shown(&v.to_string()).into_owned()
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
            let _ = writeln!(s, "no job and no event for {}", shown(&d.job_id));
        } else {
            let _ = writeln!(
                s,
                "job {}: no row (its events wait in the inbox)",
                shown(&d.job_id)
            );
        }
        return s;
    };
    let dash = shown_or_dash;
    let _ = writeln!(
        s,
        "job {}  state {}  sume_status {}",
        shown(&j.job_id),
        shown(&j.state),
        dash(&j.sume_status)
    );
    let _ = writeln!(s, "  order {}  key {}", dash(&j.order_id), dash(&j.api_key));
    let _ = writeln!(s, "  registered {}", j.created_at.to_rfc3339());
    match (&j.closed_by, j.closed_at) {
        (Some(by), Some(at)) => {
            let _ = writeln!(s, "  closed by {} at {}", shown(by), at.to_rfc3339());
        }
        _ => {
            let _ = writeln!(s, "  open");
        }
    }
    if let Some(reason) = &j.close_reason {
        let _ = writeln!(s, "  reason {}", shown(reason));
    }
    if let Some(g) = &j.superseded_give_up {
        let _ = writeln!(s, "  superseded a give-up: {}", shown_json(g));
    }
    if let Some(r) = &j.result {
        let _ = writeln!(s, "  result {}", shown(r.get()));
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
            (Some(o), _) => format!("applied: {}", shown(o)),
            (None, Some(r)) => format!("set aside: {}", shown(r)),
            (None, None) => "waiting".to_owned(),
        };
        let _ = writeln!(
            s,
            "  {}  {}  {}  received {}  {fate}",
            shown(&e.event_id),
            shown_or_dash(&e.event_type),
            shown_or_dash(&e.status),
            e.received_at.to_rfc3339()
        );
    }
    for x in &d.disagreements {
        let _ = writeln!(
            s,
            "disagreement: kept {}, {} saw {} ({}) at {}",
            shown(&x.kept_state),
            shown(&x.source),
            shown(&x.seen_state),
            shown(&x.seen_status),
            x.recorded_at.to_rfc3339()
        );
    }
    if let Some(c) = &d.inbox_check {
        let _ = writeln!(
            s,
            "inbox check: {} after {} attempt(s), answers {}",
            shown(&c.verdict),
            c.attempts,
            shown_json(&c.answers)
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
            shown(&p.key_name),
            shown(&p.answer),
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
                (false, Some(v)) => format!("its row (check: {})", shown(v)),
                (false, None) => "its row".to_owned(),
            };
            let _ = writeln!(
                s,
                "{:<40} {:<32} {:<10} {:>10}  {why}",
                shown(&r.event_id),
                shown(&r.job_id),
                shown_or_dash(&r.status),
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
                shown(&r.dead_letter_id),
                r.bytes,
                r.received_at.to_rfc3339(),
                shown(&r.reason)
            );
        }
        s
    })
}

/// `stats`.
pub fn render_stats(st: &Stats, json: bool) -> String {
    render(st, json, |st| {
        let oldest = match st.waiting {
            0 => String::new(),
            _ => format!(" (oldest {})", ago(st.oldest_waiting_secs)),
        };
        let mut reads = String::new();
        for r in &st.reads_today {
            let _ = writeln!(
                reads,
                "sume reads today .... {}: {}",
                shown(&r.key_name),
                reads_line(r)
            );
        }
        let mut notes = String::new();
        if st.sweep_has_no_keys() {
            let _ = writeln!(notes, "warning: {}", crate::db::NO_KEYS);
        }
        if st.open_jobs_unknown_key > 0 {
            let _ = writeln!(
                notes,
                "warning: {} open jobs name an api_key no running instance has: they are never polled",
                st.open_jobs_unknown_key
            );
        }
        format!(
            "open jobs ............ {}\n\
             inbox waiting ........ {}{}\n\
             set aside (foreign) .. {}\n\
             orphans .............. {}\n\
             checks pending ....... {}\n\
             dead letters ......... {}\n\
             disagreements ........ {}\n\
             schema version ....... {} (this binary: {})\n\
             instances running .... {} ({} with API keys)\n{}{}",
            st.open_jobs,
            st.waiting,
            oldest,
            st.set_aside,
            st.orphans,
            st.checks_pending,
            st.dead_letters,
            st.disagreements,
            st.schema_version,
            crate::db::migrate::latest(),
            st.instances_live,
            st.instances_with_keys,
            reads,
            notes
        )
    })
}

/// `1200 used, 7800 left of 9000; pace 4500 (50% of the UTC day), projected 2400`.
fn reads_line(r: &crate::db::KeyReadsToday) -> String {
    let left = match (r.left, r.limit) {
        (Some(left), Some(limit)) => format!("{left} left of {limit}"),
        _ => "allowance not recorded yet".to_owned(),
    };
    let pace = r.pace.map_or(String::new(), |p| {
        let ahead = if r.ahead_of_pace() {
            ", AHEAD of it"
        } else {
            ""
        };
        format!(
            "; pace {p} ({:.0}% of the UTC day{ahead})",
            r.day_gone * 100.0
        )
    });
    format!("{} used, {left}{pace}, projected {}", r.used, r.projected)
}

/// What `dead-letters drop` did, for a terminal or as JSON.
pub fn render_dropped(dropped: &[String], missing: &[&String], json: bool) -> String {
    let value = serde_json::json!({ "dropped": dropped, "not_found": missing });
    render(&value, json, |_| {
        let mut s = String::new();
        for id in dropped {
            let _ = writeln!(s, "{}: dropped", shown(id));
        }
        for id in missing {
            let _ = writeln!(s, "{}: no such dead letter", shown(id));
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
            .map(|r| format!("{}: {}\n", shown(&r.id), shown(&r.result)))
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
                    shown(&e.action),
                    shown(&e.actor),
                    shown_json(&e.detail)
                )
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_escaped_and_the_rest_as_it_is() {
        assert!(matches!(shown("job_1 é ✓"), Cow::Borrowed("job_1 é ✓")));
        assert_eq!(
            shown("a\u{1b}[2Jb\u{7}\n\t\u{7f}\u{9b}\u{85}"),
            r"a\u{1b}[2Jb\u{7}\u{a}\u{9}\u{7f}\u{9b}\u{85}"
        );
        assert_eq!(shown_json(&serde_json::json!("x\u{9b}")), r#""x\u{9b}""#);
    }

    #[test]
    fn format_characters_are_shown_escaped_so_no_id_reads_reordered_or_as_another() {
        assert_eq!(
            shown("job_\u{202e}cba\u{202c}\u{200b}x\u{ad}\u{2066}"),
            r"job_\u{202e}cba\u{202c}\u{200b}x\u{ad}\u{2066}"
        );
        assert!(matches!(shown("ジョブ_1"), Cow::Borrowed("ジョブ_1")));
    }
}
