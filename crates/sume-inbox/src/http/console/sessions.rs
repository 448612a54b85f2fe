//! Signing in to the console: the operator's token (ADMIN_TOKEN) is exchanged for a session
//! held in this instance's memory. The cookie holds only a random session id (`HttpOnly`,
//! `SameSite=Strict`, path `/console`), never the token; each session has its own CSRF token,
//! which every state-changing form carries. Behind a proxy that says its client spoke HTTPS
//! (`X-Forwarded-Proto: https`, `Forwarded: proto=https`), the cookies are also `Secure`, so
//! a browser never sends them over plain HTTP to the same host. The sign-in form itself is protected by a signed
//! double submit (a random nonce in a short cookie, its keyed digest in the form). A post
//! whose nonce does not check out is answered with a fresh form and counts for nothing; wrong
//! tokens are limited per client address ([`SIGN_IN_LIMIT`] a minute, [`super::attempts`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use maud::html;
use rand::RngCore;
use serde::Deserialize;
use sha2::{Digest, Sha256};

pub use super::attempts::SIGN_IN_LIMIT;
use super::attempts::{Client, WrongTokens};
use super::{layout, ConsoleState};
use crate::http::admin::access::same_secret;
use crate::http::admin::current_request_id;

/// The session cookie's name.
pub const COOKIE: &str = "sume_console";
/// The sign-in form's nonce cookie.
const PRE_COOKIE: &str = "sume_console_pre";
/// How long a session lasts without use.
const IDLE: Duration = Duration::from_secs(8 * 3600);
/// The most sessions kept at once; the oldest go first beyond it.
const MAX_SESSIONS: usize = 256;

/// A signed-in operator.
#[derive(Debug, Clone)]
pub struct Operator {
    /// The token every state-changing form of this session must carry.
    pub csrf: String,
    /// The session id's first characters, for the audit log.
    pub tag: String,
}

struct Entry {
    operator: Operator,
    last_used: Instant,
}

/// The sessions of this instance and its sign-in limit.
pub struct Sessions {
    map: Mutex<HashMap<String, Entry>>,
    wrong: WrongTokens,
    key: [u8; 32],
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            map: Mutex::new(HashMap::new()),
            wrong: WrongTokens::default(),
            key: random_bytes(),
        }
    }
}

fn random_bytes() -> [u8; 32] {
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    b
}

impl Sessions {
    /// A new session; answers its id.
    fn open(&self) -> (String, Operator) {
        let id = hex::encode(random_bytes());
        let operator = Operator {
            csrf: hex::encode(random_bytes()),
            tag: id[..8].to_owned(),
        };
        let mut map = self.map.lock().expect("sessions");
        map.retain(|_, e| e.last_used.elapsed() < IDLE);
        if map.len() >= MAX_SESSIONS {
            let oldest = map
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            oldest.map(|k| map.remove(&k));
        }
        let entry = Entry {
            operator: operator.clone(),
            last_used: Instant::now(),
        };
        map.insert(id.clone(), entry);
        (id, operator)
    }

    fn get(&self, id: &str) -> Option<Operator> {
        let mut map = self.map.lock().expect("sessions");
        let entry = map.get_mut(id)?;
        if entry.last_used.elapsed() >= IDLE {
            map.remove(id);
            return None;
        }
        entry.last_used = Instant::now();
        Some(entry.operator.clone())
    }

    fn close(&self, id: &str) {
        self.map.lock().expect("sessions").remove(id);
    }

    fn pre_token(&self, nonce: &str) -> String {
        hex::encode(
            Sha256::new()
                .chain_update(self.key)
                .chain_update(nonce)
                .finalize(),
        )
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The signed-in operator, or a redirect to the sign-in form.
pub fn require(state: &ConsoleState, headers: &HeaderMap) -> Result<Operator, Box<Response>> {
    cookie(headers, COOKIE)
        .and_then(|id| state.sessions.get(id))
        .ok_or_else(|| Box::new(Redirect::to("/console/sign-in").into_response()))
}

/// The operator of a state-changing request: signed in, and `csrf` is the session's token.
pub fn require_csrf(
    state: &ConsoleState,
    headers: &HeaderMap,
    csrf: &str,
) -> Result<Operator, Box<Response>> {
    let operator = require(state, headers)?;
    if !same_secret(csrf, &operator.csrf) {
        return Err(Box::new(layout::message(
            StatusCode::FORBIDDEN,
            "Refused",
            "The form's CSRF token does not match this session: reload the page and try again.",
        )));
    }
    Ok(operator)
}

/// Who acts in the audit table for `operator`'s session.
pub fn actor(operator: &Operator) -> String {
    format!("console:operator (session {})", operator.tag)
}

/// Records a console action in the audit table; a failure to record refuses the answer.
pub async fn audit(
    state: &ConsoleState,
    operator: &Operator,
    action: &str,
    detail: serde_json::Value,
) -> Result<(), Response> {
    state
        .admin
        .store
        .audit_log_insert(
            &actor(operator),
            action,
            &detail,
            current_request_id().as_deref(),
        )
        .await
        .map_err(|e| unrecorded(&e))
}

/// The answer when an action's audit entry could not be written.
pub fn unrecorded(e: &crate::db::DbError) -> Response {
    tracing::error!(error = %e, "recording the audit entry failed");
    layout::message(
        StatusCode::SERVICE_UNAVAILABLE,
        "Database unavailable",
        "The action could not be recorded in the audit log.",
    )
}

/// `GET /console/sign-in`: the form, with a fresh nonce.
pub async fn sign_in_form(State(state): State<ConsoleState>, headers: HeaderMap) -> Response {
    form(&state, &headers, StatusCode::OK, None)
}

/// `; Secure` when the request came through a proxy that says its client spoke HTTPS: the
/// first entry of `X-Forwarded-Proto` is `https`, or the first element of `Forwarded` has
/// `proto=https` (RFC 7239). The daemon itself speaks plain HTTP, where a browser would refuse
/// a `Secure` cookie, so nothing else sets it; a proxy that says so falsely only stops its own
/// sign-in.
fn secure(headers: &HeaderMap) -> &'static str {
    let first = |name: &str, sep: char| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(sep).next())
            .map(|v| v.trim().to_ascii_lowercase())
    };
    let forwarded_proto = first("x-forwarded-proto", ',').is_some_and(|p| p == "https");
    let forwarded = first("forwarded", ',').is_some_and(|element| {
        element
            .split(';')
            .any(|pair| pair.trim().replace('"', "") == "proto=https")
    });
    if forwarded_proto || forwarded {
        "; Secure"
    } else {
        ""
    }
}

fn form(
    state: &ConsoleState,
    headers: &HeaderMap,
    status: StatusCode,
    error: Option<&str>,
) -> Response {
    let nonce = hex::encode(random_bytes());
    let body = html! {
        @if let Some(e) = error { p.bad { (e) } }
        form method="post" action="/console/sign-in" {
            input type="hidden" name="csrf" value=(state.sessions.pre_token(&nonce));
            p { label { "Operator token (ADMIN_TOKEN)" br;
                input type="password" name="token" autocomplete="current-password" autofocus; } }
            button.primary type="submit" { "Sign in" }
        }
    };
    let mut r = layout::bare(status, "Sign in", body);
    let c = format!(
        "{PRE_COOKIE}={nonce}; Path=/console; HttpOnly; SameSite=Strict; Max-Age=900{}",
        secure(headers)
    );
    if let Ok(v) = c.parse() {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}

/// The sign-in form's fields.
#[derive(Debug, Deserialize)]
pub struct SignIn {
    token: String,
    /// Missing reads as empty: refused 403 as a wrong one, not 422.
    #[serde(default)]
    csrf: String,
}

/// `POST /console/sign-in`: checked against the form's nonce (a post from anywhere else counts
/// for nothing), then the client's limit, then the token (a wrong one is counted).
pub async fn sign_in(
    State(state): State<ConsoleState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(f): Form<SignIn>,
) -> Response {
    let nonce_ok = cookie(&headers, PRE_COOKIE)
        .is_some_and(|n| same_secret(&f.csrf, &state.sessions.pre_token(n)));
    if !nonce_ok {
        return form(
            &state,
            &headers,
            StatusCode::FORBIDDEN,
            Some(
                "The form expired, or was sent to another instance than the one that showed \
                 it (behind a load balancer, keep an operator on one instance): try again.",
            ),
        );
    }
    let client = Client::of(peer.map(|Extension(ConnectInfo(addr))| addr));
    if state.sessions.wrong.spent(client) {
        let mut r = form(
            &state,
            &headers,
            StatusCode::TOO_MANY_REQUESTS,
            Some("Too many wrong tokens from this address: wait a minute."),
        );
        // The count is per minute: a minute is the longest wait.
        r.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("60"),
        );
        return r;
    }
    let right = state
        .access
        .operator
        .as_ref()
        .is_some_and(|t| same_secret(f.token.trim(), t.expose()));
    if !right {
        state.sessions.wrong.count(client);
        tracing::warn!(%client, "console sign-in refused: wrong token");
        return form(
            &state,
            &headers,
            StatusCode::UNAUTHORIZED,
            Some("Wrong token."),
        );
    }
    let (id, operator) = state.sessions.open();
    if let Err(r) = audit(&state, &operator, "console_sign_in", serde_json::json!({})).await {
        state.sessions.close(&id);
        return r;
    }
    let mut r = Redirect::to("/console/overview").into_response();
    let c = format!(
        "{COOKIE}={id}; Path=/console; HttpOnly; SameSite=Strict{}",
        secure(&headers)
    );
    if let Ok(v) = c.parse() {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}

/// The sign-out form's field.
#[derive(Debug, Deserialize)]
pub struct CsrfOnly {
    /// Missing reads as empty: refused 403 as a wrong one, not 422.
    #[serde(default)]
    csrf: String,
}

/// `POST /console/sign-out`: ends the session.
pub async fn sign_out(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    Form(f): Form<CsrfOnly>,
) -> Response {
    if let Err(r) = require_csrf(&state, &headers, &f.csrf) {
        return *r;
    }
    if let Some(id) = cookie(&headers, COOKIE) {
        state.sessions.close(id);
    }
    let mut r = Redirect::to("/console/sign-in").into_response();
    let c = format!(
        "{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0{}",
        secure(&headers)
    );
    if let Ok(v) = c.parse() {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}
