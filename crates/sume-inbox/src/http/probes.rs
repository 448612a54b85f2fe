//! `GET /healthz` and `GET /readyz` on LISTEN_ADDR, for load balancers and orchestrators.
//!
//! Anyone who can reach the public port can call them, as often as they like, so neither costs
//! the database anything per request: `/healthz` reads only the tasks' liveness, and `/readyz`
//! answers from a check made at most once per [`READY_TTL`], with one check in flight at most
//! (callers that arrive meanwhile wait for its answer).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::actors::supervision::Health;
use crate::db::{migrate, pool_message, DbError, Store};

/// How long a database check answers `/readyz`.
pub const READY_TTL: Duration = Duration::from_secs(1);

/// How long one database check may take before it counts as a failure.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// `/readyz`'s answer while the database takes no writes.
const READ_ONLY: &str = "database is read-only (a hot standby, or default_transaction_read_only): \
    no webhook can be stored, every one is answered 503; DATABASE_URL must reach the primary \
    (naming several hosts: add target_session_attrs=read-write)";

/// The tasks' liveness and the last database check.
pub struct Readiness {
    tasks: Health,
    store: Store,
    last: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Readiness {
    /// Checks `store` for readiness and `tasks` for liveness.
    pub fn new(tasks: Health, store: Store) -> Arc<Readiness> {
        Arc::new(Readiness {
            tasks,
            store,
            last: Mutex::new(None),
        })
    }

    /// Dead tasks, as an answer.
    fn dead_tasks(&self) -> Option<Response> {
        let dead = self.tasks.dead();
        (!dead.is_empty()).then(|| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("tasks stopped: {}", dead.join(", ")),
            )
                .into_response()
        })
    }

    /// The database's readiness: cached for [`READY_TTL`], checked by one caller at a time.
    async fn database(&self) -> Result<(), String> {
        let mut last = self.last.lock().await;
        if let Some((at, answer)) = &*last {
            if at.elapsed() < READY_TTL {
                return answer.clone();
            }
        }
        let answer = self.check().await;
        *last = Some((Instant::now(), answer.clone()));
        answer
    }

    /// Asks the pool, or, while the ingest writers' last batch found their session read-only,
    /// one of their connections (they are their own: the pool's may say it can write while
    /// theirs cannot); once one of theirs answers that it can, the pool again.
    async fn check(&self) -> Result<(), String> {
        let writers = self.store.writers_read_only();
        let store = if writers {
            self.store.for_writers()
        } else {
            self.store.clone()
        };
        let readiness = tokio::time::timeout(CHECK_TIMEOUT, store.schema_readiness());
        match readiness.await {
            Ok(Ok((missing, _))) if !missing.is_empty() => Err(format!(
                "schema lacks migration(s) {missing:?}, this binary needs {}",
                migrate::latest()
            )),
            Ok(Ok((_, true))) => Err(READ_ONLY.into()),
            Ok(Ok((_, false))) => {
                if writers {
                    self.store.note_writers_read_only(false);
                }
                Ok(())
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "readiness: database check failed");
                Err(match e {
                    DbError::Pool(p) => format!("database unreachable: {}", pool_message(&p)),
                    e => format!("database check failed: {e}"),
                })
            }
            Err(_) => Err(format!("database: no answer in {CHECK_TIMEOUT:?}")),
        }
    }
}

/// What the probes read, taken from the state of the router they are served by.
pub struct Probes(pub Arc<Readiness>);

/// Alive unless a task has died: a process that lost an actor should be restarted, not kept.
pub async fn healthz(State(Probes(health)): State<Probes>) -> Response {
    health.dead_tasks().unwrap_or_else(|| "ok".into_response())
}

/// Ready when no task has died, the database answers and takes writes, and the schema is at
/// least this binary's version.
pub async fn readyz(State(Probes(health)): State<Probes>) -> Response {
    if let Some(dead) = health.dead_tasks() {
        return dead;
    }
    match health.database().await {
        Ok(()) => "ready".into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}
