//! The client for Sume's status endpoint, `GET {base}/jobs/{id}/status`.
//!
//! It makes exactly one request per call and reports what came back, rate-limit headers
//! included; deciding when to call again (budgets, `Retry-After`, backoff) is the caller's job.

use std::time::Duration;

use http::{HeaderMap, StatusCode};
use thiserror::Error;

use crate::{JobObject, Secret};

/// What the rate-limit headers of an answer said. Absent or unreadable headers are `None`.
///
/// Sume's docs: limits are per key (reads 120 a minute and 10,000 a day), every answer carries
/// `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`, and a 429 carries
/// `Retry-After`, all in whole numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests the key may make in the current window (`RateLimit-Limit`).
    pub limit: Option<u32>,
    /// Requests left in the current window (`RateLimit-Remaining`); `Some(0)` means the next
    /// call before `reset` will likely be refused.
    pub remaining: Option<u32>,
    /// Time until the window resets (`RateLimit-Reset`, seconds).
    pub reset: Option<Duration>,
    /// `Retry-After` (seconds) on a 429 or 503.
    pub retry_after: Option<Duration>,
}

/// The longest pause any rate-limit header can ask for: Sume's longest window is a day, so a
/// larger value is a mistake (or an attack on the fleet's budget), read as a day.
pub const LONGEST_PAUSE: Duration = Duration::from_secs(86_400);

/// A `RateLimit-Reset` at least this large is a Unix time (1 January 2001 or later), not a
/// number of seconds: no window is 31 years long.
const EPOCH_FROM: u64 = 978_307_200;

impl RateLimit {
    /// Reads the four headers from any answer, whatever its status. Names match in any case.
    /// See [`RateLimit::read`] for how times are read.
    pub fn from_headers(headers: &HeaderMap) -> RateLimit {
        RateLimit::read(headers, std::time::SystemTime::now())
    }

    /// Reads the four headers as of `now`. Counts past `u32::MAX` are clamped to it.
    /// `Retry-After` is seconds or an HTTP date; `RateLimit-Reset` is seconds, or a Unix time
    /// when it is that large. Every pause is capped at [`LONGEST_PAUSE`], and a time in the past
    /// reads as no pause; anything else unreadable is `None`.
    pub fn read(headers: &HeaderMap, now: std::time::SystemTime) -> RateLimit {
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let num = |name: &str| text(name).and_then(|v| v.parse::<u64>().ok());
        let until = |at: std::time::SystemTime| at.duration_since(now).unwrap_or_default();
        let reset = num("ratelimit-reset").map(|n| match n {
            n if n >= EPOCH_FROM => until(std::time::UNIX_EPOCH + Duration::from_secs(n)),
            n => Duration::from_secs(n),
        });
        let retry_after = text("retry-after").and_then(|v| match v.parse::<u64>() {
            Ok(secs) => Some(Duration::from_secs(secs)),
            Err(_) => httpdate::parse_http_date(v).ok().map(until),
        });
        RateLimit {
            limit: num("ratelimit-limit").map(|n| n.min(u32::MAX as u64) as u32),
            remaining: num("ratelimit-remaining").map(|n| n.min(u32::MAX as u64) as u32),
            reset: reset.map(|d| d.min(LONGEST_PAUSE)),
            retry_after: retry_after.map(|d| d.min(LONGEST_PAUSE)),
        }
    }
}

/// What one status call found.
#[derive(Debug, Clone, PartialEq)]
pub enum StatusOutcome {
    /// 200 with a readable job object; its `status` still has to go through
    /// [`Status::parse`](crate::Status::parse).
    Found(JobObject),
    /// This key cannot see the job: another member's, another workspace's, or no such job.
    NotFound,
    /// 401: the key is missing or unknown to Sume (a configuration problem, not a job's).
    Unauthorized,
    /// 429: the key's budget is spent; [`StatusReply::rate`] says when to try again.
    RateLimited,
    /// 5xx: try again later.
    ServerError,
    /// Anything else (402, 403, an unreadable 200 ...), with the status code.
    Unexpected(String),
}

/// One HTTP answer to a status call, whatever its status code.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusReply {
    /// The status code as answered, kept for logs and metrics beside the classified `outcome`.
    pub http_status: u16,
    /// What the answer means for the job.
    pub outcome: StatusOutcome,
    /// The rate-limit headers of this answer; present on successes too, so a caller can slow
    /// down before it is refused.
    pub rate: RateLimit,
    /// Sume's `request_id` from an error answer's envelope, for a support request.
    pub request_id: Option<String>,
}

/// The most of an answer's body read: a job object or an error envelope is a few KiB, so
/// anything past this (a misconfigured URL answering a web page, a hostile proxy) is cut.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

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

/// A cheap-to-clone client bound to one base URL (e.g. `https://www.sume.so/api/v1`).
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
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok(StatusClient { http, base })
    }

    /// `GET {base}/jobs/{job_id}/status` with `key` as a bearer token; `job_id` is
    /// percent-encoded as one path segment. Every HTTP answer, error statuses included, is
    /// `Ok`; `Err` means none came back.
    pub async fn job_status(&self, key: &Secret, job_id: &str) -> Result<StatusReply, ClientError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|_| ClientError::BadUrl(self.base.to_string()))?
            .extend(["jobs", job_id, "status"]);
        let response = self
            .http
            .get(url)
            .bearer_auth(key.expose())
            .send()
            .await
            .map_err(classify)?;
        let status = response.status();
        let rate = RateLimit::from_headers(response.headers());
        let body = read_capped(response, MAX_ANSWER_BYTES).await?;
        let request_id = (!status.is_success())
            .then(|| serde_json::from_slice::<crate::ErrorEnvelope>(&body).ok())
            .flatten()
            .and_then(|e| e.request_id);
        let outcome = match status {
            StatusCode::OK => match serde_json::from_slice::<JobObject>(&body) {
                Ok(job) => StatusOutcome::Found(job),
                Err(e) => StatusOutcome::Unexpected(format!("200 with unreadable body: {e}")),
            },
            StatusCode::NOT_FOUND => StatusOutcome::NotFound,
            StatusCode::UNAUTHORIZED => StatusOutcome::Unauthorized,
            StatusCode::TOO_MANY_REQUESTS => StatusOutcome::RateLimited,
            s if s.is_server_error() => StatusOutcome::ServerError,
            s => StatusOutcome::Unexpected(s.as_u16().to_string()),
        };
        Ok(StatusReply {
            http_status: status.as_u16(),
            outcome,
            rate,
            request_id,
        })
    }
}

impl StatusClient {
    /// The base URL calls go to (SUME_API_URL).
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// One cheap authenticated read that must answer 200 when the base URL and `key` are
    /// right: `GET {base}/jobs?limit=1` (the workspace's newest job). A 404 here means the URL
    /// is wrong (no such route), a 401 or 403 that the key is: while this fails, a 404 about a
    /// job proves nothing.
    pub async fn check_key(&self, key: &Secret) -> Result<KeyCheck, ClientError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|_| ClientError::BadUrl(self.base.to_string()))?
            .push("jobs");
        url.query_pairs_mut().append_pair("limit", "1");
        let response = self
            .http
            .get(url)
            .bearer_auth(key.expose())
            .send()
            .await
            .map_err(classify)?;
        let status = response.status();
        let rate = RateLimit::from_headers(response.headers());
        let body = read_capped(response, MAX_ANSWER_BYTES).await?;
        let json = serde_json::from_slice::<serde_json::Value>(&body).ok();
        let request_id = json
            .as_ref()
            .and_then(|v| v.get("request_id"))
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        Ok(KeyCheck {
            http_status: status.as_u16(),
            usable: status == StatusCode::OK && json.is_some_and(|v| v.is_object()),
            rate,
            request_id,
        })
    }
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
    /// Sume's `request_id`, when the answer carries one.
    pub request_id: Option<String>,
}

/// Reads at most `limit` bytes of a body; the rest is dropped unread (the connection closes).
async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ClientError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(classify)? {
        let room = limit - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == limit {
            break;
        }
    }
    Ok(body)
}

fn classify(e: reqwest::Error) -> ClientError {
    if e.is_timeout() {
        ClientError::Timeout
    } else {
        ClientError::Transport(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rate_limit_headers() {
        let mut h = HeaderMap::new();
        h.insert("RateLimit-Limit", "120".parse().unwrap());
        h.insert("RateLimit-Remaining", "0".parse().unwrap());
        h.insert("RateLimit-Reset", "17".parse().unwrap());
        h.insert("Retry-After", "3".parse().unwrap());
        let r = RateLimit::from_headers(&h);
        assert_eq!(r.limit, Some(120));
        assert_eq!(r.remaining, Some(0));
        assert_eq!(r.reset, Some(Duration::from_secs(17)));
        assert_eq!(r.retry_after, Some(Duration::from_secs(3)));
        assert_eq!(
            RateLimit::from_headers(&HeaderMap::new()),
            RateLimit::default()
        );
    }

    #[test]
    fn refuses_a_bad_base() {
        assert!(StatusClient::new("not a url", Duration::from_secs(1)).is_err());
        assert!(StatusClient::new("ftp://x/api", Duration::from_secs(1)).is_err());
        assert!(StatusClient::new("http://127.0.0.1:1/api/v1/", Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn odd_rate_limit_headers_are_capped_and_read_as_times() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_790_000_000);
        let read = |pairs: &[(&'static str, String)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            RateLimit::read(&h, now)
        };
        // Near u64::MAX seconds: a day, not an overflow.
        let r = read(&[("retry-after", u64::MAX.to_string())]);
        assert_eq!(r.retry_after, Some(LONGEST_PAUSE));
        // An epoch as the reset: the time until then, not decades.
        let r = read(&[("ratelimit-reset", "1790000030".into())]);
        assert_eq!(r.reset, Some(Duration::from_secs(30)));
        let r = read(&[("ratelimit-reset", "1789999999".into())]);
        assert_eq!(
            r.reset,
            Some(Duration::ZERO),
            "a reset in the past is no pause"
        );
        let r = read(&[("ratelimit-reset", "9999999999".into())]);
        assert_eq!(r.reset, Some(LONGEST_PAUSE));
        // Retry-After as an HTTP date.
        let at = httpdate::fmt_http_date(now + Duration::from_secs(120));
        let r = read(&[("retry-after", at)]);
        assert_eq!(r.retry_after, Some(Duration::from_secs(120)));
        let r = read(&[("retry-after", "soon".into())]);
        assert_eq!(r.retry_after, None);
    }
}
