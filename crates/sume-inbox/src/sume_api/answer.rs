//! One key's answer about one job, as the sweep's decisions read it: [`Answer`], what it
//! [`Reply`]s, read from a status call's reply.

use std::time::Duration;

use sume_wire::{ClientError, JsonText, StatusOutcome, StatusReply};

/// One key's answer about one job, as the decisions read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// As recorded: `"200 running"`, `"404"`, `"429"`, `"307 to \"...\""`, `"timeout"`,
    /// `"error: ..."`.
    pub text: String,
    /// What it says.
    pub reply: Reply,
}

/// What an answer says.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The key can read the job; its status as spelt by Sume, and its result.
    Found {
        /// The status as spelt by Sume.
        status: String,
        /// The job's result or error, when it has one, as the answer's JSON text.
        result: Option<JsonText>,
    },
    /// 404: this key cannot see the job.
    NotFound,
    /// 429: ask again after `retry_in` (`Retry-After`, else `RateLimit-Reset`, else a minute).
    RateLimited {
        /// How long to wait.
        retry_in: Duration,
    },
    /// 402 (out of credits) or 403 (the key lacks the scope): the account's or the key's
    /// state, never the job's. Inconclusive like [`Reply::Failed`], and besides no give-up
    /// is decided on it: the job waits, however old, until reads work again.
    Refused,
    /// Anything else: 401, 5xx, a redirect (not followed), an unexpected answer, a timeout, a
    /// transport error.
    Failed,
}

impl Answer {
    /// Reads a status call's reply.
    pub fn read(reply: Result<StatusReply, ClientError>) -> Answer {
        match reply {
            Ok(r) => {
                let (text, reply) = match r.outcome {
                    // What of the answer was not read (a body cut: its result) is said
                    // beside the status.
                    StatusOutcome::Found(job) => (
                        match &r.left_out {
                            None => format!("{} {}", r.http_status, job.status),
                            Some(what) => format!("{} {} ({what})", r.http_status, job.status),
                        },
                        Reply::Found {
                            result: job.outcome_text(),
                            status: job.status,
                        },
                    ),
                    StatusOutcome::NotFound => (r.http_status.to_string(), Reply::NotFound),
                    StatusOutcome::RateLimited => (
                        r.http_status.to_string(),
                        Reply::RateLimited {
                            retry_in: r.rate.wait_after_429(),
                        },
                    ),
                    _ if matches!(r.http_status, 402 | 403) => {
                        (r.http_status.to_string(), Reply::Refused)
                    }
                    // A redirect not followed, a 200 that does not read as a job: what it was.
                    StatusOutcome::Unexpected(what) => (what, Reply::Failed),
                    _ => (r.http_status.to_string(), Reply::Failed),
                };
                Answer { text, reply }
            }
            Err(ClientError::Timeout) => Answer {
                text: "timeout".to_owned(),
                reply: Reply::Failed,
            },
            Err(e) => Answer {
                text: format!("error: {e}"),
                reply: Reply::Failed,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_and_described() {
        let timeout = Answer::read(Err(ClientError::Timeout));
        assert_eq!(timeout.text, "timeout");
        assert_eq!(timeout.reply, Reply::Failed);
    }
}
