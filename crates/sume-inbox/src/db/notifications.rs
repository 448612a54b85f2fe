//! LISTEN connections: one connection outside the pool per channel listened to, to the direct
//! URL (LISTEN_DATABASE_URL behind a transaction pooler, else DATABASE_URL), whose
//! notifications arrive as job ids on a channel.

use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::{DbError, Statement, Store};

/// A connection listening on one channel; notifications go on until it is dropped or lost.
pub struct Listener {
    /// Each notification's payload: one job id.
    pub job_ids: mpsc::UnboundedReceiver<String>,
    /// Ends with the connection's error when it is lost.
    pub connection: tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
    /// Dropping it closes the connection.
    pub client: tokio_postgres::Client,
}

impl Store {
    /// Opens a connection outside the pool and runs `listen` (a `LISTEN` statement) on it; an
    /// error when this store has no direct connection for LISTEN (behind a pooler without
    /// LISTEN_DATABASE_URL: see [`Store::can_listen`]).
    pub(super) async fn listen(&self, listen: Statement) -> Result<Listener, DbError> {
        let url = self.listen_url.as_deref().ok_or_else(|| {
            DbError::Config("no direct connection for LISTEN behind the pooler".into())
        })?;
        let target = super::target(url)?;
        let (client, mut connection) = target
            .config
            .connect(target.tls)
            .await
            .map_err(|e| super::reach::unreachable(self.listen_setting, url, &e))?;
        let (tx, job_ids) = mpsc::unbounded_channel();
        let connection = tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                if let tokio_postgres::AsyncMessage::Notification(n) = message? {
                    if tx.send(n.payload().to_owned()).is_err() {
                        break;
                    }
                }
            }
            Ok(())
        });
        client
            .batch_execute(listen.sql())
            .await
            .map_err(|e| DbError::query(listen.name(), e))?;
        Ok(Listener {
            job_ids,
            connection,
            client,
        })
    }
}
