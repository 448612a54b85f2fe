//! Serving the simulator: [`run`] on a listener until shutdown, and [`RunningSim`], a handle
//! that starts it on a port of its own in the background (what tests use).
//!
//! `run` is thin: it builds the state, serves the API and `/sim/` routes, and on shutdown
//! stops accepting, cancels the jobs' tasks (pending deliveries are abandoned and marked
//! `aborted`) and waits for them.

use std::net::SocketAddr;

use anyhow::Context;
use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::app::{App, Shared};
use crate::config::SimConfig;
use crate::{api, control, inspect};

/// Every route: the API under `/v1` and `/api/v1`, the simulator's own under `/sim`.
fn router(app: Shared) -> Router {
    Router::new()
        .nest("/v1", api::routes(&app))
        .nest("/api/v1", api::routes(&app))
        .merge(inspect::routes())
        .merge(control::routes())
        .fallback(api::no_route)
        .with_state(app)
}

/// Serves the simulator on `listener` until `shutdown` is cancelled.
///
/// Fails at once, naming the setting, when `config` does not validate.
pub async fn run(
    config: SimConfig,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let app = App::new(config, shutdown.child_token())?;
    let addr = listener.local_addr().context("listener address")?;
    tracing::info!(%addr, keys = app.keys.callers().len(), "Sume simulator listening");
    axum::serve(listener, router(app.clone()))
        .with_graceful_shutdown(shutdown.clone().cancelled_owned())
        .await
        .context("serving the simulator")?;
    app.shutdown.cancel();
    app.tasks.close();
    app.tasks.wait().await;
    tracing::info!(jobs = app.store.len(), "Sume simulator stopped");
    Ok(())
}

/// A simulator running in the background on its own port; stopped by [`RunningSim::stop`]
/// or when dropped.
#[derive(Debug)]
pub struct RunningSim {
    /// The address it listens on, with the port the system picked when `listen` said 0.
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl RunningSim {
    /// Validates `config`, binds `config.listen` (port 0 in [`SimConfig::for_tests`]) and
    /// serves in a background task.
    pub async fn start(config: SimConfig) -> anyhow::Result<RunningSim> {
        config.validate()?;
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(config, listener, shutdown.clone()));
        Ok(RunningSim {
            addr,
            shutdown,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The API base, `http://127.0.0.1:PORT/v1` (what `SUME_API_URL` should say).
    pub fn api_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// `http://127.0.0.1:PORT/sim/{path}`.
    pub fn sim_url(&self, path: &str) -> String {
        format!("{}/sim/{}", self.base_url(), path.trim_start_matches('/'))
    }

    /// Stops the simulator and waits until it has.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        match self.task.take() {
            Some(task) => task.await.context("simulator task panicked")?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
