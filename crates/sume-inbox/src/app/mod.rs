//! `run`: wires the actors together and serves until shutdown.
//!
//! `main` parses the configuration and calls [`run`] with bound listeners and a shutdown
//! token; tests call the same function on port-0 listeners.
//!
//! Shutdown (the token is cancelled, e.g. on SIGTERM): the servers stop accepting and let
//! in-flight requests finish; a request still waiting for its commit gets its answer or, past
//! SHUTDOWN_TIMEOUT, is dropped unanswered (never a 2xx without a commit). When the webhook
//! server is done, the ingest channel closes and the writers drain it; then the other tasks stop.

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::actors::attach::{Attach, AttachHandle};
use crate::actors::heartbeat::Fleet;
use crate::actors::ingest::{Ingest, IngestHandle};
use crate::actors::supervision::Health;
use crate::actors::sweep::{Clock, InboxCheck, Poll, Retention};
use crate::config::{Config, Pooler};
use crate::db::{self, migrate, DbError, Store};
use crate::http::probes::Readiness;
use crate::http::{admin, console, server, webhook};
use crate::metrics::Metrics;
use crate::sume_api::StatusReader;

/// The sockets `run` serves on, bound by the caller.
pub struct Listeners {
    /// LISTEN_ADDR: the webhook and the health checks (faces the internet).
    pub webhook: TcpListener,
    /// ADMIN_ADDR: the admin API and `/metrics`.
    pub admin: TcpListener,
}

/// Why the daemon stopped on an error.
#[derive(Debug, Error)]
pub enum RunError {
    /// The database could not be reached at start, or the migrations failed.
    #[error("database: {0}")]
    Db(#[from] DbError),
    /// A listener failed.
    #[error("serving HTTP: {0}")]
    Io(#[from] std::io::Error),
    /// A setting turned out unusable at start (exit 78).
    #[error("configuration: {0}")]
    Config(String),
    /// Behind a transaction pooler without MIGRATE_DATABASE_URL, the schema is older than
    /// this binary's and cannot be migrated through the pooler.
    #[error("the schema lacks migration(s) {0:?} of this binary (version {latest}): run `sume-inbox migrate` over a direct connection first, or set MIGRATE_DATABASE_URL", latest = migrate::latest())]
    SchemaBehind(Vec<i32>),
}

/// How long start-up keeps trying to reach the database before giving up.
const STARTUP_PATIENCE: Duration = Duration::from_secs(30);

/// Runs `attempt` until it answers, retrying while the database is not reachable yet (e.g. when
/// the daemon and its database start together), for at most [`STARTUP_PATIENCE`].
async fn patiently<T, F, Fut>(shutdown: &CancellationToken, mut attempt: F) -> Result<T, DbError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, DbError>>,
{
    let deadline = tokio::time::Instant::now() + STARTUP_PATIENCE;
    let mut wait = Duration::from_millis(200);
    loop {
        match attempt().await {
            Ok(answer) => return Ok(answer),
            Err(e @ (DbError::Connect(_) | DbError::Pool(_)))
                if tokio::time::Instant::now() < deadline =>
            {
                tracing::warn!(error = %e, retry_in = ?wait, "database not reachable yet");
                tokio::select! {
                    _ = shutdown.cancelled() => return Err(e),
                    _ = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Applies migrations (under the advisory lock) on `url`, a direct connection.
pub async fn migrate_with_retry(
    url: &str,
    shutdown: &CancellationToken,
) -> Result<Vec<i32>, DbError> {
    patiently(shutdown, || async {
        let mut client = db::connect(url).await?;
        migrate::migrate(&mut client).await
    })
    .await
}

/// The pool, once the schema is at least this binary's: migrated at start over a direct
/// connection, or, behind a transaction pooler without MIGRATE_DATABASE_URL, only read (the
/// migrations are then a step of their own, `sume-inbox migrate`).
async fn open_store(config: &Config, shutdown: &CancellationToken) -> Result<Store, RunError> {
    let routes = &config.database;
    let store = Store::new(config.database_url.expose(), config.db_pool_size)?;
    let listen = routes.listen_url.as_ref().map(|u| u.expose());
    let store = match (routes.pooler, listen) {
        (Pooler::Transaction, listen) => store.behind_pooler(listen),
        (Pooler::None, Some(listen)) => store.listen_on(listen),
        (Pooler::None, None) => store,
    };
    if let Some(url) = routes.migrate_at_start(&config.database_url) {
        let applied = migrate_with_retry(url, shutdown).await?;
        tracing::info!(applied = ?applied, schema = migrate::latest(), "schema is current");
        return Ok(store);
    }
    let found = patiently(shutdown, || store.schema_migrations_missing()).await;
    match found {
        Ok(missing) if missing.is_empty() => {
            tracing::info!(
                schema = migrate::latest(),
                "schema is current (migrations are a step of their own)"
            );
            Ok(store)
        }
        Ok(missing) => Err(RunError::SchemaBehind(missing)),
        Err(e) if e.is_missing_schema() => Err(RunError::SchemaBehind(
            migrate::MIGRATIONS.iter().map(|m| m.0).collect(),
        )),
        Err(e) => Err(e.into()),
    }
}

/// The sweep: three services, each a task of its own. The two that ask Sume share one reader,
/// so one budget and one lease owner; in production every clock is the database's. Answers
/// the lease owner's name, which is also the instance's name in the fleet's picture.
fn spawn_sweep(
    config: &Config,
    store: &Store,
    metrics: &Arc<Metrics>,
    tracker: &TaskTracker,
    background: &CancellationToken,
    health: &Health,
) -> Result<String, RunError> {
    let status_client =
        sume_wire::StatusClient::new(&config.sume_api_url, config.sweep.request_timeout)
            .map_err(|e| RunError::Config(e.to_string()))?;
    let reader = StatusReader::new(
        store.clone(),
        metrics.clone(),
        status_client,
        config.api_keys.clone(),
        config.sweep.read_rate,
    )
    .with_daily_reads(config.sweep.daily_reads);
    let owner = reader.owner().to_owned();
    let inbox_check = InboxCheck::new(
        store.clone(),
        metrics.clone(),
        reader.clone(),
        config.sweep.clone(),
        Clock::Database,
    );
    tracker.spawn(inbox_check.run(background.clone(), health.clone()));
    let poll = Poll::new(
        store.clone(),
        metrics.clone(),
        reader,
        config.sweep.clone(),
        Clock::Database,
    );
    tracker.spawn(poll.run(background.clone(), health.clone()));
    let retention = Retention::new(
        store.clone(),
        metrics.clone(),
        config.sweep.clone(),
        Clock::Database,
    );
    tracker.spawn(retention.run(background.clone(), health.clone()));
    Ok(owner)
}

/// The ingest writers, each a task; answers the handle the webhook handler sends on. The
/// writers stop once every handle is dropped and the queue is empty.
fn spawn_ingest(
    config: &Config,
    store: &Store,
    metrics: &Arc<Metrics>,
    attach: AttachHandle,
    tracker: &TaskTracker,
    health: &Health,
) -> IngestHandle {
    let (ingest, handle) = Ingest::new(
        store.clone(),
        metrics.clone(),
        attach,
        config.ingest.clone(),
    );
    for i in 0..ingest.writers() {
        let writer = ingest.writer();
        let guard = health.task(format!("ingest-{i}"));
        tracker.spawn(writer.run(guard));
    }
    handle
}

/// The waiters of `?wait=` and the task that wakes them.
fn spawn_waiters(
    config: &Config,
    store: &Store,
    tracker: &TaskTracker,
    background: &CancellationToken,
    health: &Health,
) -> crate::actors::close_waiters::Waiters {
    let waiters = crate::actors::close_waiters::Waiters::new(config.wait.max_waiters);
    // Behind a transaction pooler without LISTEN_DATABASE_URL there is nothing to LISTEN on.
    let wakeup = match config.wait.wakeup {
        crate::config::Wakeup::Listen if !store.can_listen() => {
            tracing::info!("no direct connection for LISTEN: waiters are woken by polling");
            crate::config::Wakeup::Poll
        }
        wakeup => wakeup,
    };
    tracker.spawn(crate::actors::close_waiters::run(
        store.clone(),
        waiters.clone(),
        wakeup,
        config.wait.poll_interval,
        background.clone(),
        health.clone(),
    ));
    waiters
}

/// What the admin API's handlers share.
#[allow(clippy::too_many_arguments)]
fn admin_state(
    config: &Config,
    store: &Store,
    metrics: &Arc<Metrics>,
    health: &Health,
    attach: AttachHandle,
    waiters: crate::actors::close_waiters::Waiters,
    shutdown: &CancellationToken,
    instance: &str,
) -> admin::AdminState {
    admin::AdminState {
        store: store.clone(),
        attach,
        key_names: Arc::new(config.api_keys.iter().map(|k| k.name.clone()).collect()),
        metrics: metrics.clone(),
        health: health.clone(),
        waiters,
        max_wait: config.wait.max_wait,
        shutdown: shutdown.clone(),
        secrets: Arc::new(config.webhook_secrets.clone()),
        instance: instance.into(),
    }
}

/// The public port's router (the webhook, the health checks), the admin API's, and the registry
/// of webhooks reading their body that the public port sheds from.
fn routers(
    config: &Config,
    store: &Store,
    metrics: &Arc<Metrics>,
    health: &Health,
    ingest: IngestHandle,
    admin_state: admin::AdminState,
    admin_addr: std::net::SocketAddr,
) -> (axum::Router, axum::Router, webhook::BodyReaders) {
    let body_readers = webhook::BodyReaders::default();
    let webhook_app = webhook::router(webhook::WebhookState {
        secrets: Arc::new(config.webhook_secrets.clone()),
        tolerance: config.webhook_tolerance,
        max_body_bytes: config.max_body_bytes,
        body_timeout: config.port.body_timeout,
        body_memory: webhook::BodyBudget::new(config.port.max_body_memory),
        body_readers: body_readers.clone(),
        ingest,
        timeout: config.ingest.timeout,
        retry_after_secs: config.ingest.retry_after_secs,
        health: Readiness::new(health.clone(), store.clone()),
        metrics: metrics.clone(),
    });
    let access = admin::Access {
        operator: config.admin_token.clone(),
        app: config.admin_app_token.clone(),
        hosts: admin::Access::hosts_for(admin_addr, &config.admin_hosts),
    };
    let console_app = console::router(console::ConsoleState {
        admin: admin_state.clone(),
        access: Arc::new(access.clone()),
        inbox_grace: config.sweep.inbox_grace,
        sessions: Arc::default(),
    });
    let admin_app = admin::router(admin_state, access).merge(console_app);
    (webhook_app, admin_app, body_readers)
}

/// Stops the tasks that outlive the servers, waiting at most `timeout` for them.
async fn stop_tasks(background: &CancellationToken, tracker: &TaskTracker, timeout: Duration) {
    background.cancel();
    tracker.close();
    if tokio::time::timeout(timeout, tracker.wait()).await.is_err() {
        tracing::warn!("tasks did not stop within SHUTDOWN_TIMEOUT");
    }
}

/// Runs the daemon until `shutdown` is cancelled.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let store = open_store(&config, &shutdown).await?;
    // The public port's connections, the pool, the admin port and some to spare.
    crate::process::fd_limit::raise(
        (config.port.max_connections + config.db_pool_size + 256) as u64,
    );
    let health = Health::default();
    let metrics = Arc::new(Metrics::new());
    let tracker = TaskTracker::new();
    // Tasks that outlive the servers get their own token, cancelled after the servers stop.
    let background = CancellationToken::new();

    let (attach, attach_handle) =
        Attach::new(store.clone(), metrics.clone(), config.attach.clone());
    tracker.spawn(attach.run(background.clone(), health.clone()));

    let instance = spawn_sweep(&config, &store, &metrics, &tracker, &background, &health)?;
    // The heartbeat stops last, so its last write shows every other task finished.
    let fleet = Fleet::new(
        store.clone(),
        metrics.clone(),
        health.clone(),
        &instance,
        Clock::Database,
    )
    .start(config.fleet.clone());
    let ingest_handle = spawn_ingest(
        &config,
        &store,
        &metrics,
        attach_handle.clone(),
        &tracker,
        &health,
    );

    let waiters = spawn_waiters(&config, &store, &tracker, &background, &health);
    let admin_state = admin_state(
        &config,
        &store,
        &metrics,
        &health,
        attach_handle,
        waiters,
        &shutdown,
        &instance,
    );
    let (webhook_app, admin_app, body_readers) = routers(
        &config,
        &store,
        &metrics,
        &health,
        ingest_handle,
        admin_state,
        listeners.admin.local_addr()?,
    );
    tracing::info!(
        listen = %listeners.webhook.local_addr()?,
        admin = %listeners.admin.local_addr()?,
        "serving"
    );
    let serve_webhook = server::serve(
        listeners.webhook,
        webhook_app,
        body_readers,
        config.port.clone(),
        config.ingest.retry_after_secs,
        metrics.clone(),
        shutdown.clone(),
    );
    let serve_admin = {
        let shutdown = shutdown.clone();
        axum::serve(listeners.admin, admin_app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
    };
    // Boxed, so it can be dropped (with every ingest handle it holds) after a forced stop.
    let mut servers =
        Box::pin(async move { tokio::try_join!(serve_webhook, serve_admin.into_future()) });
    crate::process::systemd::ready();
    let served = tokio::select! {
        r = &mut servers => r.map(|_| ()),
        _ = async { shutdown.cancelled().await; tokio::time::sleep(config.shutdown_timeout).await } => {
            tracing::warn!("in-flight requests did not finish within SHUTDOWN_TIMEOUT; dropping them unanswered");
            Ok(())
        }
    };
    // The servers (and with them every ingest handle) are gone: the writers drain and stop.
    drop(servers);
    stop_tasks(&background, &tracker, config.shutdown_timeout).await;
    fleet.stop().await;
    tracing::info!("stopped");
    served.map_err(RunError::Io)
}
