//! Reading one job at Sume, as the poll and the give-up recheck do: under the job's own key, or
//! under every key when it names none that is configured; each call recorded for the job's
//! history; and the breaker fed with what the answers say about our own jobs.

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Answer, Reply, StatusReader};
use crate::config::ApiKey;
use crate::db::{DbError, PolledCall};

/// What asking about one job did.
#[derive(Debug, Default)]
pub struct Asked {
    /// Each status call made, for the job's history.
    pub calls: Vec<PolledCall>,
    /// The keys the job is read with.
    pub keys: usize,
}

impl StatusReader {
    /// The keys to ask about a job registered with `api_key`: its own (true), or every key
    /// when it names none that is configured (false).
    pub fn keys_for(&self, api_key: Option<&str>) -> (Vec<&ApiKey>, bool) {
        let keys = self.keys();
        match api_key.and_then(|name| keys.iter().find(|k| k.name == name)) {
            Some(key) => (vec![key], true),
            None => (keys.iter().collect(), false),
        }
    }

    /// Asks about `job_id` under its keys, one after the other, handing each answer to `read`
    /// until it says stop (false), the budget has nothing before `deadline`, or `shutdown`.
    ///
    /// Our jobs are ours, so the breaker counts a 404 about one as a sign that the URL or the
    /// keys are wrong: under the job's own key, each answer counts; a job asked under every key
    /// counts as missed only when every key answered 404 (one key's 404 is normal there), and
    /// as seen when any key found it.
    pub async fn ask_about(
        &self,
        job_id: &str,
        api_key: Option<&str>,
        deadline: Instant,
        shutdown: &CancellationToken,
        mut read: impl FnMut(Answer) -> bool,
    ) -> Result<Asked, DbError> {
        let (keys, own) = self.keys_for(api_key);
        let mut asked = Asked {
            keys: keys.len(),
            ..Asked::default()
        };
        let mut not_found = 0;
        for key in keys.iter() {
            if shutdown.is_cancelled() {
                break;
            }
            let Some((answer, latency)) = self.call(key, job_id, deadline).await? else {
                break;
            };
            asked.calls.push(PolledCall {
                job_id: job_id.to_owned(),
                key_name: key.name.clone(),
                answer: answer.text.clone(),
                latency_ms: latency.as_millis().try_into().unwrap_or(i32::MAX),
                at: Instant::now(),
            });
            match answer.reply {
                Reply::NotFound if own => self.polled_own_key(true),
                Reply::NotFound => not_found += 1,
                Reply::Found { .. } => self.polled_own_key(false),
                _ => {}
            }
            if !read(answer) {
                break;
            }
        }
        if !own && not_found > 0 && not_found == asked.keys {
            self.polled_own_key(true);
        }
        Ok(asked)
    }
}
