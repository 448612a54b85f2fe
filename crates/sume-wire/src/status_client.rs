//! The client for Sume's status endpoint, `GET {base}/jobs/{id}/status`, the check of a key
//! (`GET {base}/jobs?limit=1`) and the job list `reconcile` reads (`GET {base}/jobs?cursor=`). Behind the `client` feature, so that what only parses and
//! verifies (and is fuzzed) builds without an HTTP client.
//!
//! It makes exactly one request per call and reports what came back, rate-limit headers
//! included; deciding when to call again (budgets, `Retry-After`, backoff) is the caller's job.
//!
//! Redirects are not followed. Sume's API answers at its own URL; a `3xx` comes from something
//! in front of it (a proxy, a CDN, a moved or mistyped `SUME_API_URL`), and whatever answers at
//! the place it names says nothing about Sume's jobs: a 404 there is no verdict. A `3xx` is
//! reported as such, with its `Location`, and counts as no answer. A `304 Not Modified` is none:
//! it answers a request holding a validator, which this client never sends, and is recorded as
//! what it is, no answer.

use std::time::Duration;

use http::StatusCode;
use thiserror::Error;

use crate::shown::{redirected, shown_request_id};
use crate::{mend_lone_surrogates, RateLimit, Secret, StatusOutcome, StatusReply};

/// The most of an answer's body read: a job object or an error envelope is a few KiB, so
/// anything past this (a web page, a hostile proxy, a huge result) is cut and left unread.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// The most of a redirect's `Location`, or of the id in an answer about another job, kept for
/// the logs and the recorded answer.
pub(crate) const MAX_SHOWN_CHARS: usize = 200;

/// Why a status call got no HTTP answer at all. An answer with an error status is not a
/// `ClientError` but a [`StatusReply`].
#[derive(Debug, Error)]
pub enum ClientError {
    /// No answer within the client's timeout (connecting or the whole call).
    #[error("status call timed out")]
    Timeout,
    /// The call failed below HTTP (refused connection, TLS, reset, a body cut short), or the
    /// HTTP client could not be built; the text is the underlying error's.
    #[error("status call failed: {0}")]
    Transport(String),
    /// The base URL, as given, is not an absolute `http` or `https` URL that can take a path.
    #[error("bad base URL {0:?}")]
    BadUrl(String),
}

/// Sume's API base as its public docs give it: where a client goes unless told otherwise.
pub const DEFAULT_API_URL: &str = "https://www.sume.so/api/v1";

/// A cheap-to-clone client bound to one base URL (e.g. [`DEFAULT_API_URL`]).
#[derive(Debug, Clone)]
pub struct StatusClient {
    http: reqwest::Client,
    base: reqwest::Url,
}

impl StatusClient {
    /// A client for `base_url` (a trailing `/` is ignored). `timeout` bounds both connecting and
    /// each whole call. Fails with [`ClientError::BadUrl`] for anything but an `http`/`https`
    /// base, so a misconfigured daemon stops at start rather than at its first poll.
    pub fn new(base_url: &str, timeout: Duration) -> Result<StatusClient, ClientError> {
        let base = reqwest::Url::parse(base_url.trim_end_matches('/'))
            .map_err(|_| ClientError::BadUrl(base_url.to_owned()))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(ClientError::BadUrl(base_url.to_owned()));
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("sume-inbox/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok(StatusClient { http, base })
    }

    /// `GET {base}/jobs/{job_id}/status` with `key` as a bearer token; `job_id` is
    /// percent-encoded as one path segment. Every HTTP answer, error statuses included, is
    /// `Ok`; `Err` means none came back. A 200 whose object names another job is
    /// [`StatusOutcome::Unexpected`]: it says nothing about the job asked. A 200's `result`
    /// is read as a webhook's: one no reader here could take is left out, and the status
    /// stands. A 200 past [`MAX_ANSWER_BYTES`] is read up to the cut: its job is found when
    /// its `id` and `status` come before it ([`StatusReply::left_out`] says what was not read),
    /// else it is no answer.
    pub async fn job_status(&self, key: &Secret, job_id: &str) -> Result<StatusReply, ClientError> {
        if !askable_job_id(job_id) {
            return Ok(StatusReply {
                http_status: 0,
                outcome: StatusOutcome::Unexpected(format!(
                    "not asked: the job id {job_id:?} cannot be written in a URL path"
                )),
                rate: RateLimit::default(),
                request_id: None,
                left_out: None,
            });
        }
        let Answered {
            status,
            rate,
            redirect,
            request_id,
            body,
            cut,
            body_kind,
        } = self.get(key, &["jobs", job_id, "status"], &[]).await?;
        let mut left_out = None;
        let outcome = match status {
            StatusCode::OK => {
                let (outcome, left) =
                    crate::status_answer::read_job(&body, cut, job_id, body_kind.as_deref());
                left_out = left;
                outcome
            }
            // Sume's 404 comes in its error envelope; one without (a proxy's page, a route
            // that is not Sume's) says nothing about the job.
            StatusCode::NOT_FOUND if read_json::<crate::ErrorEnvelope>(&body).is_ok() => {
                StatusOutcome::NotFound
            }
            StatusCode::NOT_FOUND => StatusOutcome::Unexpected(
                "404 not in Sume's error envelope: not Sume's word about the job".into(),
            ),
            StatusCode::UNAUTHORIZED => StatusOutcome::Unauthorized,
            StatusCode::TOO_MANY_REQUESTS => StatusOutcome::RateLimited,
            s if s.is_server_error() => StatusOutcome::ServerError,
            // No validator was sent, so a 304 (a cache in front of Sume) answers nothing.
            StatusCode::NOT_MODIFIED => StatusOutcome::Unexpected(NOT_MODIFIED.into()),
            // A redirect says where it pointed; anything else, its code.
            s => StatusOutcome::Unexpected(redirect.unwrap_or_else(|| s.as_u16().to_string())),
        };
        Ok(StatusReply {
            http_status: status.as_u16(),
            outcome,
            rate,
            request_id,
            left_out,
        })
    }
}

impl StatusClient {
    /// One authenticated `GET {base}/{segments...}[?query]` (each segment percent-encoded):
    /// the status, the rate-limit headers, where a redirect pointed and at most
    /// [`MAX_ANSWER_BYTES`] of the body.
    async fn get(
        &self,
        key: &Secret,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<Answered, ClientError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|_| ClientError::BadUrl(self.base.to_string()))?
            .extend(segments);
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in query {
                pairs.append_pair(name, value);
            }
        }
        let response = self
            .http
            .get(url)
            .bearer_auth(key.expose())
            .send()
            .await
            .map_err(classify)?;
        let status = response.status();
        let rate = RateLimit::from_headers(response.headers());
        let header_id = response.headers().get("x-request-id").cloned();
        let redirect = (status.is_redirection() && status != StatusCode::NOT_MODIFIED)
            .then(|| redirected(status, response.headers().get(http::header::LOCATION)));
        let body_kind = crate::shown::body_kind(response.headers());
        let (body, cut) = read_capped(response, MAX_ANSWER_BYTES).await?;
        let request_id = header_id
            .and_then(|v| v.to_str().ok().map(|v| v.trim().to_owned()))
            .filter(|v| !v.is_empty())
            .or_else(|| read_json::<crate::ErrorEnvelope>(&body).ok()?.request_id)
            .map(shown_request_id);
        Ok(Answered {
            status,
            rate,
            redirect,
            request_id,
            body,
            cut,
            body_kind,
        })
    }

    /// The base URL calls go to (SUME_API_URL).
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// One cheap authenticated read that must answer 200 when the base URL and `key` are
    /// right: `GET {base}/jobs?limit=1` (the workspace's newest job). A 404 here means the URL
    /// is wrong (no such route), a 401 or 403 that the key is: while this fails, a 404 about a
    /// job proves nothing.
    pub async fn check_key(&self, key: &Secret) -> Result<KeyCheck, ClientError> {
        let Answered {
            status,
            rate,
            redirect,
            request_id,
            body,
            ..
        } = self.get(key, &["jobs"], &[("limit", "1")]).await?;
        let json = read_json::<serde_json::Value>(&body).ok();
        Ok(KeyCheck {
            http_status: status.as_u16(),
            usable: status == StatusCode::OK && json.as_ref().is_some_and(reads_as_a_list),
            rate,
            request_id,
            redirect,
        })
    }
}

/// Whether a job can be asked about at `/jobs/{id}/status`: not for the ids `.` and `..`,
/// which a URL path cannot carry (they and their escapes are dot segments, removed before a
/// request leaves), so the read would be about another path, and its 404 about nothing.
pub fn askable_job_id(job_id: &str) -> bool {
    !matches!(job_id, "." | "..")
}

/// Whether a key check's 200 reads as a list of jobs: an object holding an array, and no
/// `error` (a proxy's or a mistyped URL's `200 {}`, or an error envelope sent as 200, proves
/// nothing about the key). An `"error": null` beside the list, as many APIs send with every
/// success, is no error. The list's field names are not pinned: only that it is one.
fn reads_as_a_list(v: &serde_json::Value) -> bool {
    v.as_object().is_some_and(|o| {
        o.get("error").is_none_or(serde_json::Value::is_null)
            && o.values().any(serde_json::Value::is_array)
    })
}

impl StatusClient {
    /// One page of the workspace's jobs, `GET {base}/jobs?limit=&cursor=` (and `status=` when
    /// given), newest first. Every HTTP answer is `Ok`; [`ListReply::page`] is `Some` only for
    /// a 200 whose body reads as a list, or, cut at [`MAX_ANSWER_BYTES`], whose `data` began
    /// before the cut ([`JobPage::cut`]: the entries whole before it, and no next page).
    pub async fn list_jobs(
        &self,
        key: &Secret,
        limit: u32,
        cursor: Option<&str>,
        status: Option<&str>,
    ) -> Result<ListReply, ClientError> {
        let limit = limit.to_string();
        let mut query = vec![("limit", limit.as_str())];
        if let Some(c) = cursor {
            query.push(("cursor", c));
        }
        if let Some(s) = status {
            query.push(("status", s));
        }
        let Answered {
            status,
            rate,
            redirect,
            request_id,
            body,
            body_kind,
            cut,
        } = self.get(key, &["jobs"], &query).await?;
        let page = (status == StatusCode::OK)
            .then(|| JobPage::read(&body, cut))
            .flatten();
        Ok(ListReply {
            http_status: status.as_u16(),
            page,
            rate,
            request_id,
            redirect,
            body_kind,
        })
    }
}

pub use crate::job_page::JobPage;

/// What [`StatusClient::list_jobs`] got.
#[derive(Debug, Clone, PartialEq)]
pub struct ListReply {
    /// The status code as answered.
    pub http_status: u16,
    /// The page, for a 200 that reads as one (or as one cut: [`JobPage::cut`]).
    pub page: Option<JobPage>,
    /// The rate-limit headers of the answer.
    pub rate: RateLimit,
    /// Sume's id of this answer: its `X-Request-Id`, else an error envelope's `request_id`.
    pub request_id: Option<String>,
    /// For a `3xx`, not followed: the status and where it pointed (`"307 to \"...\""`).
    pub redirect: Option<String>,
    /// Its `Content-Encoding` and `Content-Type` when they say the body may not be JSON as
    /// sent (`"Content-Type text/html"`): why a 200 may hold no page.
    pub body_kind: Option<String>,
}

/// What [`StatusClient::check_key`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyCheck {
    /// The status code as answered.
    pub http_status: u16,
    /// 200 with a JSON object: the URL and the key work.
    pub usable: bool,
    /// The rate-limit headers of the answer (the check is a read like any other).
    pub rate: RateLimit,
    /// Sume's id of this answer: its `X-Request-Id`, else an error envelope's `request_id`.
    pub request_id: Option<String>,
    /// For a `3xx`, not followed: the status and where it pointed (`"307 to https://..."`).
    pub redirect: Option<String>,
}

/// What one call got back.
struct Answered {
    status: StatusCode,
    rate: RateLimit,
    /// For a `3xx`: the status and where it pointed, as [`redirected`] writes it.
    redirect: Option<String>,
    /// The id Sume gave this answer: its `X-Request-Id` (sent with every answer, a 200 too),
    /// else the `request_id` of an error answer's envelope.
    request_id: Option<String>,
    body: Vec<u8>,
    /// Whether more came than [`MAX_ANSWER_BYTES`]: `body` holds only the first of it.
    cut: bool,
    /// Its `Content-Encoding` and `Content-Type`, when they say the body may not be JSON as
    /// sent ([`crate::shown::body_kind`]).
    body_kind: Option<String>,
}

/// What a `304 Not Modified` is recorded as: the client sends no validator (`If-None-Match`,
/// `If-Modified-Since`), so it is no answer, from something in front of Sume.
pub(crate) const NOT_MODIFIED: &str =
    "304 Not Modified to a request that sent no validator: no answer";

/// Reads at most `limit` bytes of a body, and whether more came; the rest is dropped unread
/// (the connection closes).
async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), ClientError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(classify)? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

fn classify(e: reqwest::Error) -> ClientError {
    if e.is_timeout() {
        ClientError::Timeout
    } else {
        ClientError::Transport(error_chain(&e))
    }
}

/// An error with its causes, `: ` between each: reqwest's own text ("error sending request for
/// url (...)") leaves out what went wrong (a refused connection, a name that does not resolve,
/// a certificate refused), which only its sources say. A cause whose text the line already
/// holds is left out.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

/// Reads an answer's JSON; one `serde_json` refuses for a lone surrogate in a string (a caption
/// cut by UTF-16 code units: see [`crate::surrogates`]) is read again with each mended into
/// U+FFFD, so the job it describes can still close.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> serde_json::Result<T> {
    serde_json::from_slice(body).or_else(|e| match std::str::from_utf8(body) {
        Ok(text) => match mend_lone_surrogates(text) {
            std::borrow::Cow::Owned(mended) => serde_json::from_str(&mended),
            std::borrow::Cow::Borrowed(_) => Err(e),
        },
        Err(_) => Err(e),
    })
}

#[cfg(test)]
#[path = "status_client_tests.rs"]
mod tests;
