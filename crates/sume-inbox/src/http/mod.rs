//! The two HTTP surfaces: the public webhook endpoint ([`webhook`], its headers read in
//! `webhook_headers`, its body in [`webhook_body`]) with the health checks
//! ([`probes`]) and what other paths get ([`misrouted`]), and the admin API ([`admin`]) with
//! the console ([`console`]). Handlers only translate HTTP to messages and store calls. Both
//! ports are served by one loop, [`server`], each with its own connection cap ([`conns`]), whose
//! connections keep their timeouts in [`timed_io`] (and the admin port's request bodies theirs
//! in [`timed_body`]) and close through [`linger`], which reads what a client still sends after
//! an answer given with its body unread; the webhook bodies the public port holds are bounded by
//! [`body_budget`], and shed through [`body_readers`]. While the daemon starts, the public port
//! answers from [`starting`] alone.

pub mod admin;
pub mod body_budget;
pub mod body_readers;
pub mod conns;
pub mod console;
pub mod linger;
pub mod misrouted;
pub mod probes;
pub mod server;
pub mod starting;
pub mod timed_body;
pub mod timed_io;
pub mod webhook;
pub mod webhook_body;
mod webhook_headers;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An error answer: `{"error":{"code","message"},"request_id"}` with a status; the request id
/// is the admin request's (see `admin::access`), absent on the public port.
pub fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let mut body = serde_json::json!({ "error": { "code": code, "message": message.into() } });
    if let Some(id) = admin::current_request_id() {
        body["request_id"] = serde_json::Value::String(id);
    }
    (status, Json(body)).into_response()
}

/// An error answer held as data until it is sent: what a check returns, so that a handler can
/// use `?` and a caller can read the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable, machine-readable code (`invalid_query`, `not_found`, ...).
    pub code: &'static str,
    /// What a person reads.
    pub message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error(self.status, self.code, self.message)
    }
}
