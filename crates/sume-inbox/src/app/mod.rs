//! `run`: wires the actors together and serves until shutdown.
//!
//! `main` parses the configuration and calls [`run`] with bound listeners and a shutdown
//! token; tests call the same function on port-0 listeners. While the start waits for the
//! database or migrates, LISTEN_ADDR answers that it is starting
//! ([`crate::http::starting`]).
//!
//! Shutdown (the token is cancelled, e.g. on SIGTERM): the servers stop accepting and let
//! in-flight requests finish; a request still waiting for its commit gets its answer or, past
//! SHUTDOWN_TIMEOUT, is dropped unanswered (never a 2xx without a commit). When the webhook
//! server is done, the ingest channel closes and the writers drain it; then the other tasks stop.

mod starting;
mod startup;
mod wiring;

pub use startup::{migrate_with_retry, STARTUP_PATIENCE};
pub use wiring::Wiring;

use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::actors::heartbeat::LAST_FLUSH_TIMEOUT;
use crate::config::Config;
use crate::db::{migrate, DbError};
use crate::http::conns::Conns;
use crate::http::server;
use crate::process::fd_limit;

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

/// Runs the daemon until `shutdown` is cancelled.
pub async fn run(
    mut config: Config,
    listeners: Listeners,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    // The caps first: LISTEN_ADDR answers from the start on, its connections counted in one
    // registry against the public port's cap, across the handover to the daemon's server.
    let admin_connections = fit_to_open_files(&mut config);
    let public_conns = Arc::new(Conns::new(config.port.max_connections));
    let opened = starting::open_store(&config, &listeners.webhook, public_conns.clone(), &shutdown);
    let store = match opened.await {
        Ok(store) => store,
        // SIGTERM or SIGINT while the database was waited for: a stop asked for, not a failure.
        Err(e) if shutdown.is_cancelled() => {
            tracing::info!(error = %e, "start abandoned on request while waiting for the database");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let shutdown_timeout = config.shutdown_timeout;
    let w = Wiring::new(config, store, shutdown.clone());
    let attach = w.start_attach();
    let instance = w.start_sweep()?;
    let heartbeat = w.start_heartbeat(&instance);
    let ingest = w.start_ingest(attach.clone());
    let waiters = w.start_waiters();
    let admin_addr = listeners.admin.local_addr()?;
    let admin_app = w.admin_router(w.admin_state(attach, waiters, &instance), admin_addr);
    tracing::info!(listen = %listeners.webhook.local_addr()?, admin = %admin_addr, "serving");
    let public_port = w.public_port(ingest, public_conns);
    let serve_webhook = server::serve(listeners.webhook, public_port, shutdown.clone());
    let admin_port = w.admin_port(admin_app, admin_connections);
    let serve_admin = server::serve(listeners.admin, admin_port, shutdown.clone());
    // Boxed, so it can be dropped (with every ingest handle it holds) after a forced stop.
    let servers = Box::pin(async move { tokio::try_join!(serve_webhook, serve_admin) });
    crate::process::systemd::ready();
    let served = until_served(servers, &shutdown, shutdown_timeout).await;
    // The servers (and with them every ingest handle) are gone: the writers drain and stop.
    if !w.tasks.stop(shutdown_timeout).await {
        tracing::warn!("tasks did not stop within SHUTDOWN_TIMEOUT");
    }
    if !heartbeat
        .stop(LAST_FLUSH_TIMEOUT + Duration::from_secs(1))
        .await
    {
        tracing::warn!("the heartbeat's last write did not finish in time");
    }
    tracing::info!("stopped");
    served.map_err(RunError::Io)
}

/// Raises the open-file limit and cuts the ports' caps to what it holds ([`fd_limit::fit`]):
/// the pool and some to spare come first, then the public port (its MAX_IN_FLIGHT kept below
/// a cap so cut), then the admin port. Sets the public port's in `config`, warning of each cut;
/// answers the admin port's.
fn fit_to_open_files(config: &mut Config) -> usize {
    let wanted = fd_limit::Caps {
        connections: config.port.max_connections,
        in_flight: config.port.max_in_flight,
        admin_connections: config.max_admin_connections,
    };
    let needed = (wanted.connections + config.db_pool_size + wanted.admin_connections) as u64
        + fd_limit::SPARE;
    let fitted = fd_limit::fit(fd_limit::raise(needed), config.db_pool_size, wanted);
    if fitted.connections < wanted.connections {
        tracing::warn!(
            connections = fitted.connections,
            max_connections = wanted.connections,
            in_flight = fitted.in_flight,
            max_in_flight = wanted.in_flight,
            "the open-file limit leaves the public port fewer connections than MAX_CONNECTIONS"
        );
    }
    if fitted.admin_connections < wanted.admin_connections {
        tracing::warn!(
            admin_connections = fitted.admin_connections,
            max_admin_connections = wanted.admin_connections,
            "the open-file limit leaves the admin port fewer connections than MAX_ADMIN_CONNECTIONS"
        );
    }
    config.port.max_connections = fitted.connections;
    config.port.max_in_flight = fitted.in_flight;
    fitted.admin_connections
}

/// Waits for the servers to finish after `shutdown` (their requests in flight answered), at
/// most `timeout` after it; then they are dropped, with any request still unanswered.
async fn until_served<F, T>(
    servers: std::pin::Pin<Box<F>>,
    shutdown: &CancellationToken,
    timeout: Duration,
) -> std::io::Result<()>
where
    F: std::future::Future<Output = std::io::Result<T>>,
{
    let mut servers = servers;
    tokio::select! {
        r = &mut servers => r.map(|_| ()),
        _ = async { shutdown.cancelled().await; tokio::time::sleep(timeout).await } => {
            tracing::warn!("in-flight requests did not finish within SHUTDOWN_TIMEOUT; dropping them unanswered");
            Ok(())
        }
    }
}
