//! The operator console on ADMIN_ADDR under `/console`: pages rendered on the server (maud,
//! escaped by construction), one embedded stylesheet, no JavaScript. It is served only when
//! ADMIN_TOKEN is set; otherwise every console address answers a page saying how to set it.
//!
//! What guards it, outermost first (`guard`): a request id, the same `Host` check as the admin
//! API (the one function), and on every answer a strict Content-Security-Policy (nothing but this origin's
//! stylesheet and images, no script, no frame). Signing in ([`sessions`]) exchanges the token for
//! a server-side session; every form that changes something carries the session's CSRF token.
//! The pages live in `list_pages.rs` (overview, inbox, set aside and orphans, dead letters; the
//! overview's instances and chart in `fleet_view.rs` and `chart.rs`, its Sume reads in
//! `reads_view.rs`),
//! `job.rs` (search and timeline) and `actions.rs` (replays and drop, each audited).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::html;

mod actions;
pub mod attempts;
mod chart;
mod fleet_view;
mod job;
mod job_list_page;
mod layout;
mod list_pages;
mod reads_view;
pub mod sessions;

use super::admin::access::{host_check, request_id, REQUEST_ID};
use super::admin::{Access, AdminState};
use sessions::Sessions;

/// The Content-Security-Policy of every console answer: this origin's stylesheet and images,
/// forms posted only here, nothing else (no script at all, inline or not).
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
    form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What the console's handlers share.
#[derive(Clone)]
pub struct ConsoleState {
    /// The admin API's state: the store, the secrets for replay, the tasks' health.
    pub admin: AdminState,
    /// The tokens and hosts; the console needs `operator` (ADMIN_TOKEN).
    pub access: Arc<Access>,
    /// INBOX_GRACE: how long an event may wait for its row before Sume is asked.
    pub inbox_grace: std::time::Duration,
    /// Signed-in operators and the sign-in limit.
    pub sessions: Arc<Sessions>,
    /// This instance runs without SUME_API_KEYS: its sweep asks Sume nothing.
    pub no_api_keys: bool,
}

/// The console's routes, each behind `guard`.
pub fn router(state: ConsoleState) -> Router {
    let guarded = Router::new()
        .route(
            "/console",
            get(|| async { Redirect::to("/console/overview") }),
        )
        .route(
            "/console/",
            get(|| async { Redirect::to("/console/overview") }),
        )
        .route(
            "/console/sign-in",
            get(sessions::sign_in_form).post(sessions::sign_in),
        )
        .route("/console/sign-out", post(sessions::sign_out))
        .route("/console/overview", get(list_pages::overview))
        .route("/console/jobs", get(job::search))
        .route("/console/inbox", get(list_pages::inbox))
        .route("/console/set-aside", get(list_pages::set_aside))
        .route("/console/set-aside/replay", post(actions::replay_event))
        .route("/console/dead-letters", get(list_pages::dead_letters))
        .route("/console/dead-letters/replay", post(actions::replay))
        .route("/console/dead-letters/drop", post(actions::drop))
        .route("/console/static/console.css", get(stylesheet))
        .route("/console/{*rest}", get(no_such_page))
        // The port's root, where a browser pointed at the admin address lands first.
        .route("/", get(|| async { Redirect::to("/console") }))
        .with_state(state.clone());
    guarded.layer(middleware::from_fn_with_state(state, guard))
}

/// A console address that names no page: a page saying so, not the admin API's JSON.
async fn no_such_page() -> Response {
    layout::message(
        StatusCode::NOT_FOUND,
        "No such page",
        "The console has no page at this address: start from /console.",
    )
}

/// A request id, the `Host` check, ADMIN_TOKEN, and the security headers on every answer.
async fn guard(State(state): State<ConsoleState>, request: Request, next: Next) -> Response {
    let id = request_id(&request);
    // The admin API's own check: an absolute-form target's host stands for `Host`, and a
    // request naming two hosts is refused.
    let host = host_check(&state.access, &request);
    let mut response = if let Err(e) = host {
        let (title, text) = match e.status {
            StatusCode::MISDIRECTED_REQUEST => (
                "Unknown host",
                "This Host is not the console's address (see ADMIN_HOSTS).",
            ),
            _ => (
                "Two hosts",
                "This request names more than one Host: send one, naming the console's address.",
            ),
        };
        layout::message(e.status, title, text)
    } else if state.access.operator.is_none() {
        not_configured()
    } else {
        as_page(REQUEST_ID.scope(id.clone(), next.run(request)).await).await
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        headers.insert("x-request-id", v);
    }
    response
}

/// A refusal the router or an extractor made in plain text, or with no body (a form missing a
/// field, a query read twice, another method), as a console page saying the same; `Allow`
/// kept. The console's own answers pass as they are.
async fn as_page(response: Response) -> Response {
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_none_or(|t| t.as_bytes().starts_with(b"text/plain"));
    let status = response.status();
    if !status.is_client_error() || !plain {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let text = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let title = match status {
        StatusCode::METHOD_NOT_ALLOWED => "Method not allowed",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "Not a form",
        StatusCode::UNPROCESSABLE_ENTITY => "Incomplete form",
        _ => "Bad request",
    };
    let text = match text.trim() {
        "" => "This address does not take that request: start from /console.".to_owned(),
        t => format!("{t}: reload the page and try again."),
    };
    let mut page = layout::message(status, title, &text);
    if let Some(allow) = allow {
        page.headers_mut().insert(header::ALLOW, allow);
    }
    page
}

/// Without ADMIN_TOKEN there is nothing to sign in with: say how to set one.
fn not_configured() -> Response {
    let body = html! {
        p { "The console is served only when " code { "ADMIN_TOKEN" } " is set, even on loopback." }
        p { "Set it to a long random value, e.g. " code { "ADMIN_TOKEN=$(openssl rand -hex 32)" }
            ", restart the daemon and sign in here with it." }
    };
    layout::bare(StatusCode::FORBIDDEN, "Console not configured", body)
}

async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        include_str!("console.css"),
    )
        .into_response()
}
