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
    let mut backoff = Backoff::default();
    while !shutdown.is_cancelled() {
        let wait = match listen_once(store, attach, shutdown).await {
            Ended::Shutdown => break,
            Ended::Unopened(e) => {
                let wait = backoff.failed();
                tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "cannot open the LISTEN connection");
                wait
            }
            Ended::Lost { error, held } => {
                let wait = backoff.lost(held);
                tracing::warn!(error = %error, held_ms = held.as_millis() as u64, retry_in_ms = wait.as_millis() as u64, "LISTEN connection lost");
                wait
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// How one LISTEN connection ended.
enum Ended {
    /// On shutdown.
    Shutdown,
    /// It could not be opened (or LISTEN refused).
    Unopened(DbError),
    /// It was open `held` long, then lost.
    Lost { error: DbError, held: Duration },
}

/// The wait before the next LISTEN connection: doubled after each failure, from
/// [`Backoff::FIRST`] to [`Backoff::MOST`], and back to the first once a connection stayed up
/// [`Backoff::STEADY`] (it worked: its loss is a new fault, not the same one going on).
struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            next: Backoff::FIRST,
        }
    }
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(250);
    const MOST: Duration = Duration::from_secs(10);
    const STEADY: Duration = Duration::from_secs(5);

    /// The wait after a connection that could not be opened.
    fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (wait * 2).min(Backoff::MOST);
        wait
    }

    /// The wait after a connection lost once open `held` long.
    fn lost(&mut self, held: Duration) -> Duration {
        if held >= Backoff::STEADY {
            self.next = Backoff::FIRST;
        }
        self.failed()
    }
}

async fn listen_once(store: &Store, attach: &AttachHandle, shutdown: &CancellationToken) -> Ended {
    let mut listener = match store.jobs_listen().await {
        Ok(listener) => listener,
        Err(e) => return Ended::Unopened(e),
    };
    let opened = tokio::time::Instant::now();
    tracing::debug!("listening for job rows");
    let _ = attach.tx.send(Msg::Listening(true)).await;
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ended::Shutdown,
            n = listener.job_ids.recv_many(&mut batch, 1024) => {
                if n == 0 {
                    break;
                }
                attach.registered(std::mem::take(&mut batch));
            }
        }
    }
    let held = opened.elapsed();
    let _ = attach.tx.send(Msg::Listening(false)).await;
    drop(listener.client);
    let error = match listener.connection.await {
        Ok(Err(e)) => DbError::Lost(e),
        _ => DbError::Closed,
    };
    Ended::Lost { error, held }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_while_nothing_connects_and_starts_afresh_after_a_connection_that_held() {
        let mut b = Backoff::default();
        let waits: Vec<u128> = (0..7).map(|_| b.failed().as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 4000, 8000, 10_000]);
        assert_eq!(b.failed(), Backoff::MOST);
        // A connection that worked a while, then lost: the back-off starts afresh.
        assert_eq!(b.lost(Duration::from_secs(60)), Backoff::FIRST);
        assert_eq!(b.lost(Duration::from_secs(60)), Backoff::FIRST);
        // Lost as soon as opened, again and again: the same fault going on, so it doubles.
        assert_eq!(b.lost(Duration::from_millis(100)).as_millis(), 500);
        assert_eq!(b.lost(Duration::from_millis(100)).as_millis(), 1000);
    }
}
