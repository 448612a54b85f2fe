//! The console's read-only pages: the overview (is anything wrong right now?), the inbox (what
//! waits, and for what), set-aside events and orphans (with each key's answer), and dead
//! letters (their raw body, escaped, with replay and drop). Each reads the database in one or
//! two queries through [`crate::db::Store`].

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{html, Markup};

use super::layout::{self, age, answers, at, at_opt};
use super::sessions::{require, Operator};
use super::ConsoleState;
use super::{fleet_view, reads_view};

/// Rows a list page shows.
const ROWS: i64 = 200;
/// Instances the overview lists.
const INSTANCES: i64 = 100;

fn unavailable(
    operator: &Operator,
    here: &str,
    title: &str,
    what: &str,
    e: &crate::db::DbError,
) -> Response {
    tracing::error!(error = %e, "console: {what}");
    let mut r = layout::page(
        here,
        title,
        &operator.csrf,
        html! { p.bad { "Database down: " (what) " failed. See the daemon's log." } },
    );
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r
}

fn card(n: impl std::fmt::Display, what: &str, class: Option<&str>) -> Markup {
    html! { div class={ "card " (class.unwrap_or("")) } { div.n { (n) } div.what { (what) } } }
}

/// `GET /console/overview`.
pub async fn overview(State(state): State<ConsoleState>, headers: HeaderMap) -> Response {
    let operator = match require(&state, &headers) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    let store = &state.admin.store;
    let clock = crate::db::clock::Clock::Database;
    let (stats, instances, minutes) = tokio::join!(
        store.stats_summary(),
        store.instances_list(INSTANCES, &clock),
        store.instance_minutes_last_hour(&clock)
    );
    let grace = state.inbox_grace.as_secs_f64();
    // The fleet's word once heartbeats are in (another instance may have the keys); this
    // instance's own before any.
    let no_keys = stats
        .as_ref()
        .is_ok_and(|s| s.sweep_has_no_keys() || (state.no_api_keys && s.instances_live == 0));
    let body = html! {
        @if no_keys { p.bad { (crate::db::NO_KEYS) } }
        h2 { "Right now" }
        div.cards {
            @match &stats {
                Ok(s) => {
                    (card("up", "database", None))
                    (card(s.waiting, "events waiting in the inbox", (s.waiting > 0).then_some("warn")))
                    @if s.waiting > 0 {
                        (card(age(s.oldest_waiting_secs),
                            &format!("oldest waiting (INBOX_GRACE {})", age(grace)),
                            (s.oldest_waiting_secs > grace).then_some("bad")))
                    }
                    (card(s.open_jobs, "open jobs", None))
                    @if s.open_jobs_unknown_key > 0 {
                        (card(s.open_jobs_unknown_key, "open jobs naming an api_key no instance has: never polled", Some("bad")))
                    }
                    (card(s.orphans, "orphans", (s.orphans > 0).then_some("bad")))
                    (card(s.disagreements, "disagreements", (s.disagreements > 0).then_some("warn")))
                    (card(s.dead_letters, "dead letters", (s.dead_letters > 0).then_some("bad")))
                    (card(s.set_aside, "set aside", None))
                    (card(s.checks_pending, "inbox checks pending", None))
                    (card(s.schema_version, "schema version", None))
                }
                Err(e) if e.is_denied() => { (card("no grant", "database", Some("bad"))) }
                Err(_) => { (card("down", "database", Some("bad"))) }
            }
        }
        @if let Err(e) = &stats { @if e.is_denied() { (fleet_view::unreadable(e, "the numbers")) } }
        (reads_view::reads_today(stats.as_ref().ok().map(|s| s.reads_today.as_slice()), &state.admin.metrics))
        (fleet_view::instances(&instances, &state.admin.instance, &state.admin.health.snapshot()))
        (fleet_view::last_hour(&minutes))
    };
    if let Err(e) = &stats {
        tracing::error!(error = %e, "console: reading stats failed");
    }
    let mut r = layout::page("/console/overview", "Overview", &operator.csrf, body);
    if stats.is_err() {
        *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    r
}

/// `GET /console/inbox`: waiting events, oldest first, with what each waits for.
pub async fn inbox(State(state): State<ConsoleState>, headers: HeaderMap) -> Response {
    let operator = match require(&state, &headers) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    let here = "/console/inbox";
    let events = match state.admin.store.events_waiting_page(0.0, None, ROWS).await {
        Ok(e) => e,
        Err(e) => return unavailable(&operator, here, "Inbox", "reading the inbox", &e),
    };
    let grace = state.inbox_grace;
    let body = html! {
        @if state.no_api_keys {
            p.bad { "Events wait for their job's row. This instance has " (crate::db::NO_KEYS) "." }
        } @else {
            p.muted { "Events wait for their job's row. Past INBOX_GRACE (" (age(grace.as_secs_f64()))
                ") without a row, Sume is asked about the job with every key." }
        }
        @if events.is_empty() { p { "Nothing waits." } } @else {
            table {
                tr { th { "age" } th { "job" } th { "event" } th { "status" } th { "waits for" } }
                @for e in &events {
                    tr {
                        td { (age(e.age_secs)) }
                        td { a href={ "/console/jobs?q=" (urlencode(&e.job_id)) } { code { (e.job_id) } } }
                        td { code { (e.event_id) } }
                        td { (e.status.as_deref().unwrap_or("–")) }
                        td {
                            @if e.job_exists { "its row exists: attach applies it at its next pass" }
                            @else if let Some(v) = &e.verdict { "the job's row; inbox check: " (v) }
                            @else if e.age_secs >= grace.as_secs_f64() { "the job's row; inbox check due now" }
                            @else { "the job's row; inbox check in " (age(grace.as_secs_f64() - e.age_secs)) }
                        }
                    }
                }
            }
        }
    };
    layout::page(here, "Inbox", &operator.csrf, body)
}

/// `GET /console/set-aside`: set-aside events and orphans, each with every key's answer.
pub async fn set_aside(State(state): State<ConsoleState>, headers: HeaderMap) -> Response {
    let operator = match require(&state, &headers) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    let here = "/console/set-aside";
    let title = "Set aside & orphans";
    let store = &state.admin.store;
    let (aside, orphans) = match tokio::try_join!(
        store.events_set_aside_page(None, ROWS),
        store.inbox_checks_orphans_page(None, ROWS)
    ) {
        Ok(r) => r,
        Err(e) => return unavailable(&operator, here, title, "reading set-aside events", &e),
    };
    let body = html! {
        h2 { "Orphans: Sume knows the job, no row here" }
        @if orphans.is_empty() { p { "None." } } @else {
            table {
                tr { th { "job" } th { "waiting events" } th { "checked" } th { "answers" } }
                @for o in &orphans { tr {
                    td { a href={ "/console/jobs?q=" (urlencode(&o.job_id)) } { code { (o.job_id) } } }
                    td { (o.waiting_events) } td { (at_opt(&o.checked_at)) } td { (answers(&o.answers)) }
                } }
            }
        }
        h2 { "Set aside: no key of ours knows the job" }
        p.muted { "Replay verifies an event again with the current secrets and puts it back in \
            the inbox: attached if its job's row exists, else Sume is asked about its job again." }
        @if aside.is_empty() { p { "None." } } @else {
            table {
                tr { th { "event" } th { "job" } th { "set aside" } th { "why" } th { "answers" } th {} }
                @for e in &aside { tr {
                    td { code { (e.event_id) } }
                    td { a href={ "/console/jobs?q=" (urlencode(&e.job_id)) } { code { (e.job_id) } } }
                    td { (at(&e.set_aside_at)) }
                    td { (e.set_aside_reason.as_deref().unwrap_or("–")) }
                    td { @if let Some(a) = &e.answers { (answers(a)) } @else { "–" } }
                    td { form.inline method="post" action="/console/set-aside/replay" {
                        input type="hidden" name="csrf" value=(operator.csrf);
                        input type="hidden" name="event_id" value=(e.event_id);
                        button type="submit" { "Replay" }
                    } }
                } }
            }
        }
    };
    layout::page(here, title, &operator.csrf, body)
}

/// `GET /console/dead-letters`: each with its raw body (escaped), replay and drop.
pub async fn dead_letters(State(state): State<ConsoleState>, headers: HeaderMap) -> Response {
    let operator = match require(&state, &headers) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    let here = "/console/dead-letters";
    let letters = match state.admin.store.dead_letters_with_bodies(ROWS).await {
        Ok(l) => l,
        Err(e) => return unavailable(&operator, here, "Dead letters", "reading dead letters", &e),
    };
    let body = html! {
        p.muted { "Verified deliveries whose body names no job. Replay reads each again with the \
            current secrets: one that now names a job is stored and attached." }
        form method="post" action="/console/dead-letters/replay" {
            input type="hidden" name="csrf" value=(operator.csrf);
            button.primary type="submit" { "Replay dead letters" }
        }
        @if letters.is_empty() { p { "No dead letters." } }
        @for l in &letters {
            h2 { code { (l.row.dead_letter_id) } }
            p { "Received " (at(&l.row.received_at)) " · " (l.row.bytes) " bytes · why: " (l.row.reason)
                @if let Some(r) = &l.row.replayed_at { " · replayed " (at(r)) } }
            pre { (String::from_utf8_lossy(&l.body_head)) }
            form.inline method="post" action="/console/dead-letters/drop" {
                input type="hidden" name="csrf" value=(operator.csrf);
                input type="hidden" name="id" value=(l.row.dead_letter_id);
                button type="submit" { "Drop" }
            }
        }
    };
    layout::page(here, "Dead letters", &operator.csrf, body)
}

/// Percent-encodes a query value.
pub fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
