//! `GET /console/jobs` without `q`: a page of jobs with the filters `GET /v1/jobs` has (state,
//! closed by, order id, registered and closed between), in the API's order (by job id, paged
//! from the last one shown), each linking to its timeline.

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;

use super::layout::{at, at_opt};
use super::list_pages::urlencode;
use crate::db::{JobFilter, JobRow, Store, CLOSERS, JOB_STATES};

/// Jobs one page shows.
const ROWS: i64 = 50;

/// The list's filters as the form sends them (an empty field is no filter).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ListForm {
    #[serde(default)]
    state: String,
    #[serde(default)]
    closed_by: String,
    #[serde(default)]
    order_id: String,
    #[serde(default)]
    created_from: String,
    #[serde(default)]
    created_to: String,
    #[serde(default)]
    closed_from: String,
    #[serde(default)]
    closed_to: String,
    #[serde(default)]
    after: String,
}

fn some(v: &str) -> Option<String> {
    Some(v.trim()).filter(|v| !v.is_empty()).map(str::to_owned)
}

fn one_of(field: &str, v: &str, allowed: &[&str]) -> Result<Option<String>, String> {
    match some(v) {
        Some(v) if !allowed.contains(&v.as_str()) => Err(format!(
            "{field} must be one of {}, not {v:?}",
            allowed.join(", ")
        )),
        v => Ok(v),
    }
}

fn time(field: &str, v: &str) -> Result<Option<DateTime<Utc>>, String> {
    some(v)
        .map(|v| {
            DateTime::parse_from_rfc3339(&v)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| format!("{field} must be an RFC 3339 time such as 2026-12-01T10:00:00Z, not {v:?} ({e})"))
        })
        .transpose()
}

impl ListForm {
    /// The filter, or what is wrong with the form.
    fn filter(&self) -> Result<JobFilter, String> {
        for (field, v) in [("order id", &self.order_id), ("after", &self.after)] {
            if !crate::db::text_can_hold(v) {
                return Err(format!("{field} must not hold a NUL character (%00)"));
            }
        }
        Ok(JobFilter {
            state: one_of("state", &self.state, &JOB_STATES)?,
            closed_by: one_of("closed by", &self.closed_by, &CLOSERS)?,
            order_id: some(&self.order_id),
            created_from: time("registered from", &self.created_from)?,
            created_to: time("registered before", &self.created_to)?,
            closed_from: time("closed from", &self.closed_from)?,
            closed_to: time("closed before", &self.closed_to)?,
        })
    }

    /// The query string of this form with `after` replaced.
    fn with_after(&self, after: &str) -> String {
        let fields = [
            ("state", &self.state),
            ("closed_by", &self.closed_by),
            ("order_id", &self.order_id),
            ("created_from", &self.created_from),
            ("created_to", &self.created_to),
            ("closed_from", &self.closed_from),
            ("closed_to", &self.closed_to),
        ];
        let mut q: Vec<String> = fields
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect();
        q.push(format!("after={}", urlencode(after)));
        q.join("&")
    }
}

fn select(name: &str, current: &str, options: &[&str]) -> Markup {
    html! {
        select name=(name) {
            option value="" selected[current.is_empty()] { "any" }
            @for o in options { option value=(o) selected[current == *o] { (o) } }
        }
    }
}

fn form(f: &ListForm) -> Markup {
    let text = |name: &str, value: &str, hint: &str| {
        html! { input type="text" name=(name) value=(value) placeholder=(hint) size="22"; }
    };
    html! {
        form.filters method="get" action="/console/jobs" {
            label { "state " (select("state", &f.state, &JOB_STATES)) } " "
            label { "closed by " (select("closed_by", &f.closed_by, &CLOSERS)) } " "
            label { "order " (text("order_id", &f.order_id, "order id")) } br;
            label { "registered " (text("created_from", &f.created_from, "from (RFC 3339)")) }
            " " (text("created_to", &f.created_to, "before")) " "
            label { "closed " (text("closed_from", &f.closed_from, "from")) }
            " " (text("closed_to", &f.closed_to, "before")) " "
            button.primary type="submit" { "List" }
        }
    }
}

fn table(jobs: &[JobRow]) -> Markup {
    html! {
        table {
            tr { th { "job" } th { "order" } th { "key" } th { "state" } th { "Sume status" }
                 th { "closed by" } th { "registered" } th { "closed" } }
            @for j in jobs {
                tr {
                    td { a href={ "/console/jobs?q=" (urlencode(&j.job_id)) } { code { (j.job_id) } } }
                    td { (j.order_id.as_deref().unwrap_or("–")) }
                    td { (j.api_key.as_deref().unwrap_or("any")) }
                    td { (j.state) }
                    td { (j.sume_status.as_deref().unwrap_or("–")) }
                    td { (j.closed_by.as_deref().unwrap_or("–")) }
                    td { (at(&j.created_at)) }
                    td { (at_opt(&j.closed_at)) }
                }
            }
        }
    }
}

/// The list page's body and its status: 400 for a bad filter, 503 when the database fails.
pub async fn list(store: &Store, f: &ListForm) -> (StatusCode, Markup) {
    let filter = match f.filter() {
        Ok(filter) => filter,
        Err(e) => {
            // Shown again without what no page should carry (a NUL character).
            let mut shown = f.clone();
            for v in [
                &mut shown.state,
                &mut shown.closed_by,
                &mut shown.order_id,
                &mut shown.created_from,
                &mut shown.created_to,
                &mut shown.closed_from,
                &mut shown.closed_to,
                &mut shown.after,
            ] {
                v.retain(|c| c != '\0');
            }
            return (
                StatusCode::BAD_REQUEST,
                html! { (form(&shown)) p.bad { (e) } },
            );
        }
    };
    let jobs = match store.jobs_list(&filter, f.after.trim(), ROWS).await {
        Ok(jobs) => jobs,
        Err(e) => {
            tracing::error!(error = %e, "console: listing jobs failed");
            let body = html! { (form(f)) p.bad { "Database down: see the daemon's log." } };
            return (StatusCode::SERVICE_UNAVAILABLE, body);
        }
    };
    let next = (jobs.len() as i64 == ROWS)
        .then(|| jobs.last().map(|j| f.with_after(&j.job_id)))
        .flatten();
    let body = html! {
        (form(f))
        p.muted { "By job id, as GET /v1/jobs answers them; find one job by its id or order id above." }
        @if jobs.is_empty() { p { "No job matches." } } @else { (table(&jobs)) }
        @if let Some(q) = next { p { a href={ "/console/jobs?" (q) } { "next " (ROWS) " →" } } }
    };
    (StatusCode::OK, body)
}
