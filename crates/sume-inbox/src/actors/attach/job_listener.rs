//! Attach's LISTEN connection: the `sume_jobs` notifications of committed job rows, forwarded to
//! the attach task as registrations. It reconnects with backoff and asks for a catch-up scan after
//! every (re)connect, since notifications sent while it was down are gone.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{AttachHandle, Msg};
use crate::actors::supervision::Actor;
use crate::db::{DbError, Store};

/// Attach's LISTEN connection, to the store's direct URL; start it only where the store can
/// listen ([`Store::can_listen`]).
pub struct JobListener {
    store: Store,
    attach: AttachHandle,
}

impl JobListener {
    /// The listener that forwards job rows' notifications to `attach`.
    pub fn new(store: Store, attach: AttachHandle) -> JobListener {
        JobListener { store, attach }
    }
}

impl Actor for JobListener {
    fn name(&self) -> String {
        "attach-listen".into()
    }

    async fn run(self, stop: CancellationToken) {
        listen(&self.store, &self.attach, &stop).await
    }
}

/// Keeps a LISTEN connection open, forwarding each notification; reconnects with backoff and
/// asks for a catch-up scan after every (re)connect, since notifications sent while it was
/// down are gone.
async fn listen(store: &Store, attach: &AttachHandle, shutdown: &CancellationToken) {
    let mut backoff = Duration::from_millis(250);
    while !shutdown.is_cancelled() {
        match listen_once(store, attach, shutdown).await {
            Ok(()) => backoff = Duration::from_millis(250),
            Err(e) => {
                tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "LISTEN connection lost");
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}

async fn listen_once(
    store: &Store,
    attach: &AttachHandle,
    shutdown: &CancellationToken,
) -> Result<(), DbError> {
    let mut listener = store.jobs_listen().await?;
    tracing::debug!("listening for job rows");
    let _ = attach.tx.send(Msg::Listening(true)).await;
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            n = listener.job_ids.recv_many(&mut batch, 1024) => {
                if n == 0 {
                    break;
                }
                attach.registered(std::mem::take(&mut batch));
            }
        }
    }
    let _ = attach.tx.send(Msg::Listening(false)).await;
    drop(listener.client);
    match listener.connection.await {
        Ok(Err(e)) => Err(DbError::Connect(e)),
        _ => Err(DbError::Closed),
    }
}
