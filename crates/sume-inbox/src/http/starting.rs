//! What LISTEN_ADDR answers while the daemon starts: the start may wait long (for a database not
//! up yet, for the migrations' lock while another instance migrates, for the migrations
//! themselves: an index built concurrently on a large table), and an orchestrator that hears
//! nothing meanwhile kills the process and starts it again, cutting a migration short.
//!
//! - `GET /healthz`: 200, the process is alive, `starting: ` and what it waits for;
//! - `GET /readyz`: 503, the same words;
//! - anything else (a webhook): 503 with `Retry-After`, the body unread: nothing is stored, and
//!   Sume retries.
//!
//! Every answer closes its connection, so that no client keeps one past the start: the daemon's
//! own server then takes the listener over.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;

use crate::db::migrate::{LockWaits, Step};

/// What the start waits for, told by the start and read by its answers (shared by clones).
#[derive(Clone, Default)]
pub struct Starting(Arc<Mutex<Waiting>>);

/// What the start waits for.
#[derive(Default)]
enum Waiting {
    /// Nothing said yet.
    #[default]
    Beginning,
    /// The database, in these words.
    Database(String),
    /// The migrations, which report where they stand.
    Migrations(LockWaits),
}

impl Starting {
    /// The start now waits for the database, as `what` says (`connecting to DATABASE_URL`, the
    /// last failure to reach it).
    pub fn database(&self, what: impl Into<String>) {
        *self.waiting() = Waiting::Database(what.into());
    }

    /// The start now runs the migrations with `waits`.
    pub fn migrations(&self, waits: &LockWaits) {
        *self.waiting() = Waiting::Migrations(waits.clone());
    }

    /// What the start waits for, in a few words.
    pub fn why(&self) -> String {
        let waits = match &*self.waiting() {
            Waiting::Beginning => return "opening the database".into(),
            Waiting::Database(what) => return what.clone(),
            Waiting::Migrations(waits) => waits.clone(),
        };
        match waits.step() {
            Step::Reading => "reading which migrations the schema has".into(),
            Step::Locking(since) => format!(
                "another instance is migrating the schema: waiting for the migrations' lock \
                 ({} s so far)",
                since.elapsed().as_secs()
            ),
            Step::Applying(version, name) => match waits.refused() {
                0 => format!("applying migration {version} ({name})"),
                n => format!(
                    "applying migration {version} ({name}): its table locks refused {n} times \
                     so far, a transaction holds them (the log names it)"
                ),
            },
        }
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The routes of LISTEN_ADDR while the daemon starts; `Retry-After` of a refusal is
/// `retry_after_secs`.
pub fn router(starting: Starting, retry_after_secs: u64) -> Router {
    Router::new()
        .fallback(answer)
        .with_state((starting, retry_after_secs))
}

/// Alive at `/healthz`, not ready at `/readyz`, and not taking anything else, saying why.
async fn answer(
    State((starting, retry_after_secs)): State<(Starting, u64)>,
    request: Request,
) -> Response {
    let why = starting.why();
    let probe = matches!(*request.method(), Method::GET | Method::HEAD);
    let mut response = match request.uri().path() {
        "/healthz" if probe => (StatusCode::OK, format!("starting: {why}")).into_response(),
        "/readyz" if probe => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("starting: {why}")).into_response()
        }
        _ => {
            let message = format!("starting ({why}): nothing is taken until it serves; retry");
            let mut refused = (StatusCode::SERVICE_UNAVAILABLE, message).into_response();
            let retry = HeaderValue::from(retry_after_secs);
            refused.headers_mut().insert(header::RETRY_AFTER, retry);
            refused
        }
    };
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
