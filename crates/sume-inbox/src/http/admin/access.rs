//! What every admin request passes through, outermost first:
//!
//! 1. a request id: the caller's `X-Request-Id` when it is a short token, else a new one; it
//!    is on every answer, in every error's body and in the request's log line;
//! 2. the `Host` check: a loopback port is still reachable from a browser through DNS
//!    rebinding (a page whose name resolves to 127.0.0.1), so only the admin address itself,
//!    `localhost` on its port and the names of ADMIN_HOSTS are answered (the authority of an
//!    absolute-form target stands for `Host`, and two `Host` headers are refused);
//! 3. writes must say `Content-Type: application/json`, once (a browser cannot send that to
//!    another origin without asking first), and one whose `Content-Length` is over
//!    [`super::MAX_WRITE_BYTES`] is refused at once, its body left unread and its connection
//!    closed;
//! 4. the token and its scope: with ADMIN_TOKEN set, the operator's token opens every route,
//!    ADMIN_APP_TOKEN only the application's (register, read, wait, the feed); a request
//!    without the one `Authorization` header holding either is answered 401 with
//!    `WWW-Authenticate: Bearer`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rand::Rng;
use sha2::{Digest, Sha256};
use sume_wire::Secret;
use tracing::Instrument;

use crate::http::ApiError;

tokio::task_local! {
    /// The id of the admin request being handled, for error bodies.
    pub(crate) static REQUEST_ID: String;
}

/// The request id of the admin request this task is handling, if any.
pub fn current_request_id() -> Option<String> {
    REQUEST_ID.try_with(|id| id.clone()).ok()
}

/// Who a token says the caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The application: register, read, wait, the feed.
    App,
    /// The operator: everything.
    Operator,
}

impl Scope {
    /// As the audit table records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::App => "app",
            Scope::Operator => "operator",
        }
    }
}

/// The tokens and names the admin API accepts.
#[derive(Debug, Clone)]
pub struct Access {
    /// ADMIN_TOKEN; `None`: no token is asked for (loopback only).
    pub operator: Option<Secret>,
    /// ADMIN_APP_TOKEN.
    pub app: Option<Secret>,
    /// Accepted `Host` values (lower case, with port); `None`: any (a wildcard address).
    pub hosts: Option<Vec<String>>,
    /// Bound to a wildcard address, its port ([`Access::wildcard_port`]): an IP address or
    /// `localhost` on it names this instance, whatever `hosts` lists.
    pub wildcard_port: Option<u16>,
}

impl Access {
    /// The hosts a daemon bound at `bound` answers: its address, `localhost` on its port, and
    /// `extra` (ADMIN_HOSTS, each as given and with the port). Bound to a wildcard address
    /// (0.0.0.0), where a token is required anyway, any host unless `extra` names some.
    pub fn hosts_for(bound: SocketAddr, extra: &[String]) -> Option<Vec<String>> {
        let port = bound.port();
        let mut hosts: Vec<String> = Vec::new();
        for h in extra {
            hosts.push(h.clone());
            if !h.contains(':') {
                hosts.push(format!("{h}:{port}"));
            }
        }
        if bound.ip().is_unspecified() {
            return (!hosts.is_empty()).then_some(hosts);
        }
        hosts.push(bound.to_string());
        if bound.ip().is_loopback() {
            hosts.extend([format!("localhost:{port}"), format!("127.0.0.1:{port}")]);
            hosts.push(format!("[::1]:{port}"));
        }
        Some(hosts)
    }

    /// The port of a daemon bound at `bound`, when that is a wildcard address (`0.0.0.0`, `[::]`):
    /// then every address of the machine is the admin address itself, so a `Host` naming one
    /// of them (or `localhost`) on this port is answered even when ADMIN_HOSTS narrows the
    /// names (a scraper reaching a pod by its IP, the CLI on `127.0.0.1`). No DNS rebinding
    /// can send such a `Host`: a rebinding page is reached under a name of its own.
    pub fn wildcard_port(bound: SocketAddr) -> Option<u16> {
        bound.ip().is_unspecified().then_some(bound.port())
    }

    /// Whether a request with this `Host` header is answered (see [`Access::hosts_for`] and
    /// [`Access::wildcard_port`]).
    pub fn host_allowed(&self, host: Option<&str>) -> bool {
        let host = host.unwrap_or("").to_ascii_lowercase();
        let own = self.wildcard_port.is_some_and(|port| {
            host == format!("localhost:{port}")
                || host.parse::<SocketAddr>().is_ok_and(|a| a.port() == port)
        });
        own || self
            .hosts
            .as_ref()
            .is_none_or(|hosts| hosts.contains(&host))
    }

    /// The scope of the token of the request's `Authorization` header, or why it has none. A
    /// request carrying several is refused, whatever they hold: which one a proxy in front
    /// read, or added, is anyone's guess.
    fn scope(&self, headers: &HeaderMap) -> Result<Scope, ApiError> {
        let Some(operator) = &self.operator else {
            return Ok(Scope::Operator);
        };
        let all: Vec<&HeaderValue> = headers.get_all(header::AUTHORIZATION).iter().collect();
        if all.len() > 1 {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                format!(
                    "a request carries one Authorization header, this one carries {}: send \
                     one, Bearer and the token",
                    all.len()
                ),
            ));
        }
        let given = all
            .first()
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token);
        match given {
            Some(t) if same_secret(t, operator.expose()) => Ok(Scope::Operator),
            Some(t)
                if self
                    .app
                    .as_ref()
                    .is_some_and(|a| same_secret(t, a.expose())) =>
            {
                Ok(Scope::App)
            }
            _ => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing or wrong bearer token",
            )),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header. The scheme's name is
/// case-insensitive (RFC 9110, 11.1), so `bearer` and `BEARER` are read too.
fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Compares digests rather than the strings, so the time taken says nothing about the token.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    Sha256::digest(a.as_bytes()) == Sha256::digest(b.as_bytes())
}

/// The caller's id when it is 1 to 64 characters of `[A-Za-z0-9._-]`, else a new one.
pub(crate) fn request_id(request: &Request) -> String {
    let given = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            (1..=64).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        });
    match given {
        Some(id) => id.to_owned(),
        None => format!("req_{:016x}", rand::thread_rng().gen::<u64>()),
    }
}

/// The outermost layer: the request id, the checks that need no route, and the log line.
pub async fn guard(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    let id = request_id(&request);
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    // The span puts the request id on every log line written while the request is handled.
    let span = tracing::info_span!("admin", request_id = %id);
    let mut response = REQUEST_ID
        .scope(
            id.clone(),
            async {
                match check(&access, &request) {
                    Ok(scope) => {
                        let mut request = request;
                        request.extensions_mut().insert(scope);
                        next.run(request).await
                    }
                    Err(e) => refused(e, &request),
                }
            }
            .instrument(span),
        )
        .await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", v);
    }
    let status = response.status().as_u16();
    // Whole microseconds, so the field reads 0.489 rather than 0.48982500000000007.
    let ms = started.elapsed().as_micros() as f64 / 1000.0;
    tracing::info!(request_id = %id, %method, %path, status, ms, "admin request");
    response
}

/// A refusal made from the head alone. One for a body too large to read leaves that body on
/// the wire: the connection cannot carry another request, so it closes after the answer and
/// says so, lest the client send its next request on it. A 401 says the scheme it wants
/// (`WWW-Authenticate`, which RFC 9110 requires of it), and that the token given was refused
/// when one was (RFC 6750's `invalid_token`).
fn refused(e: ApiError, request: &Request) -> Response {
    let unread = e.status == StatusCode::PAYLOAD_TOO_LARGE;
    let challenge = (e.status == StatusCode::UNAUTHORIZED).then(|| {
        if request.headers().contains_key(header::AUTHORIZATION) {
            HeaderValue::from_static(WRONG_TOKEN_CHALLENGE)
        } else {
            HeaderValue::from_static(CHALLENGE)
        }
    });
    let mut answer = e.into_response();
    if unread {
        answer
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    if let Some(challenge) = challenge {
        answer
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    answer
}

/// `WWW-Authenticate` of a 401 to a request without a token.
pub const CHALLENGE: &str = r#"Bearer realm="sume-inbox""#;
/// `WWW-Authenticate` of a 401 to a request whose token was refused.
pub const WRONG_TOKEN_CHALLENGE: &str = r#"Bearer realm="sume-inbox", error="invalid_token""#;

/// Webhooks sent to the admin port are logged at most this often.
static MISROUTED_LOG: crate::process::log_budget::LogBudget =
    crate::process::log_budget::LogBudget::new(1, std::time::Duration::from_secs(10));

/// Sume's webhooks sent here (a `webhook_url` naming ADMIN_ADDR's port), the Host, the content
/// type of a write, and the token's scope.
fn check(access: &Access, request: &Request) -> Result<Scope, ApiError> {
    let header = |name| {
        request
            .headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let signed = request
        .headers()
        .contains_key(sume_wire::headers::SIGNATURE);
    if request.method() == Method::POST && signed {
        if let Some(left_out) = MISROUTED_LOG.allow() {
            let path: String = request.uri().path().chars().take(200).collect();
            tracing::warn!(?path, left_out, "a POST with Sume's signature reached ADMIN_ADDR: the webhook_url Sume sends to names the admin port; webhooks are received on LISTEN_ADDR");
        }
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "this is the admin API: Sume's webhooks go to POST /webhooks/sume on LISTEN_ADDR",
        ));
    }
    host_check(access, request)?;
    let scope = access.scope(request.headers())?;
    // Every write of the API is a POST; another method is the router's 405, whatever its body.
    let write = request.method() == Method::POST;
    if write {
        super::content_type::json_content_type(request.headers())?;
    }
    let encoding = header(header::CONTENT_ENCODING).map(str::trim);
    if let Some(coding) = encoding.filter(|c| write && !c.eq_ignore_ascii_case("identity")) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("a write is read as sent: Content-Encoding {coding:?} is not decoded"),
        ));
    }
    let declared = header(header::CONTENT_LENGTH).and_then(|n| n.trim().parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| write && *n > super::MAX_WRITE_BYTES as u64) {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_body",
            format!(
                "a write's body is at most 2 MiB ({} bytes); its Content-Length says {n}",
                super::MAX_WRITE_BYTES
            ),
        ));
    }
    Ok(scope)
}

/// The `Host` check of the admin API and the console alike: the host the request names
/// ([`host`]) must be one [`Access::host_allowed`] takes (`421 unknown_host`), and a request
/// naming two is refused (`400 invalid_host`).
pub(crate) fn host_check(access: &Access, request: &Request) -> Result<(), ApiError> {
    let host = host(request)?;
    if !access.host_allowed(host) {
        let host = host.unwrap_or("").to_ascii_lowercase();
        return Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "unknown_host",
            format!("Host {host:?} is not this admin API's address (see ADMIN_HOSTS)"),
        ));
    }
    Ok(())
}

/// The host a request names, for the `Host` check: the authority of an absolute-form target
/// (`GET http://host:port/path`), which replaces `Host` (RFC 9112, 3.2.2), else the one `Host`
/// header. More than one `Host` header is refused (RFC 9112, 3.2): which one a proxy in front
/// read is anyone's guess.
fn host(request: &Request) -> Result<Option<&str>, ApiError> {
    let headers: Vec<&HeaderValue> = request.headers().get_all(header::HOST).iter().collect();
    if headers.len() > 1 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_host",
            format!(
                "a request carries one Host header, this one carries {}: send one, naming the admin address",
                headers.len()
            ),
        ));
    }
    if let Some(authority) = request.uri().authority() {
        return Ok(Some(authority.as_str()));
    }
    Ok(headers.first().and_then(|v| v.to_str().ok()))
}

/// The layer of the operator's routes: the application's token is not enough.
pub async fn operator_only(request: Request, next: Next) -> Response {
    match request.extensions().get::<Scope>() {
        Some(Scope::Operator) => next.run(request).await,
        _ => ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this route needs the operator's token (ADMIN_TOKEN)",
        )
        .into_response(),
    }
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
