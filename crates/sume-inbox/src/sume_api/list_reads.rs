//! Reading a page of a key's job list at Sume, under the same fleet-wide budget as a job's
//! read: one read answers up to a hundred jobs. Each read is counted by which way it went
//! (`sume_inbox_sume_reads_total{way}`), and a 429's pause is kept for the whole fleet.

use sume_wire::{ClientError, JobPage};
use tokio::time::Instant;

use super::StatusReader;
use crate::config::ApiKey;
use crate::db::DbError;
use crate::metrics::{ReadWay, StatusSource};

/// What asking for one page got.
#[derive(Debug)]
pub enum ListAnswer {
    /// The page.
    Page(JobPage),
    /// Anything else (a 429, a 5xx, a refused key, a timeout, a redirect: `"307 to \"...\""`):
    /// the walk stops here, and the jobs it did not see are read by themselves.
    Failed(String),
}

impl StatusReader {
    /// One page of `key`'s job list after `cursor`, under the budget; `None` when the budget
    /// has nothing before `deadline` (nothing sent).
    pub async fn list_page(
        &self,
        key: &ApiKey,
        cursor: Option<&str>,
        deadline: Instant,
    ) -> Result<Option<ListAnswer>, DbError> {
        if !self.take(key, deadline).await? {
            return Ok(None);
        }
        self.metrics().sume_read(ReadWay::list);
        let reply = self
            .client()
            .list_jobs(
                &key.key,
                crate::decisions::walk_choice::PAGE as u32,
                cursor,
                None,
            )
            .await;
        let code = match &reply {
            Ok(r) => r.http_status.to_string(),
            Err(ClientError::Timeout) => "timeout".to_owned(),
            Err(_) => "error".to_owned(),
        };
        self.metrics().sume_answered(&key.name, &code);
        let reply = match reply {
            Ok(r) => r,
            Err(e) => return Ok(Some(ListAnswer::Failed(e.to_string()))),
        };
        if reply.http_status == 429 {
            self.metrics().sume_rate_limited.inc();
        }
        self.observe(key, reply.http_status, &reply.rate).await?;
        Ok(Some(match reply.page {
            Some(page) => {
                for job in &page.data {
                    super::note_status(self.metrics(), StatusSource::list, &job.id, &job.status);
                }
                ListAnswer::Page(page)
            }
            None => ListAnswer::Failed(no_page(reply, code)),
        }))
    }
}

/// Why an answer held no page, as the walk logs it: the redirect not followed, how a 200 that
/// did not read came (`Content-Type text/html`), else the status.
fn no_page(reply: sume_wire::ListReply, code: String) -> String {
    match (reply.redirect, reply.body_kind) {
        (Some(moved), _) => moved,
        (None, Some(kind)) if reply.http_status == 200 => {
            format!("200 with a body that is no page of jobs ({kind})")
        }
        _ => code,
    }
}
