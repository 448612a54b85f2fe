//! The two HTTP surfaces: the public webhook endpoint ([`webhook`]) with the health checks ([`health`]), and
//! the admin API ([`admin`]). Handlers only translate HTTP to messages and store calls.

pub mod admin;
pub mod health;
pub mod webhook;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An error answer: `{"error":{"code","message"}}` with a status.
pub fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": { "code": code, "message": message.into() } });
    (status, Json(body)).into_response()
}
