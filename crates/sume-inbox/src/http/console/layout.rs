//! The console's frame: the head with its one stylesheet, the navigation, the sign-out form
//! (carrying the session's CSRF token), and small helpers for times and ages. Everything is
//! written with maud, whose `(expr)` escapes, so no user-controlled text reaches the page raw.

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{html, Markup, DOCTYPE};

/// The pages of the navigation: path and label.
const NAV: &[(&str, &str)] = &[
    ("/console/overview", "Overview"),
    ("/console/jobs", "Jobs"),
    ("/console/inbox", "Inbox"),
    ("/console/set-aside", "Set aside & orphans"),
    ("/console/dead-letters", "Dead letters"),
];

fn head(title: &str) -> Markup {
    html! {
        (DOCTYPE)
        meta charset="utf-8";
        meta name="viewport" content="width=device-width, initial-scale=1";
        title { (title) " · sume-inbox" }
        link rel="stylesheet" href="/console/static/console.css";
    }
}

/// A page of a signed-in operator: `here` is the navigation entry it belongs to.
pub fn page(here: &str, title: &str, csrf: &str, body: Markup) -> Response {
    let markup = html! {
        (head(title))
        body {
            header {
                span.brand { "sume-inbox" }
                @for (path, label) in NAV {
                    a href=(path) class=[(*path == here).then_some("here")] { (label) }
                }
                form.inline method="post" action="/console/sign-out" {
                    input type="hidden" name="csrf" value=(csrf);
                    button type="submit" { "Sign out" }
                }
            }
            main { h1 { (title) } (body) }
        }
    };
    Html(markup.into_string()).into_response()
}

/// A page outside a session (sign-in, not configured).
pub fn bare(status: StatusCode, title: &str, body: Markup) -> Response {
    let markup = html! {
        (head(title))
        body { main.signin { h1 { (title) } (body) } }
    };
    (status, Html(markup.into_string())).into_response()
}

/// A short answer in the bare frame.
pub fn message(status: StatusCode, title: &str, text: &str) -> Response {
    bare(status, title, html! { p { (text) } })
}

/// A time as the pages show it, to the millisecond, in UTC.
pub fn at(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()
}

/// An optional time, or a dash.
pub fn at_opt(t: &Option<DateTime<Utc>>) -> String {
    t.as_ref().map(at).unwrap_or_else(|| "–".into())
}

/// A duration in seconds, short: `42s`, `7m 03s`, `2h 05m`.
pub fn age(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Each key's answer of an inbox check (a JSON object of key name to answer), as a list.
pub fn answers(value: &serde_json::Value) -> Markup {
    html! {
        @if let Some(map) = value.as_object() {
            @for (key, answer) in map {
                div { code { (key) } ": " (answer_text(answer)) }
            }
        } @else {
            code { (value.to_string()) }
        }
    }
}

fn answer_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_short() {
        assert_eq!(age(42.4), "42s");
        assert_eq!(age(423.0), "7m 03s");
        assert_eq!(age(7500.0), "2h 05m");
    }

    #[test]
    fn answers_escape_keys_and_values() {
        let v = serde_json::json!({"<k>": "<script>x</script>"});
        let s = answers(&v).into_string();
        assert!(!s.contains("<script>"), "{s}");
        assert!(s.contains("&lt;script&gt;"), "{s}");
    }
}
