//! API errors in Sume's envelope, and the tag an answer carries back to the request log.
//!
//! Every error answer is `{"error":{"code","message","details"},"request_id":"req_..."}`
//! (`wire::error_envelope`) with the same request id in `X-Request-Id`. A 429 carries
//! `Retry-After`; a 401 carries `WWW-Authenticate`.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::store::random_id;
use crate::wire::error_envelope;

/// The request id header on every API answer.
pub const REQUEST_ID: &str = "x-request-id";

/// Which job an answer was about and which faults were injected into it; the request log
/// reads it from the response's extensions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tag {
    pub job_id: Option<String>,
    pub faults: Vec<&'static str>,
}

impl Tag {
    pub fn attach(self, mut response: Response) -> Response {
        response.extensions_mut().insert(self);
        response
    }
}

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_after_secs: Option<u64>,
    pub tag: Tag,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after_secs: None,
            tag: Tag::default(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn not_found(what: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("No such {what}."),
        )
    }

    pub fn rate_limited(retry_after_secs: u64) -> ApiError {
        ApiError {
            retry_after_secs: Some(retry_after_secs.max(1)),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_exceeded",
                format!("Rate limit exceeded. Retry after {retry_after_secs} seconds."),
            )
        }
    }

    pub fn with_tag(mut self, tag: Tag) -> ApiError {
        self.tag = tag;
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let request_id = random_id("req_", 20);
        let body = error_envelope(self.code, &self.message, &request_id);
        let mut response = (self.status, Json(body)).into_response();
        let headers = response.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&request_id) {
            headers.insert(REQUEST_ID, v);
        }
        if let Some(secs) = self.retry_after_secs {
            headers.insert("retry-after", HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                "www-authenticate",
                HeaderValue::from_static("Bearer realm=\"sume\""),
            );
        }
        self.tag.attach(response)
    }
}
