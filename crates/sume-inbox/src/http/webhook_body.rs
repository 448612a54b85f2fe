//! A webhook's body, read after its headers passed: within BODY_TIMEOUT, MAX_BODY_BYTES,
//! MAX_BODY_MEMORY ([`super::body_budget`], shedding through [`super::body_readers`]) and
//! [`max_frames`], the pieces it may arrive in. Whichever it fails, its answer closes the
//! connection, the rest of the body being still on the wire.

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::body_budget::{Held, SHED_WAIT};
use super::body_readers::{Connection, Reading};
use super::webhook::{too_large, unavailable, unread_body, WebhookState, REFUSALS_LOG};
use crate::metrics::{TimeoutKind, WebhookOutcome};

/// The frames a body may arrive in whatever MAX_BODY_BYTES is: [`max_frames`].
pub const MIN_FRAMES_ALLOWED: usize = 16_384;

/// The average bytes a frame must bring for a body of MAX_BODY_BYTES: [`max_frames`].
const BYTES_PER_FRAME: usize = 64;

/// The frames a body may arrive in, each a chunk of a chunked body or what one read of the
/// connection brought: 16,384, or MAX_BODY_BYTES / 64 when that is more. Each frame costs its
/// own work (decoding, a copy, a wake-up), so a body of MAX_BODY_BYTES sent a byte a chunk cost
/// some 250 times the CPU of the same body sent whole, before its signature could be checked.
/// No sender reaches this: a body of MAX_BODY_BYTES (1 MiB by default) in the pieces a network
/// carries (a TCP segment, some 1.4 KB, at the least) is under a thousand frames.
pub fn max_frames(max_body_bytes: usize) -> usize {
    MIN_FRAMES_ALLOWED.max(max_body_bytes / BYTES_PER_FRAME)
}

/// Why a body was not read.
enum Unread {
    TooLarge,
    OverBudget,
    Shed,
    Broken(axum::Error),
    /// Cut short: the sender closed (or reset) its connection before the body was whole.
    Gone(axum::Error),
    /// In more frames than [`max_frames`] (which it says).
    TooManyFrames(usize),
}

/// Reads the whole body within BODY_TIMEOUT, MAX_BODY_BYTES, MAX_BODY_MEMORY and
/// [`max_frames`]; the error is the answer. What the body holds of MAX_BODY_MEMORY is returned
/// with it. Its reader is entered under `on`, the connection it came on, so that the connection
/// cap can shed it ([`super::body_readers`]).
pub(super) async fn read_body(
    state: &WebhookState,
    body: Body,
    on: Option<Connection>,
) -> Result<(Bytes, Held), Response> {
    let reading = state.body_readers.enter(on);
    let read = async {
        tokio::select! {
            read = collect(state, body, &reading) => read,
            _ = reading.shed() => Err(Unread::Shed),
        }
    };
    match tokio::time::timeout(state.body_timeout, read).await {
        Ok(Ok(read)) => Ok(read),
        Ok(Err(Unread::TooLarge)) => Err(unread_body(too_large(state))),
        Ok(Err(Unread::OverBudget)) => {
            state.metrics.port_body_memory_refused.inc();
            Err(unread_body(unavailable(state.retry_after_secs)))
        }
        Ok(Err(Unread::Shed)) => {
            state.metrics.port_bodies_shed.inc();
            Err(unread_body(unavailable(state.retry_after_secs)))
        }
        Ok(Err(Unread::Broken(e))) => {
            tracing::debug!(error = %e, "webhook body not read");
            Err(malformed(
                state,
                "the request body could not be read (its chunked framing is broken)".into(),
            ))
        }
        Ok(Err(Unread::Gone(e))) => Err(cut_short(state, &e)),
        Ok(Err(Unread::TooManyFrames(limit))) => Err(malformed(
            state,
            format!("the request body arrived in more than {limit} pieces (chunks, or reads of the connection): send it in fewer"),
        )),
        Err(_) => {
            state.metrics.port_timeout(TimeoutKind::body);
            Err(unread_body(
                (
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive within BODY_TIMEOUT",
                )
                    .into_response(),
            ))
        }
    }
}

/// Reads the body frame by frame, never trusting what `Content-Length` declares. Each frame is
/// copied out at once into the body's own buffer: a frame is a slice of the connection's read
/// buffer, and kept as received it would keep all of that alive (a body sent a byte a chunk,
/// or behind chunk sizes padded with zeros, held kilobytes per byte counted). What the buffer
/// grows by is claimed from MAX_BODY_MEMORY before it grows; it at most doubles, so a body
/// holds under twice what arrived, and exactly that when it came in one frame. A frame past
/// [`max_frames`] ends the reading.
async fn collect(
    state: &WebhookState,
    body: Body,
    reading: &Reading,
) -> Result<(Bytes, Held), Unread> {
    let mut held = state
        .body_memory
        .reserve(0)
        .map_err(|_| Unread::OverBudget)?;
    let mut buffer = BytesMut::new();
    let mut limited = Limited::new(body, state.max_body_bytes);
    let (max_frames, mut frames) = (max_frames(state.max_body_bytes), 0);
    while let Some(frame) = limited.frame().await {
        frames += 1;
        if frames > max_frames {
            return Err(Unread::TooManyFrames(max_frames));
        }
        let frame = frame.map_err(|e| match e.downcast::<LengthLimitError>() {
            Ok(_) => Unread::TooLarge,
            Err(e) if sender_gone(&*e) => Unread::Gone(axum::Error::new(e)),
            Err(e) => Unread::Broken(axum::Error::new(e)),
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let needed = buffer.len() + data.len();
        if needed > buffer.capacity() {
            let doubled = (buffer.capacity() * 2).min(state.max_body_bytes);
            let grown = needed.max(doubled);
            claim(state, reading, &mut held, grown - buffer.capacity()).await?;
            // Exactly `grown`: `reserve` would double past MAX_BODY_BYTES near the end.
            let mut larger = BytesMut::with_capacity(grown);
            larger.extend_from_slice(&buffer);
            buffer = larger;
            // The allocator's rounding, if any, is claimed too.
            if buffer.capacity() > grown {
                claim(state, reading, &mut held, buffer.capacity() - grown).await?;
            }
        }
        buffer.extend_from_slice(&data);
    }
    Ok((buffer.freeze(), held))
}

/// Adds `n` bytes to what the body holds. When the budget cannot cover them, the oldest other
/// readers holding enough between them are shed and their bytes waited for, at most
/// [`SHED_WAIT`]; when no such readers exist, or their bytes do not come back in time, the
/// body is over budget.
async fn claim(
    state: &WebhookState,
    reading: &Reading,
    held: &mut Held,
    n: usize,
) -> Result<(), Unread> {
    let budget = &state.body_memory;
    if held.grow(budget, n).is_err() {
        let lacking = n.saturating_sub(budget.available());
        if lacking > 0 && reading.shed_others_for(lacking) == 0 {
            return Err(Unread::OverBudget);
        }
        let more = budget
            .reserve_within(n, SHED_WAIT)
            .await
            .map_err(|_| Unread::OverBudget)?;
        held.add(more);
    }
    reading.holds(held.bytes());
    Ok(())
}

/// A body refused for its framing (400, the connection closed): counted as
/// `outcome="malformed"`, logged at a bounded rate, `why` said to the sender.
fn malformed(state: &WebhookState, why: String) -> Response {
    state.metrics.webhook(WebhookOutcome::malformed);
    if let Some(left_out) = REFUSALS_LOG.allow() {
        tracing::warn!(reason = %why, left_out, "webhook refused");
    }
    unread_body((StatusCode::BAD_REQUEST, why).into_response())
}

/// Whether a body's error says its sender is gone: the connection ended (hyper's incomplete
/// body, an unexpected end of file) or was reset before the body was whole.
fn sender_gone(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            );
        }
        cause = e.source();
    }
    false
}

/// A body its sender stopped sending by closing the connection: nothing malformed, nothing to
/// store. Counted as `outcome="aborted"`, logged at DEBUG as the port's other connections
/// that end early are; a sender that only closed its side still reads a 400 saying so.
fn cut_short(state: &WebhookState, e: &axum::Error) -> Response {
    state.metrics.webhook(WebhookOutcome::aborted);
    tracing::debug!(error = %e, "webhook body cut short: the sender closed its connection");
    unread_body(
        (
            StatusCode::BAD_REQUEST,
            "the connection closed before the request body was whole",
        )
            .into_response(),
    )
}
