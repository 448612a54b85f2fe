//! The two HTTP surfaces: the public webhook endpoint ([`webhook`]) with the health checks ([`health`]), and
//! the admin API ([`admin`]). Handlers only translate HTTP to messages and store calls. The
//! public port is served by a loop of its own, [`server`], whose connections keep their
//! timeouts in [`timed_io`], and the bodies it holds are bounded by [`body_budget`]; the admin port, on loopback or behind a token, by `axum::serve`.

pub mod admin;
pub mod body_budget;
pub mod health;
pub mod server;
pub mod timed_io;
pub mod webhook;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An error answer: `{"error":{"code","message"}}` with a status.
pub fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": { "code": code, "message": message.into() } });
    (status, Json(body)).into_response()
}
