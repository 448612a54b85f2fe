//! The create call at Sume: one `POST {api}/videos/generations` with the order id as its
//! `Idempotency-Key`, retried on transport errors, 429 and 5xx (a retry never makes a second
//! job), answering the job id of the `202`.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use super::{Submission, SubmitClient, SubmitError};

impl SubmitClient {
    /// The create call alone: answers the job id of the `202`. Retries what is worth retrying
    /// with the same `Idempotency-Key` (the order id).
    pub async fn create_job(&self, submission: &Submission) -> Result<String, SubmitError> {
        let url = format!(
            "{}/{}",
            self.config.api_url.trim_end_matches('/'),
            self.config.endpoint.trim_start_matches('/')
        );
        let body = self.create_body(submission)?;
        let attempts = self.config.create_attempts.max(1);
        let mut attempt = 1;
        loop {
            let sent = self
                .http
                .post(&url)
                .bearer_auth(self.config.api_key.expose())
                .header("idempotency-key", &submission.order_id)
                .json(&body)
                .send()
                .await;
            let retry_in = match sent {
                Ok(response) if response.status().is_success() => {
                    let answer: Value =
                        response.json().await.map_err(|source| SubmitError::Http {
                            step: "reading the create answer",
                            source,
                        })?;
                    return job_id_of(&answer)
                        .ok_or_else(|| SubmitError::NoJobId(answer.to_string()));
                }
                Ok(response) if retryable(response.status()) && attempt < attempts => {
                    retry_after(&response).unwrap_or(Duration::from_millis(200) * attempt)
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let body = response.text().await.unwrap_or_default();
                    return Err(SubmitError::Refused {
                        step: "the create call",
                        status,
                        body,
                    });
                }
                Err(_) if attempt < attempts => Duration::from_millis(200) * attempt,
                Err(source) => {
                    return Err(SubmitError::Http {
                        step: "the create call",
                        source,
                    })
                }
            };
            tokio::time::sleep(retry_in).await;
            attempt += 1;
        }
    }

    /// The create call's body: the generation request with this client's `webhook_url` and the
    /// submission's `sim` overrides added.
    fn create_body(
        &self,
        submission: &Submission,
    ) -> Result<serde_json::Map<String, Value>, SubmitError> {
        let mut body = match &submission.request {
            Value::Object(fields) => fields.clone(),
            Value::Null => serde_json::Map::new(),
            _ => {
                return Err(SubmitError::Config(
                    "the generation request must be a JSON object".to_owned(),
                ))
            }
        };
        if let Some(webhook_url) = &self.config.webhook_url {
            body.insert("webhook_url".to_owned(), webhook_url.clone().into());
        }
        if let Some(sim) = &submission.sim {
            body.insert("sim".to_owned(), sim.clone());
        }
        Ok(body)
    }
}

/// The job id of a create answer: `job.id`, else a top-level `job_id`.
fn job_id_of(answer: &Value) -> Option<String> {
    answer["job"]["id"]
        .as_str()
        .or_else(|| answer["job_id"].as_str())
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

fn retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// A `Retry-After` in seconds, capped so a test or a demo never stalls for long.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let secs: u64 = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs.min(30)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_id_comes_from_either_field() {
        let nested = serde_json::json!({"job": {"id": "job_1", "status": "queued"}});
        assert_eq!(job_id_of(&nested).as_deref(), Some("job_1"));
        let flat = serde_json::json!({"job_id": "job_2"});
        assert_eq!(job_id_of(&flat).as_deref(), Some("job_2"));
        assert_eq!(job_id_of(&serde_json::json!({"job": {"id": ""}})), None);
    }

    #[test]
    fn only_rate_limits_and_server_errors_are_retried() {
        assert!(retryable(StatusCode::TOO_MANY_REQUESTS));
        assert!(retryable(StatusCode::BAD_GATEWAY));
        assert!(!retryable(StatusCode::UNAUTHORIZED));
        assert!(!retryable(StatusCode::BAD_REQUEST));
    }
}
