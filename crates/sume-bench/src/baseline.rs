//! The per-request baseline: the webhook receiver everyone writes first. It verifies the
//! signature, reads the body, and stores the event with one `insert ... on conflict do nothing`
//! in autocommit (one transaction, one commit, one WAL flush per request) before answering.
//!
//! Same signature check, same parsing, same row, same durability as sume-inbox; only the
//! batching differs. It runs as a child process (`sume-bench baseline-server`) so that it
//! does not share the load generator's runtime, exactly like the daemon.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use deadpool_postgres::Pool;
use sume_inbox::decisions::delivery::{verify_delivery, Delivery, Received, Verified};
use sume_wire::{headers, Secret};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

#[derive(Clone)]
struct Baseline {
    secrets: Arc<Vec<Secret>>,
    pool: Pool,
}

/// Serves until stdin closes (the parent ended) or the process is signalled. Prints
/// `listening on ADDR` on stdout once it accepts connections.
pub async fn serve(
    database_url: &str,
    secret: Secret,
    pool_size: usize,
    listen: SocketAddr,
) -> anyhow::Result<()> {
    // The daemon's own pool settings, so the two differ only in how they write.
    let pool = sume_inbox::db::Store::new(database_url, pool_size)?
        .pool()
        .clone();
    let state = Baseline {
        secrets: Arc::new(vec![secret]),
        pool,
    };
    let app = Router::new()
        .route("/webhooks/sume", post(receive))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(state);
    let listener = TcpListener::bind(listen).await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(parent_gone())
        .await?;
    Ok(())
}

/// Resolves when stdin reaches its end: the parent closed it or exited.
async fn parent_gone() {
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while let Ok(n) = stdin.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}

async fn receive(State(state): State<Baseline>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let received = Received {
        timestamp: header(headers::TIMESTAMP),
        signature: header(headers::SIGNATURE),
        event_id: header(headers::EVENT_ID),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let event = match verify_delivery(received, body, &state.secrets, now, 300) {
        Ok(Verified {
            delivery: Delivery::Event(event),
            ..
        }) => event,
        Ok(_) => return StatusCode::UNPROCESSABLE_ENTITY,
        Err(_) => return StatusCode::UNAUTHORIZED,
    };
    let Ok(client) = state.pool.get().await else {
        return StatusCode::SERVICE_UNAVAILABLE;
    };
    let stored = crate::sql::EVENTS_INSERT_ONE
        .execute(
            &client,
            &[
                &event.event_id,
                &event.job_id,
                &event.event_type,
                &event.status,
                &event.result,
                &event.body.as_ref(),
                &event.signed_at,
                &event.signature,
            ],
        )
        .await;
    match stored {
        Ok(_) => StatusCode::NO_CONTENT,
        Err(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}
