//! One sample of the soak, taken every `--sample-every`: the daemon's resident set, the p99
//! of the deliveries due since the previous sample, and for each table of the daemon's schema
//! its rows, dead tuples and bytes (table + indexes + TOAST).

use std::time::Duration;

use crate::sql;
use crate::stack;

/// The tables whose rows arrive with the traffic, counted exactly (the others from the
/// statistics).
pub const GROWING: [&str; 4] = ["events", "jobs", "job_closes", "inbox_checks"];

/// A quantity read from a sample (`None` where it has no value, e.g. an empty table's bytes
/// per row): what a chart line and a verdict's series read.
pub type Reading = Box<dyn Fn(&Sample) -> Option<f64>>;

/// One table at one sample.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSample {
    /// The table's name in the `sume` schema.
    pub name: String,
    /// Live rows: exact for [`GROWING`], else the statistics' estimate.
    pub live: u64,
    /// Dead tuples, from the statistics (`n_dead_tup`).
    pub dead: u64,
    /// `pg_total_relation_size`: table, indexes and TOAST.
    pub bytes: u64,
}

impl TableSample {
    /// Bytes per live row; `None` for an empty table.
    pub fn bytes_per_row(&self) -> Option<f64> {
        (self.live > 0).then(|| self.bytes as f64 / self.live as f64)
    }
}

/// Everything one sample holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Since the load started.
    pub at: Duration,
    /// The daemon's resident set now (VmRSS), KiB.
    pub rss_kib: u64,
    /// p99 of the deliveries due in the window that ends here (from their intended time).
    pub p99: Duration,
    /// Deliveries in that window.
    pub deliveries: u64,
    /// Every table of the schema.
    pub tables: Vec<TableSample>,
}

impl Sample {
    /// The table named `name`, when the schema has it.
    pub fn table(&self, name: &str) -> Option<&TableSample> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// Bytes of every table of the schema.
    pub fn schema_bytes(&self) -> u64 {
        self.tables.iter().map(|t| t.bytes).sum()
    }
}

/// Reads the database's side of a sample and the daemon's memory.
pub async fn take(
    db: &tokio_postgres::Client,
    daemon_pid: u32,
    at: Duration,
    window: &crate::stats::Latencies,
) -> anyhow::Result<Sample> {
    let rss_kib = stack::memory(daemon_pid)?.now_kib;
    let exact = db.query_one(sql::SERVER_LIVE_ROWS.sql(), &[]).await?;
    let mut tables = Vec::new();
    for row in db.query(sql::SERVER_TABLES.sql(), &[]).await? {
        let name: String = row.get(0);
        let live = match GROWING.iter().position(|g| *g == name) {
            Some(i) => exact.get::<_, i64>(i) as u64,
            None => row.get::<_, i64>(1).max(0) as u64,
        };
        tables.push(TableSample {
            name,
            live,
            dead: row.get::<_, i64>(2).max(0) as u64,
            bytes: row.get::<_, i64>(3).max(0) as u64,
        });
    }
    Ok(Sample {
        at,
        rss_kib,
        p99: window.quantile(0.99),
        deliveries: window.count(),
        tables,
    })
}
