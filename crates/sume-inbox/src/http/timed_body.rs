//! A request body that fails once BODY_TIMEOUT has passed since its request's head arrived,
//! for a port whose handlers read their bodies through extractors (the admin port; the webhook
//! handler bounds its own). The deadline only bites while a read of the body is pending: a
//! request without a body, or one whose handler never reads it, is never cut by it, however
//! long it is handled (a `?wait=` holds its request up to MAX_WAIT).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::BoxError;
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

/// Hyper's body with a deadline.
pub struct TimedBody {
    inner: Incoming,
    deadline: Instant,
    timer: Option<Pin<Box<Sleep>>>,
    expired: Arc<AtomicBool>,
}

/// Raised, for the server to answer 408, when a body's deadline passed.
#[derive(Clone, Debug, Default)]
pub struct Expired(Arc<AtomicBool>);

impl Expired {
    /// Whether the body's deadline passed while it was being read.
    pub fn happened(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl TimedBody {
    /// `inner`, failing once `deadline` has passed; the flag says when it did.
    pub fn new(inner: Incoming, deadline: Instant) -> (TimedBody, Expired) {
        let expired = Expired::default();
        let body = TimedBody {
            inner,
            deadline,
            timer: None,
            expired: expired.0.clone(),
        };
        (body, expired)
    }
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(BoxError::from)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.expired.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(
                    "the request body did not arrive within BODY_TIMEOUT".into(),
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The answer to a request whose body BODY_TIMEOUT cut, in place of the handler's `response`:
/// 408, the connection closed; on the admin API (whose answers carry a request id) its error
/// envelope with that id.
pub fn late(response: &axum::http::Response<axum::body::Body>) -> axum::response::Response {
    use axum::http::{header, HeaderValue, StatusCode};
    use axum::response::IntoResponse;
    const LATE: &str = "the request body did not arrive within BODY_TIMEOUT";
    let request_id = response.headers().get("x-request-id").cloned();
    let mut late = match &request_id {
        Some(id) => {
            let body = serde_json::json!({
                "error": {"code": "body_timeout", "message": LATE},
                "request_id": id.to_str().unwrap_or_default(),
            });
            (StatusCode::REQUEST_TIMEOUT, axum::Json(body)).into_response()
        }
        None => (StatusCode::REQUEST_TIMEOUT, LATE).into_response(),
    };
    if let Some(id) = request_id {
        late.headers_mut().insert("x-request-id", id);
    }
    late.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    late
}
