//! One request on a port's connection ([`super::Server::handle`]): MAX_IN_FLIGHT (a webhook
//! reading its body shed for the newcomer at the limit, else `503` with `Retry-After`), the
//! probes outside it, and the routes, with the request's peer, its connection and, on the admin
//! port, its body bounded by BODY_TIMEOUT. Whether the request's body was read to its end is
//! told to its connection, whose close lingers when it was not ([`crate::http::linger`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue, Method, Request, Response, StatusCode};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper::service::Service;
use hyper_util::service::TowerToHyperService;
use tokio::time::Instant;

use super::Server;
use crate::http::body_readers::Connection;
use crate::http::linger::ReadToEnd;
use crate::http::timed_body::{self, Expired, TimedBody};
use crate::http::timed_io::{ConnState, ResponseDone, Tracked};
use crate::metrics::TimeoutKind;

/// How long a newcomer waits for the slot of a request it shed (its handler answers at once).
const SHED_WAIT: Duration = Duration::from_millis(500);

impl Server {
    /// One request: refused at once beyond MAX_IN_FLIGHT, else routed.
    pub(super) async fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
        conn: Arc<ConnState>,
        peer: SocketAddr,
        on: Connection,
    ) -> Result<Response<Tracked>, Infallible> {
        conn.request_started(!hyper::body::Body::is_end_stream(request.body()));
        let done = ResponseDone::new(conn.clone());
        // The probes answer from memory: MAX_IN_FLIGHT deliveries waiting on a slow database
        // must not fail the liveness probe (an orchestrator would restart a healthy process).
        if is_probe(&request) {
            let response = self.route(request, peer, on, conn).await;
            return Ok(response.map(|body| Tracked::new(body, done)));
        }
        let permit = match self.in_flight.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => self.shed_a_body_reader().await,
        };
        let response = match permit {
            Some(_permit) => self.route(request, peer, on, conn).await,
            None => {
                self.metrics.in_flight_refused.inc();
                overloaded(self.retry_after_secs)
            }
        };
        Ok(response.map(|body| Tracked::new(body, done)))
    }

    /// Hands the request to the routes, with its peer's address, the connection it came on
    /// and, where the server keeps BODY_TIMEOUT, its body bounded (a body cut by it is answered
    /// 408, whatever the handler made of the error, and the connection closed). The body tells
    /// `conn` once it is read to its end: one left unread makes the close linger.
    async fn route(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
        on: Connection,
        conn: Arc<ConnState>,
    ) -> Response<Body> {
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(ConnectInfo(peer));
        parts.extensions.insert(on);
        let (body, expired) = match self.body_timeout {
            Some(timeout) => {
                let (body, expired) = TimedBody::new(body, Instant::now() + timeout);
                (Body::new(ReadToEnd::new(body, conn)), expired)
            }
            None => (Body::new(ReadToEnd::new(body, conn)), Expired::default()),
        };
        let routed =
            TowerToHyperService::new(self.app.clone()).call(Request::from_parts(parts, body));
        let response = match routed.await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        if !expired.happened() {
            return response;
        }
        self.metrics.timeout(TimeoutKind::body);
        timed_body::late(&response)
    }

    /// At MAX_IN_FLIGHT: sheds the oldest request still reading its body and takes its slot.
    async fn shed_a_body_reader(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if !self.body_readers.shed_oldest() {
            return None;
        }
        let slot = self.in_flight.clone().acquire_owned();
        tokio::time::timeout(SHED_WAIT, slot).await.ok()?.ok()
    }
}

/// `GET` or `HEAD` of `/healthz` or `/readyz`, which read only what is in memory.
fn is_probe<B>(request: &Request<B>) -> bool {
    matches!(*request.method(), Method::GET | Method::HEAD)
        && matches!(request.uri().path(), "/healthz" | "/readyz")
}

fn overloaded(retry_after_secs: u64) -> Response<Body> {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        "too many requests in flight; retry later",
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}
