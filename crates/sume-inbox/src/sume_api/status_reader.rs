//! This instance's way to Sume's status endpoint: [`StatusReader`], one status call under the
//! fleet-wide read budget ([`super::read_budget`]), the keys' positive checks and the breaker
//! ([`super::key_checks`]) that say whether a 404 may be taken as a verdict, and the name the
//! instance's leases carry. The sweep's inbox check and poll share one reader.

use std::sync::Arc;
use std::time::Duration;

use sume_wire::{ClientError, StatusClient};
use tokio::time::Instant;
use tracing::Instrument;

use super::answer::Answer;
use super::key_checks::{ApiCheck, Hold};
use super::read_budget::{Budget, BudgetError};
use crate::config::{ApiKey, Rate};
use crate::db::{DbError, Store};
use crate::metrics::Metrics;
use crate::process::instance_name::lease_owner;

/// Verdict holds are logged at most this often.
static HOLDS_LOG: crate::process::log_budget::LogBudget =
    crate::process::log_budget::LogBudget::new(1, Duration::from_secs(60));

/// This instance's way to Sume's status endpoint: the keys, the client, the fleet-wide budget,
/// and the name its leases carry. Cloned into the services that ask Sume, so they share one
/// budget (a `Retry-After` seen by one pauses the other at once) and one lease owner.
#[derive(Clone)]
pub struct StatusReader {
    metrics: Arc<Metrics>,
    client: StatusClient,
    keys: Arc<Vec<ApiKey>>,
    budget: Budget,
    owner: Arc<str>,
    api: ApiCheck,
}

impl StatusReader {
    /// `rate` is the fleet's budget per key (`SUME_READ_RATE`), kept in `store`.
    pub fn new(
        store: Store,
        metrics: Arc<Metrics>,
        client: StatusClient,
        keys: Vec<ApiKey>,
        rate: Rate,
    ) -> StatusReader {
        StatusReader {
            metrics,
            client,
            keys: Arc::new(keys),
            budget: Budget::new(store, rate),
            owner: lease_owner().into(),
            api: ApiCheck::default(),
        }
    }

    /// Checks the keys that are due a positive check (see [`ApiCheck`]), each under the
    /// budget; a key whose check cannot get a token before `deadline` waits for the next pass.
    pub async fn verify_keys(&self, deadline: Instant) -> Result<(), DbError> {
        for key in self.keys.iter() {
            let Some(_claim) = self.api.claim(&key.name, Instant::now()) else {
                continue;
            };
            if !self.take(key, deadline).await? {
                continue;
            }
            let check = self.client.check_key(&key.key).await;
            let (code, usable) = match &check {
                Ok(c) => (c.http_status.to_string(), c.usable),
                Err(ClientError::Timeout) => ("timeout".to_owned(), false),
                Err(_) => ("error".to_owned(), false),
            };
            self.metrics.sume_answered(&key.name, &code);
            if let Ok(c) = &check {
                self.budget
                    .observe(&key.name, c.http_status, &c.rate)
                    .await?;
            }
            self.api.checked(&key.name, usable, Instant::now());
            self.metrics.sume_api_key_usable(&key.name, usable);
            if !usable {
                match check {
                    Ok(c) => self.report_unusable(key, &code, c.request_id, c.redirect),
                    Err(e) => self.report_unusable(key, &code, None, Some(e.to_string())),
                }
            }
        }
        Ok(())
    }

    /// Logs why a key's check failed: Sume's answer (`code`, its `request_id`), or the error of
    /// a call that got none (`error`: a refused connection, a name that does not resolve), or
    /// where a redirect pointed (`error` again: `"307 to \"...\""`).
    fn report_unusable(
        &self,
        key: &ApiKey,
        code: &str,
        request_id: Option<String>,
        error: Option<String>,
    ) {
        let request_id = request_id.as_deref().unwrap_or("-");
        let error = error.as_deref().unwrap_or("-");
        let url = self.client.base_url();
        match code {
            "404" => {
                tracing::error!(%url, key = %key.name, request_id, "SUME_API_URL looks wrong: listing jobs answered 404; no job is set aside or given up until it answers 200")
            }
            "401" => {
                tracing::error!(key = %key.name, code, request_id, "Sume refused API key {} (401: missing or unknown key): check SUME_API_KEYS; no job is set aside or given up until it works", key.name)
            }
            "403" => {
                tracing::error!(key = %key.name, code, request_id, "Sume refused API key {} (403: the key lacks the scope to read jobs): check SUME_API_KEYS; no job is set aside or given up until it works", key.name)
            }
            "200" => {
                tracing::error!(%url, key = %key.name, request_id, "SUME_API_URL looks wrong: listing jobs answered 200 with something that is not a list of jobs; no job is set aside or given up until it answers one")
            }
            "304" => {
                tracing::error!(%url, key = %key.name, request_id, "listing jobs answered 304 Not Modified, though the check sent no validator: something in front of Sume answers for it; no job is set aside or given up until it answers 200")
            }
            c if c.starts_with('3') => {
                tracing::error!(%url, key = %key.name, redirect = error, "SUME_API_URL answered a redirect, which is not followed (what answers where it points says nothing about Sume's jobs): set SUME_API_URL to the address Sume's API answers at; no job is set aside or given up until it answers 200")
            }
            "402" => {
                tracing::error!(key = %key.name, code, request_id, "Sume says the workspace of API key {} is out of credits (402); no job is set aside or given up until reads work again", key.name)
            }
            _ => {
                tracing::warn!(%url, key = %key.name, code, request_id, error, "the check of an API key failed; no job is set aside or given up until it answers 200")
            }
        }
    }

    /// What a pass that asks Sume does first: nothing without keys (`None`); else the budget's
    /// buckets exist, due keys are checked, and the answer says whether 404s are verdicts now.
    pub async fn prepare_pass(&self, check_for: Duration) -> Result<Option<bool>, DbError> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        self.ensure_budget().await?;
        self.verify_keys(Instant::now() + check_for).await?;
        Ok(Some(self.verdicts_allowed()))
    }

    /// Whether 404s may be taken as verdicts now (every key checked and usable, the breaker
    /// closed). Holds are logged and shown by `sume_inbox_sume_api_verdicts_held`.
    pub fn verdicts_allowed(&self) -> bool {
        let names: Vec<String> = self.keys.iter().map(|k| k.name.clone()).collect();
        let hold = self.api.verdicts(&names, Instant::now());
        self.metrics
            .sume_api_verdicts_held
            .set(hold.is_err().into());
        if let Err(hold) = &hold {
            if let Some(left_out) = HOLDS_LOG.allow() {
                match hold {
                    Hold::FirstChecks(keys) => {
                        let keys = keys.join(",");
                        tracing::info!(
                            keys,
                            "verdicts on Sume's 404s wait for the keys' first check"
                        )
                    }
                    Hold::Keys(keys) => {
                        let (reason, keys) = ("keys without a passing check", keys.join(","));
                        tracing::warn!(reason, keys, left_out, "verdicts on Sume's 404s are held")
                    }
                    Hold::Breaker => {
                        let reason = "nearly every recent poll answered 404";
                        tracing::warn!(reason, left_out, "verdicts on Sume's 404s are held")
                    }
                }
            }
        }
        hold.is_ok()
    }

    /// Feeds the breaker with one poll of a job under its own key.
    pub fn polled_own_key(&self, not_found: bool) {
        if self.api.polled(not_found, Instant::now()) {
            tracing::error!(
                url = %self.client.base_url(),
                "nearly every poll of our own jobs answered 404 under their own key: SUME_API_URL or the keys look wrong; no job is set aside or given up for a while"
            );
        }
    }

    /// The same with a key's passed check counting for `max_age` (KEY_CHECK_MAX_AGE).
    pub fn with_key_check_max_age(self, max_age: Duration) -> StatusReader {
        StatusReader {
            api: ApiCheck::new(max_age),
            ..self
        }
    }

    /// Whether `key` may spend a read on work that can wait: what is left of its day is more
    /// than a tenth of the day's reads (unknown until its first read today: yes).
    pub fn spare_read(&self, key: &ApiKey) -> bool {
        let daily = self.budget.daily_reads() as i64;
        self.budget
            .left_today(&key.name)
            .is_none_or(|left| left > daily / 10)
    }

    /// The reads `key` has left on the UTC day `day` for the whole fleet, as of this
    /// instance's last read with it (the day's whole allowance before its first that day).
    pub fn reads_left_on(&self, key: &ApiKey, day: chrono::NaiveDate) -> i64 {
        self.budget.left_on(&key.name, day)
    }

    /// The reads per key and UTC day for the fleet (SUME_READ_DAILY).
    pub fn daily_reads(&self) -> u32 {
        self.budget.daily_reads()
    }

    /// The same with `daily` reads per key and UTC day for the fleet (SUME_READ_DAILY).
    pub fn with_daily_reads(self, daily: u32) -> StatusReader {
        StatusReader {
            budget: self.budget.with_daily_reads(daily),
            ..self
        }
    }

    /// This instance's name on its leases.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The names of this instance's keys.
    pub fn key_names(&self) -> Vec<String> {
        self.keys().iter().map(|k| k.name.clone()).collect()
    }

    /// The configured keys, in order.
    pub fn keys(&self) -> &[ApiKey] {
        &self.keys
    }

    /// This reader's metrics.
    pub(super) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The HTTP client.
    pub(super) fn client(&self) -> &StatusClient {
        &self.client
    }

    /// Keeps what an answer's rate-limit headers say (a 429's pause) for the whole fleet.
    pub(super) async fn observe(
        &self,
        key: &ApiKey,
        status: u16,
        rate: &sume_wire::RateLimit,
    ) -> Result<(), DbError> {
        self.budget
            .observe(&key.name, status, rate)
            .await
            .map(|_| ())
    }

    /// Creates the budget's buckets of the keys where they do not exist yet.
    pub async fn ensure_budget(&self) -> Result<(), DbError> {
        let names: Vec<String> = self.keys.iter().map(|k| k.name.clone()).collect();
        self.budget.ensure(&names).await
    }

    /// Takes a read from `key`'s budget, waiting up to `deadline`; false when there is none
    /// by then (the minute's or the day's).
    pub(super) async fn take(&self, key: &ApiKey, deadline: Instant) -> Result<bool, DbError> {
        let taken = match self.budget.acquire(&key.name, deadline).await {
            Ok(waited) => {
                self.metrics.budget_waited(waited);
                true
            }
            Err(BudgetError::Deadline) => false,
            Err(BudgetError::Db(e)) => return Err(e),
        };
        if let Some(left) = self.budget.left_today(&key.name) {
            self.metrics.reads_left_today(&key.name, left);
        }
        Ok(taken)
    }

    /// One status call under the budget, and how long the request itself took (not the wait
    /// for the budget). `None`: no budget before `deadline`, nothing sent.
    pub(crate) async fn call(
        &self,
        key: &ApiKey,
        job_id: &str,
        deadline: Instant,
    ) -> Result<Option<(Answer, Duration)>, DbError> {
        if !sume_wire::askable_job_id(job_id) {
            // Nothing to spend a read on: the answer would be about another path.
            let reply = self.client.job_status(&key.key, job_id).await;
            return Ok(Some((Answer::read(reply), Duration::ZERO)));
        }
        if !self.take(key, deadline).await? {
            return Ok(None);
        }
        self.metrics.sume_read(crate::metrics::ReadWay::job);
        let span = crate::process::traces::span!(
            "sume status read",
            otel.name = "GET /jobs/{id}",
            otel.kind = "client",
            sume.job_id = job_id,
            sume.key = key.name.as_str(),
            sume.answer = tracing::field::Empty,
            sume.request_id = tracing::field::Empty,
        );
        let sent = Instant::now();
        let reply = self
            .client
            .job_status(&key.key, job_id)
            .instrument(span.clone())
            .await;
        let latency = sent.elapsed();
        let code = match &reply {
            Ok(r) => r.http_status.to_string(),
            Err(ClientError::Timeout) => "timeout".to_owned(),
            Err(_) => "error".to_owned(),
        };
        if !span.is_none() {
            span.record("sume.answer", code.as_str());
            if let Some(id) = reply.as_ref().ok().and_then(|r| r.request_id.as_deref()) {
                span.record("sume.request_id", id);
            }
        }
        self.metrics.sume_answered(&key.name, &code);
        if let Ok(r) = &reply {
            if r.http_status == 429 {
                self.metrics.sume_rate_limited.inc();
            }
            self.budget
                .observe(&key.name, r.http_status, &r.rate)
                .await?;
            self.report(key, job_id, r);
        }
        Ok(Some((Answer::read(reply), latency)))
    }

    /// Logs what a status call's answer says about the configuration or about Sume: a refused
    /// key, a redirect, an answer about another job, a status this version does not know.
    fn report(&self, key: &ApiKey, job_id: &str, r: &sume_wire::StatusReply) {
        let request_id = r.request_id.as_deref().unwrap_or("-");
        match r.http_status {
            401 => {
                tracing::error!(key = %key.name, request_id, "Sume refused API key (401): check SUME_API_KEYS")
            }
            200 => match &r.outcome {
                sume_wire::StatusOutcome::Found(job) => {
                    if let Some(what) = &r.left_out {
                        tracing::warn!(key = %key.name, job_id, status = %job.status, left_out = %what, request_id, "Sume's answer to a status call was read only up to its status: the job takes that status without its result");
                    }
                    super::note_status(
                        &self.metrics,
                        crate::metrics::StatusSource::status_read,
                        job_id,
                        &job.status,
                    )
                }
                sume_wire::StatusOutcome::Unexpected(what) => {
                    tracing::warn!(key = %key.name, job_id, answer = %what, request_id, "Sume's answer to a status call is no answer about the job: it is asked again later")
                }
                _ => {}
            },
            404 => {}
            402 => {
                tracing::error!(key = %key.name, job_id, request_id, "Sume answered 402 (out of credits) to a status read: the job stays as it is and is asked again later")
            }
            403 => {
                tracing::error!(key = %key.name, job_id, request_id, "Sume answered 403 (the key lacks the scope) to a status read: the job stays as it is and is asked again later; check SUME_API_KEYS")
            }
            304 => {
                tracing::warn!(key = %key.name, job_id, request_id, "a status call was answered 304 Not Modified, though it sent no validator (If-None-Match, If-Modified-Since): something in front of Sume answers for it; no answer about the job, it is asked again later")
            }
            300..=399 => {
                let answer = match &r.outcome {
                    sume_wire::StatusOutcome::Unexpected(what) => what.as_str(),
                    _ => "",
                };
                tracing::warn!(key = %key.name, job_id, answer, "a status call was answered with a redirect, which is not followed: no answer about the job; check SUME_API_URL")
            }
            status => {
                tracing::warn!(key = %key.name, job_id, status, request_id, "Sume answered a status call with an error")
            }
        }
    }
}
