//! `GET /console/jobs?q=`: a job found by its id or its order id, and its story on one
//! timeline: the row's commit, each stored delivery (received, applied, what it did; marked when
//! it arrived before the row, the race this daemon exists for; with the time Sume signed it),
//! set-asides, the latest polls with each key's answer, the close, any superseded give-up,
//! disagreements, and the inbox check with every key's answer.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;

use super::job_list_page::{self, ListForm};
use super::layout::{self, answers, at, at_opt};
use super::list_pages::urlencode;
use super::sessions::require;
use super::ConsoleState;
use crate::db::{JobDetail, JobFilter, JobRow, POLL_HISTORY};

const HERE: &str = "/console/jobs";

/// The search box, and the list's filters when it is empty.
#[derive(Debug, Deserialize)]
pub struct Search {
    #[serde(default)]
    q: String,
    #[serde(flatten)]
    list: ListForm,
}

fn search_box(q: &str) -> Markup {
    html! {
        form method="get" action="/console/jobs" {
            input type="search" name="q" value=(q) placeholder="job id or order id";
            " " button.primary type="submit" { "Find" }
        }
    }
}

/// `GET /console/jobs?q=`.
pub async fn search(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    Query(s): Query<Search>,
) -> Response {
    let operator = match require(&state, &headers) {
        Ok(o) => o,
        Err(r) => return *r,
    };
    let q = s.q.trim();
    let page = |title: &str, body: Markup| {
        layout::page(
            HERE,
            title,
            &operator.csrf,
            html! { (search_box(q)) (body) },
        )
    };
    if q.is_empty() {
        let (status, body) = job_list_page::list(&state.admin.store, &s.list).await;
        let mut r = page("Jobs", body);
        *r.status_mut() = status;
        return r;
    }
    if !crate::db::text_can_hold(q) {
        // No id holds one; nor is a NUL written into the page.
        let body = html! {
            (search_box(""))
            p.bad { "The search must not hold a NUL character (%00)." }
        };
        let mut r = layout::page(HERE, "Jobs", &operator.csrf, body);
        *r.status_mut() = StatusCode::BAD_REQUEST;
        return r;
    }
    let store = &state.admin.store;
    let detail = match store.job_detail(q).await {
        Ok(d) => d,
        Err(e) => return db_down(&operator.csrf, &e),
    };
    if detail.job.is_some() || !detail.events.is_empty() {
        return page(&format!("Job {q}"), timeline(&detail));
    }
    let filter = JobFilter {
        order_id: Some(q.to_owned()),
        ..JobFilter::default()
    };
    let jobs = match store.jobs_list(&filter, "", 50).await {
        Ok(j) => j,
        Err(e) => return db_down(&operator.csrf, &e),
    };
    if let [only] = jobs.as_slice() {
        return match store.job_detail(&only.job_id).await {
            Ok(d) => page(&format!("Job {}", only.job_id), timeline(&d)),
            Err(e) => db_down(&operator.csrf, &e),
        };
    }
    let body = html! {
        @if jobs.is_empty() { p { "No job and no event for " code { (q) } "." } }
        @else {
            p { "Jobs of order " code { (q) } ":" }
            ul { @for j in &jobs { li {
                a href={ "/console/jobs?q=" (urlencode(&j.job_id)) } { code { (j.job_id) } } " " (j.state)
            } } }
        }
    };
    page("Jobs", body)
}

fn db_down(csrf: &str, e: &crate::db::DbError) -> Response {
    tracing::error!(error = %e, "console: reading the job failed");
    let mut r = layout::page(
        HERE,
        "Jobs",
        csrf,
        html! { p.bad { "Database down: see the daemon's log." } },
    );
    *r.status_mut() = axum::http::StatusCode::SERVICE_UNAVAILABLE;
    r
}

/// One line of the timeline.
struct Step {
    at: Option<DateTime<Utc>>,
    what: &'static str,
    detail: Markup,
}

/// The job's facts, then its story in time order.
fn timeline(d: &JobDetail) -> Markup {
    let mut steps = Vec::new();
    if let Some(j) = &d.job {
        steps.push(Step {
            at: Some(j.created_at),
            what: "row committed",
            detail: html! { "order " code { (j.order_id.as_deref().unwrap_or("–")) } },
        });
    }
    delivery_steps(d, &mut steps);
    poll_steps(d, &mut steps);
    for x in &d.disagreements {
        steps.push(Step {
            at: Some(x.recorded_at),
            what: "disagreement",
            detail: html! {
            "kept " (x.kept_state) ", " (x.source) " said " (x.seen_status) },
        });
    }
    if let Some(j) = &d.job {
        close_steps(j, &mut steps);
    }
    if let Some(c) = &d.inbox_check {
        steps.push(Step { at: c.checked_at, what: "inbox check", detail: html! {
            "verdict " strong { (c.verdict) } " after " (c.attempts) " look(s)" (answers(&c.answers)) } });
    }
    // Stable: entries of one instant keep the order they were pushed in (a row before its
    // deliveries, a delivery stored before it is applied).
    steps.sort_by_key(|s| s.at.unwrap_or(DateTime::<Utc>::MAX_UTC));
    html! {
        @if let Some(j) = &d.job {
            p { "State " strong { (j.state) } " · Sume's status " (j.sume_status.as_deref().unwrap_or("–"))
                " · key " (j.api_key.as_deref().unwrap_or("–")) }
        } @else { p.bad { "No row for this job: its events wait in the inbox." } }
        table.timeline {
            tr { th { "when" } th { "what" } th { "detail" } }
            @for s in &steps { tr {
                td { (s.at.as_ref().map(at).unwrap_or_else(|| "–".into())) } td { (s.what) } td { (s.detail) }
            } }
        }
        @if d.polls.len() >= POLL_HISTORY {
            p.muted { "Polls: the latest " (POLL_HISTORY) " are kept." }
        }
    }
}

/// Each stored delivery: signed (by Sume's timestamp), stored, applied or set aside.
fn delivery_steps(d: &JobDetail, steps: &mut Vec<Step>) {
    let created = d.job.as_ref().map(|j| j.created_at);
    for e in &d.events {
        let raced = created.is_none_or(|c| e.received_at < c);
        steps.push(Step {
            at: Some(e.received_at),
            what: "delivery stored",
            detail: html! {
            code { (e.event_id) } " " (e.status.as_deref().unwrap_or("–"))
            " · signed at " (at_opt(&e.signed_at))
            @if raced { " " span.tag.race { "before the job's row" } } },
        });
        if let Some(applied) = e.applied_at {
            steps.push(Step {
                at: Some(applied),
                what: "delivery applied",
                detail: html! {
                code { (e.event_id) } " → " (e.outcome.as_deref().unwrap_or("–")) },
            });
        }
        if let Some(aside) = e.set_aside_at {
            steps.push(Step {
                at: Some(aside),
                what: "delivery set aside",
                detail: html! {
                code { (e.event_id) } " " (e.set_aside_reason.as_deref().unwrap_or("")) },
            });
        }
    }
}

/// Each kept status call: the key asked, Sume's answer (Sume's text, escaped like the rest),
/// how long it took.
fn poll_steps(d: &JobDetail, steps: &mut Vec<Step>) {
    for p in &d.polls {
        steps.push(Step {
            at: Some(p.polled_at),
            what: "poll",
            detail: html! {
            "#" (p.seq) " key " code { (p.key_name) } ": " strong.answer { (p.answer) }
            " · " (p.latency_ms) " ms" },
        });
    }
}

/// The close, and a give-up it superseded.
fn close_steps(j: &JobRow, steps: &mut Vec<Step>) {
    if let Some(closed) = j.closed_at {
        steps.push(Step {
            at: Some(closed),
            what: "closed",
            detail: html! { (j.state) " by " (j.closed_by.as_deref().unwrap_or("–"))
            @if let Some(r) = &j.close_reason { " (" (r) ")" } },
        });
    }
    if let Some(g) = &j.superseded_give_up {
        let field = |k: &str| g.get(k).and_then(|v| v.as_str()).unwrap_or("–").to_owned();
        steps.push(Step {
            at: field("closed_at").parse().ok(),
            what: "give-up, superseded",
            detail: html! { "gave up as " (field("state")) " (" (field("reason"))
            "); Sume's own terminal status replaced it" },
        });
    }
}
