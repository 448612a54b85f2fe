//! Where the admin commands read and write: the database (`DATABASE_URL`), or a daemon's
//! admin API (`--admin-url` / `SUME_INBOX_ADMIN_URL` with the operator's token), so that an
//! operator needs no database credentials. Both answer the same types; writes made through the
//! database are recorded in the audit log here, those made through the API by the daemon.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use sume_wire::Secret;

use super::CliError;
use crate::db::{AuditEntry, DeadLetterRow, JobDetail, Stats, Store, WaitingEvent};
use crate::operations::replay::{self, Replayed};

/// The admin API of one daemon.
pub struct Remote {
    http: reqwest::Client,
    base: String,
    token: Option<sume_wire::Secret>,
    actor: String,
}

/// What an admin command talks to.
pub enum Source {
    /// The database, directly.
    Db(Store),
    /// A daemon's admin API.
    Api(Remote),
}

/// `cli:<user>@<host>`: who acts, for the audit log. Control and format characters of USER,
/// LOGNAME or the host name are left out, as the admin API leaves them out of `X-Actor`
/// ([`crate::operations::actor_name`]).
pub fn actor() -> String {
    // Without USER or LOGNAME (a container, a cron job), the uid this process runs as.
    let uid = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").map(|m| format!("uid {}", m.uid()))
    };
    let shown = |s: String| -> Option<String> {
        let s = crate::operations::actor_name(&s);
        (!s.is_empty()).then_some(s)
    };
    let user = std::env::var("USER")
        .ok()
        .and_then(shown)
        .or_else(|| std::env::var("LOGNAME").ok().and_then(shown))
        .or_else(|| uid().ok())
        .unwrap_or_else(|| "unknown".into());
    let host = crate::process::instance_name::kernel_hostname()
        .and_then(shown)
        .unwrap_or_else(|| "unknown".into());
    format!("cli:{user}@{host}")
}

/// A path segment, percent-encoded (event ids hold slashes). `.` and `..` cannot be sent: a
/// URL reads them (and `%2E`) as this path and the one above, so they would reach another
/// route or none; they are refused (exit 2), and the database still reads them.
fn segment(s: &str) -> Result<String, CliError> {
    if s == "." || s == ".." {
        return Err(CliError::Usage(format!(
            "the id {s:?} cannot travel in an admin API URL (it reads as a path, not a name): use DATABASE_URL instead of --admin-url for it"
        )));
    }
    Ok(url::form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20"))
}

/// `d` as the API's durations read it, to the nanosecond: whole seconds as `90s`, else in
/// nanoseconds (`1500ms` is `1500000000ns`; ten years are 3.2e17 of them, well within what it
/// reads).
fn exact_duration(d: Duration) -> String {
    match d.subsec_nanos() {
        0 => format!("{}s", d.as_secs()),
        _ => format!("{}ns", d.as_nanos()),
    }
}

impl Remote {
    /// A client of the admin API at `base` (e.g. `http://127.0.0.1:9090`).
    pub fn new(base: &str, token: Option<sume_wire::Secret>) -> Result<Remote, CliError> {
        let base = base.trim_end_matches('/').to_owned();
        match url::Url::parse(&base) {
            Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {}
            _ => {
                return Err(CliError::Failed(format!(
                    "--admin-url: {base:?} is not an http(s) URL"
                )))
            }
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| CliError::Failed(format!("--admin-url: {e}")))?;
        Ok(Remote {
            http,
            base,
            token,
            actor: actor(),
        })
    }

    /// Sends a request; answers the JSON of a 2xx, else the API's error. With `absent`, a 404
    /// whose envelope says `not_found` (the route's own answer for an id naming nothing) is
    /// `None`; any other failure (`no_route` for a path no route has, a 401, another server)
    /// is an error, as it is.
    async fn send<T: DeserializeOwned>(
        &self,
        post: Option<Value>,
        path: &str,
        absent: bool,
    ) -> Result<Option<T>, CliError> {
        let url = format!("{}{path}", self.base);
        let mut req = match &post {
            Some(body) => self.http.post(&url).json(body),
            None => self.http.get(&url),
        };
        // As bytes: a user or host name beyond ASCII is sent as it is (the API reads UTF-8).
        if let Ok(actor) = reqwest::header::HeaderValue::from_bytes(self.actor.as_bytes()) {
            req = req.header("x-actor", actor);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t.expose());
        }
        let failed = |e: String| CliError::Failed(format!("{url}: {e}"));
        let r = req
            .send()
            .await
            .map_err(|e| failed(sume_wire::error_chain(&e)))?;
        let status = r.status();
        let text = r
            .text()
            .await
            .map_err(|e| failed(sume_wire::error_chain(&e)))?;
        let body: Value = serde_json::from_str(&text).map_err(|_| {
            let start: String = text.chars().take(80).collect();
            failed(format!(
                "{status}, and the answer is not the admin API's JSON ({start:?}): is this the \
                 daemon's ADMIN_ADDR, not its webhook port or a proxy?"
            ))
        })?;
        let code = body["error"]["code"].as_str().unwrap_or("error");
        if absent && status == reqwest::StatusCode::NOT_FOUND && code == "not_found" {
            return Ok(None);
        }
        if !status.is_success() {
            let message = body["error"]["message"].as_str().unwrap_or("");
            let id = body["request_id"].as_str().unwrap_or("-");
            return Err(failed(format!("{status} {code}: {message} (request {id})")));
        }
        serde_json::from_value(body)
            .map(Some)
            .map_err(|e| failed(format!("unexpected answer: {e}")))
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CliError> {
        self.send(None, path, false)
            .await?
            .ok_or_else(|| CliError::Failed(format!("{path}: not found")))
    }

    async fn post<T: DeserializeOwned>(&self, path: &str, body: Value) -> Result<T, CliError> {
        self.send(Some(body), path, false)
            .await?
            .ok_or_else(|| CliError::Failed(format!("{path}: not found")))
    }

    /// One page's rows under `field`.
    async fn rows<T: DeserializeOwned>(&self, path: &str, field: &str) -> Result<Vec<T>, CliError> {
        let mut page: Value = self.get(path).await?;
        serde_json::from_value(page[field].take())
            .map_err(|e| CliError::Failed(format!("{path}: unexpected answer: {e}")))
    }
}

impl Source {
    /// A job and everything about it (an empty detail when nothing is known).
    pub async fn job_detail(&self, job_id: &str) -> Result<JobDetail, CliError> {
        match self {
            Source::Db(store) => Ok(store.job_detail(job_id).await?),
            Source::Api(api) => {
                let path = format!("/v1/jobs/{}/detail", segment(job_id)?);
                Ok(api.send(None, &path, true).await?.unwrap_or(JobDetail {
                    job_id: job_id.to_owned(),
                    job: None,
                    events: Vec::new(),
                    disagreements: Vec::new(),
                    inbox_check: None,
                    polls: Vec::new(),
                }))
            }
        }
    }

    /// Waiting events at least `older_than` old, oldest first.
    pub async fn inbox(
        &self,
        older_than: Duration,
        limit: i64,
    ) -> Result<Vec<WaitingEvent>, CliError> {
        match self {
            Source::Db(store) => Ok(store
                .events_waiting_list(older_than.as_secs_f64(), limit)
                .await?),
            Source::Api(api) => {
                let path = format!(
                    "/v1/inbox?older_than={}&limit={}",
                    exact_duration(older_than),
                    limit
                );
                api.rows(&path, "events").await
            }
        }
    }

    /// Dead letters, newest first.
    pub async fn dead_letters(&self, limit: i64) -> Result<Vec<DeadLetterRow>, CliError> {
        match self {
            Source::Db(store) => Ok(store.dead_letters_list(limit).await?),
            Source::Api(api) => {
                let path = format!("/v1/dead-letters?limit={}", limit);
                api.rows(&path, "dead_letters").await
            }
        }
    }

    /// The operator's audit log, newest first.
    pub async fn audit(&self, limit: i64) -> Result<Vec<AuditEntry>, CliError> {
        match self {
            Source::Db(store) => Ok(store.audit_log_page(None, limit).await?),
            Source::Api(api) => {
                let path = format!("/v1/audit?limit={}", limit);
                api.rows(&path, "entries").await
            }
        }
    }

    /// The numbers an operator checks first.
    pub async fn stats(&self) -> Result<Stats, CliError> {
        match self {
            Source::Db(store) => Ok(store.stats_summary().await?),
            Source::Api(api) => api.get("/v1/stats").await,
        }
    }

    /// Drops dead letters; answers those removed (audited).
    pub async fn drop_dead_letters(&self, ids: &[String]) -> Result<Vec<String>, CliError> {
        match self {
            Source::Db(store) => {
                let dropped = store.dead_letters_drop(ids).await?;
                let missing: Vec<&String> = ids.iter().filter(|i| !dropped.contains(i)).collect();
                let detail = json!({ "dropped": dropped, "not_found": missing });
                store
                    .audit_log_insert(&actor(), "drop_dead_letters", &detail, None)
                    .await?;
                Ok(dropped)
            }
            Source::Api(api) => {
                let mut answer: Value = api
                    .post("/v1/dead-letters/drop", json!({ "ids": ids }))
                    .await?;
                serde_json::from_value(answer["dropped"].take())
                    .map_err(|e| CliError::Failed(format!("unexpected answer: {e}")))
            }
        }
    }

    /// Replays one event, or every dead letter (`None`), up to `limit` (audited).
    pub async fn replay(
        &self,
        event_id: Option<&str>,
        limit: i64,
        secrets: &[Secret],
    ) -> Result<Vec<Replayed>, CliError> {
        let items = match self {
            Source::Db(store) => {
                let (action, items) = match event_id {
                    Some(id) => (
                        "replay_event",
                        vec![replay::replay_event(store, secrets, id).await?],
                    ),
                    None => (
                        "replay_dead_letters",
                        replay::replay_dead_letters(store, secrets, limit).await?,
                    ),
                };
                let detail = json!({ "event_id": event_id, "limit": limit, "result": items });
                store
                    .audit_log_insert(&actor(), action, &detail, None)
                    .await?;
                items
            }
            Source::Api(api) => match event_id {
                Some(id) => {
                    let path = format!("/v1/events/{}/replay", segment(id)?);
                    match api.send::<Replayed>(Some(json!({})), &path, true).await? {
                        None => vec![Replayed {
                            id: id.to_owned(),
                            job_id: None,
                            result: "no such event (dead letters are replayed with --dead-letters)"
                                .into(),
                            ok: false,
                            not_verified: false,
                        }],
                        Some(replayed) => vec![replayed],
                    }
                }
                None => {
                    let mut answer: Value = api
                        .post("/v1/dead-letters/replay", json!({ "limit": limit }))
                        .await?;
                    serde_json::from_value(answer["replayed"].take())
                        .map_err(|e| CliError::Failed(format!("unexpected answer: {e}")))?
                }
            },
        };
        // The API does not say "not verified" apart from its message.
        Ok(items
            .into_iter()
            .map(|mut r| {
                r.not_verified |= r.result == replay::NOT_VERIFIED;
                r
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::setting::MAX_DURATION;

    /// What the command sends reads back, through the API's parser, as the duration given.
    #[test]
    fn a_duration_is_sent_as_the_api_reads_it_back_exactly() {
        let last = MAX_DURATION - Duration::from_nanos(1);
        for d in [
            Duration::ZERO,
            Duration::from_millis(1500),
            Duration::from_nanos(1),
            Duration::from_secs(600),
            last,
            MAX_DURATION,
        ] {
            let sent = super::exact_duration(d);
            assert_eq!(humantime::parse_duration(&sent), Ok(d), "{sent}");
        }
    }
}
