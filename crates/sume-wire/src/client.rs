//! What an answer of Sume's status endpoint says: its rate-limit headers ([`RateLimit`]) and
//! its meaning for the job ([`StatusOutcome`], [`StatusReply`]). The HTTP client that gets
//! them is `status_client.rs`, behind the `client` feature.

use std::time::Duration;

use http::HeaderMap;

use crate::JobObject;

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

/// How long a 429 that names no usable wait is waited out.
pub const DEFAULT_429_WAIT: Duration = Duration::from_secs(60);

impl RateLimit {
    /// How long to wait after a 429: `Retry-After`, else `RateLimit-Reset`, else
    /// [`DEFAULT_429_WAIT`]. A wait that reads as none (`Retry-After: 0`, a date already past,
    /// `RateLimit-Reset: 0`) is no wait to a refusal: asking again at once is the tight loop
    /// Sume's docs forbid, so it counts as unsaid.
    pub fn wait_after_429(&self) -> Duration {
        let some = |d: Option<Duration>| d.filter(|d| !d.is_zero());
        some(self.retry_after)
            .or(some(self.reset))
            .unwrap_or(DEFAULT_429_WAIT)
    }

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
    /// Sume's id of this answer, for a support request: its `X-Request-Id` (a 200 too), else
    /// the `request_id` of an error answer's envelope.
    pub request_id: Option<String>,
    /// What of a 200 was left unread, said beside its status (`"body cut at 1048576 bytes:
    /// result left out"`, its body past `MAX_ANSWER_BYTES`); `None` for an answer read whole.
    pub left_out: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 429 whose wait reads as none (`Retry-After: 0`, a date already past, a reset of 0)
    /// is waited out as one that names none: a tight loop of refusals was the alternative.
    #[test]
    fn a_429_asking_for_no_wait_is_waited_out_all_the_same() {
        let secs = |n| Some(Duration::from_secs(n));
        let wait = |retry_after, reset| {
            RateLimit {
                retry_after,
                reset,
                ..RateLimit::default()
            }
            .wait_after_429()
        };
        assert_eq!(wait(secs(7), secs(30)), Duration::from_secs(7));
        assert_eq!(wait(secs(0), secs(30)), Duration::from_secs(30));
        assert_eq!(wait(secs(0), secs(0)), DEFAULT_429_WAIT);
        assert_eq!(wait(None, None), DEFAULT_429_WAIT);
    }

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
