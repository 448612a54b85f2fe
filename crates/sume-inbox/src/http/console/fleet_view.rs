//! The overview's picture of the fleet, read from the rows each instance writes once a minute
//! ([`crate::actors::heartbeat`]): every instance with its tasks (silent ones marked), and the chart of
//! the last hour summed over instances ([`super::chart`]).

use std::collections::BTreeMap;

use maud::{html, Markup};

use super::chart;
use super::layout::{age, at};
use crate::actors::supervision::TaskState;
use crate::db::{DbError, FleetMinute, InstanceRow};

/// An instance whose last heartbeat is older than this is silent: crashed, cut off from the
/// database, or stopped without its last write. Three missed minutes.
pub const SILENT_AFTER_SECS: f64 = 180.0;

/// How an instance stands, from its heartbeat.
fn standing(i: &InstanceRow) -> Markup {
    let tasks = i.tasks.as_object();
    let stopped = tasks.is_some_and(|t| !t.is_empty() && t.values().all(|s| s == "finished"));
    let dead = tasks.is_some_and(|t| t.values().any(|s| s == "dead"));
    html! {
        @if stopped { span.muted { "stopped" } }
        @else if i.silent_secs > SILENT_AFTER_SECS { span.bad { "silent" } }
        @else if dead { span.bad { "a task died" } }
        @else { span.ok { "alive" } }
    }
}

fn task_list(tasks: &serde_json::Value) -> Markup {
    html! {
        @if let Some(map) = tasks.as_object() {
            @for (name, state) in map {
                @let state = state.as_str().unwrap_or("?");
                span.task {
                    code { (name) } " "
                    @match state {
                        "running" => span.ok { (state) },
                        "finished" => span.muted { (state) },
                        _ => span.bad { (state) },
                    }
                }
                " "
            }
        }
    }
}

/// Every instance, the most recently seen first; `this` is the instance serving the page, and
/// `local` its tasks as it knows them, shown when the database cannot be read.
pub fn instances(
    rows: &Result<Vec<InstanceRow>, DbError>,
    this: &str,
    local: &BTreeMap<String, TaskState>,
) -> Markup {
    html! {
        h2 #fleet { "Instances" }
        @match rows {
            Err(e) => {
                (unreadable(e, "the fleet"))
                p { "This instance's tasks:" }
                @let local: BTreeMap<&str, &str> =
                    local.iter().map(|(n, s)| (n.as_str(), s.as_str())).collect();
                p { (task_list(&serde_json::json!(local))) }
            }
            Ok(rows) if rows.is_empty() => { p { "No instance has written its heartbeat yet." } }
            Ok(rows) => {
                p.muted { "Each instance writes a heartbeat a minute; one silent for "
                    (age(SILENT_AFTER_SECS)) " is marked." }
                table {
                    tr { th { "host" } th { "instance" } th { "version" } th { "started" }
                         th { "last seen" } th { "state" } th { "tasks" } }
                    @for i in rows {
                        tr {
                            td { (i.hostname) }
                            td { code { (i.instance) } @if i.instance == this { " " span.tag { "this one" } } }
                            td { (i.version) }
                            td { (at(&i.started_at)) }
                            td { (age(i.silent_secs)) " ago" }
                            td { (standing(i)) }
                            td { (task_list(&i.tasks)) }
                        }
                    }
                }
            }
        }
    }
}

/// Why `what` cannot be shown: the database is down, or its role lacks a grant (a role granted
/// its rights before migration 9 made the fleet's tables), said with the grants to give.
pub fn unreadable(e: &DbError, what: &str) -> Markup {
    html! {
        @if e.is_denied() {
            p.bad { "The database's role may not read " (what) ": " (e.to_string()) }
        } @else {
            p.bad { "Database down: " (what) " cannot be read." }
        }
    }
}

/// The chart of the last hour.
pub fn last_hour(minutes: &Result<Vec<FleetMinute>, DbError>) -> Markup {
    html! {
        h2 { "The last hour, every instance" }
        @match minutes {
            Err(e) => { (unreadable(e, "the last hour")) }
            Ok(minutes) => { (chart::last_hour(minutes)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn row(tasks: serde_json::Value, silent_secs: f64) -> InstanceRow {
        InstanceRow {
            instance: "<b>i</b>".into(),
            hostname: "<script>h</script>".into(),
            pid: 1,
            version: "0.1.0".into(),
            started_at: Utc::now(),
            last_seen: Utc::now(),
            silent_secs,
            tasks,
        }
    }

    /// A role without its grants is not a database down: the page says which it is.
    #[test]
    fn a_permission_refused_is_not_said_as_a_database_down() {
        let denied = unreadable(&DbError::AuditUnwritable, "the fleet").into_string();
        assert!(denied.contains("may not read the fleet"), "{denied}");
        assert!(!denied.contains("Database down"), "{denied}");
        let down = unreadable(&DbError::Closed, "the fleet").into_string();
        assert!(down.contains("Database down"), "{down}");
    }

    #[test]
    fn instances_are_escaped_and_silent_ones_marked() {
        let rows = vec![
            row(
                serde_json::json!({"attach": "running", "<x>": "dead"}),
                10.0,
            ),
            row(serde_json::json!({"attach": "running"}), 600.0),
            row(serde_json::json!({"attach": "finished"}), 600.0),
        ];
        let html = instances(&Ok(rows), "none", &BTreeMap::new()).into_string();
        assert!(
            !html.contains("<script>") && !html.contains("<x>"),
            "{html}"
        );
        assert!(html.contains("&lt;script&gt;h"), "{html}");
        assert!(html.contains("a task died"), "{html}");
        assert_eq!(html.matches(">silent<").count(), 1, "{html}");
        assert_eq!(html.matches(">stopped<").count(), 1, "{html}");
    }
}
