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
        .layer(axum::middleware::map_response(enveloped))
        .with_state(app)
}

/// An error the framework answers on its own (a body over its limit, an id that is not UTF-8,
/// a repeated query field, a method no route takes, a control body that does not read) in
/// Sume's envelope like every other error, its words kept as the message and `Allow` kept.
async fn enveloped(response: axum::response::Response) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if json || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let text = axum::body::to_bytes(response.into_body(), 64 << 10)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let code = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::NOT_FOUND => "not_found",
        s if s.is_server_error() => "internal_error",
        _ => "invalid_request",
    };
    let message = match text.is_empty() {
        true => status.canonical_reason().unwrap_or("error").to_owned(),
        false => text,
    };
    let mut answer = api::error::ApiError::new(status, code, message).into_response();
    if let Some(allow) = allow {
        answer.headers_mut().insert(header::ALLOW, allow);
    }
    answer
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
