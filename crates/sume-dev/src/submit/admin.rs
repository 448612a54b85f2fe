//! The second registration path: the order commits on its own, then the job is registered
//! through the daemon's admin API (`POST /v1/jobs`), for an application that cannot write to the
//! `sume` schema. Not atomic: a crash between the two leaves an order whose job sume-inbox does
//! not know yet. The recommended path, one transaction, is [`SubmitClient::submit`].

use reqwest::StatusCode;
use serde_json::Value;
use sume_wire::Secret;

use super::{Registration, Submission, SubmitClient, SubmitError, Submitted};

/// The daemon's admin API.
#[derive(Debug, Clone)]
pub struct AdminApi {
    /// Its base, e.g. `http://127.0.0.1:9090`.
    pub url: String,
    /// `ADMIN_TOKEN`, when the daemon requires one.
    pub token: Option<Secret>,
}

impl AdminApi {
    /// The admin API at `url`, without a token.
    pub fn new(url: impl Into<String>) -> AdminApi {
        AdminApi {
            url: url.into(),
            token: None,
        }
    }
}

impl SubmitClient {
    /// Creates the job, commits the order (slow work included) on its own, then registers the
    /// job through the admin API. Order and job row are not atomic on this path: a crash between
    /// the two leaves an order whose job the daemon does not know yet.
    pub async fn submit_via_admin(
        &self,
        admin: &AdminApi,
        submission: &Submission,
    ) -> Result<Submitted, SubmitError> {
        let job_id = self.create_job(submission).await?;
        let (slow_work, _) = self
            .commit_order(&submission.order_id, &job_id, false)
            .await?;
        let registration = self
            .register_via_admin(admin, &job_id, &submission.order_id)
            .await?;
        Ok(Submitted {
            job_id,
            order_id: submission.order_id.clone(),
            slow_work,
            registration,
        })
    }

    /// Registers `job_id` through `POST {admin}/v1/jobs`, under this client's key name.
    pub async fn register_via_admin(
        &self,
        admin: &AdminApi,
        job_id: &str,
        order_id: &str,
    ) -> Result<Registration, SubmitError> {
        let mut request = self
            .http
            .post(format!("{}/v1/jobs", admin.url.trim_end_matches('/')))
            .json(&serde_json::json!({
                "job_id": job_id,
                "order_id": order_id,
                "api_key": self.config.api_key_name,
            }));
        if let Some(token) = &admin.token {
            request = request.bearer_auth(token.expose());
        }
        let step = "the admin registration";
        let response = request
            .send()
            .await
            .map_err(|source| SubmitError::Http { step, source })?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|source| SubmitError::Http { step, source })?;
        let json = || serde_json::from_str::<Value>(&body).unwrap_or(Value::Null);
        match status {
            StatusCode::CREATED | StatusCode::OK => Ok(Registration::Admin {
                created: status == StatusCode::CREATED,
                job: json(),
            }),
            StatusCode::CONFLICT => Err(SubmitError::Conflict {
                job_id: job_id.to_owned(),
                existing: json()["job"].clone(),
            }),
            _ => Err(SubmitError::Refused {
                step,
                status: status.as_u16(),
                body,
            }),
        }
    }
}
