//! The PostgreSQL ceiling for this write: the same rows, stored with the daemon's own
//! statement (`events_insert`, a multi-row `unnest` insert), but in large transactions sent
//! back to back with no HTTP in front. No webhook receiver writing to this table can store
//! more rows per second than this on the same machine.
//!
//! The rows are made once (signed, parsed and keyed exactly as the daemon keys them) and then
//! reused with fresh ids, so that making them costs next to nothing while the clock runs.

use std::time::Duration;

use sume_wire::{dedupe_key, parse_event};
use tokio::time::Instant;

use crate::webhook::Generator;

/// What the ceiling run stored.
#[derive(Debug, Clone, Copy)]
pub struct Ceiling {
    /// Rows committed, over every connection.
    pub rows: u64,
    /// From the start to the last commit (a little past the measured time: the transaction
    /// running at the deadline finishes).
    pub elapsed: Duration,
    /// Rows per transaction.
    pub batch: usize,
    /// Connections inserting at once.
    pub connections: usize,
}

impl Ceiling {
    /// Committed rows per second: what the other rows of the table are compared with; 0 when
    /// no time passed.
    pub fn rows_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs == 0.0 {
            0.0
        } else {
            self.rows as f64 / secs
        }
    }
}

/// A row of `sume.events`, as the daemon writes it for one delivery.
pub use sume_inbox::db::NewEvent as Row;

/// `n` rows from real deliveries.
pub fn template(generator: &Generator, n: usize, now: i64) -> Vec<Row> {
    (0..n)
        .map(|_| {
            let d = generator.next(now);
            let parsed = parse_event(&d.body).expect("generated bodies parse");
            Row {
                event_id: dedupe_key(&parsed),
                header_event_id: Some(d.event_id.clone()),
                job_id: parsed.job_id,
                event_type: parsed.event_type,
                status: parsed.status,
                result: parsed.result,
                body: d.body,
                signed_at: d.timestamp,
                signature: d.signature,
            }
        })
        .collect()
}

/// Inserts batches of `template.len()` rows, each in its own transaction, on `connections`
/// connections at once, until `duration` has passed. Answers the rows committed.
pub async fn measure(
    url: &str,
    template: Vec<Row>,
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Ceiling> {
    let batch = template.len();
    let template = std::sync::Arc::new(template);
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..connections {
        let url = url.to_owned();
        let template = template.clone();
        tasks.spawn(async move { insert_until(&url, &template, c, end).await });
    }
    let mut rows = 0;
    let mut last = start;
    while let Some(done) = tasks.join_next().await {
        let (n, at) = done??;
        rows += n;
        last = last.max(at);
    }
    Ok(Ceiling {
        rows,
        elapsed: last - start,
        batch,
        connections,
    })
}

async fn insert_until(
    url: &str,
    template: &[Row],
    connection: usize,
    end: Instant,
) -> anyhow::Result<(u64, Instant)> {
    let (mut client, driver) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(driver);
    let stmt = client
        .prepare(sume_inbox::db::sql::EVENTS_INSERT.sql())
        .await?;
    let mut rows = 0u64;
    let mut last = Instant::now();
    let mut round = 0u64;
    while Instant::now() < end {
        // Fresh ids for this round, sorted as the daemon sorts a batch.
        let mut keyed: Vec<(String, String, &Row)> = template
            .iter()
            .map(|r| {
                (
                    format!("{}~{connection}.{round}", r.event_id),
                    format!("{}~{connection}.{round}", r.job_id),
                    r,
                )
            })
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let ids: Vec<&str> = keyed.iter().map(|k| k.0.as_str()).collect();
        let jobs: Vec<&str> = keyed.iter().map(|k| k.1.as_str()).collect();
        let types: Vec<Option<&str>> = keyed.iter().map(|k| k.2.event_type.as_deref()).collect();
        let statuses: Vec<Option<&str>> = keyed.iter().map(|k| k.2.status.as_deref()).collect();
        let results: Vec<Option<&str>> = keyed.iter().map(|k| k.2.result.as_deref()).collect();
        let bodies: Vec<&[u8]> = keyed.iter().map(|k| k.2.body.as_ref()).collect();
        let signed: Vec<i64> = keyed.iter().map(|k| k.2.signed_at).collect();
        let sigs: Vec<&str> = keyed.iter().map(|k| k.2.signature.as_str()).collect();
        // The header's id beside the key, equal to it as in the daemon's rows (the generated
        // envelope's id is the one its header carries).
        let hints: Vec<Option<&str>> = keyed.iter().map(|k| Some(k.0.as_str())).collect();
        let tx = client.transaction().await?;
        let stored = tx
            .query(
                &stmt,
                &[
                    &ids, &jobs, &types, &statuses, &results, &bodies, &signed, &sigs, &hints,
                ],
            )
            .await?;
        tx.commit().await?;
        rows += stored.len() as u64;
        last = Instant::now();
        round += 1;
    }
    Ok((rows, last))
}
