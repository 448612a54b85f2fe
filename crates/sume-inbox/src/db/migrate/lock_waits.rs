//! How a migration run waits for its locks: the advisory lock that makes it the only one
//! ([`lock`]), then each migration's table locks, taken without stopping ingest: each attempt
//! runs in its own transaction under a short `lock_timeout`, and one that cannot have its locks
//! in that time is rolled back and tried again after a pause, while the runner keeps the
//! advisory lock. Where the run stands ([`Step`]) is kept for a caller that reports it (a
//! starting daemon's `/readyz`).
//!
//! Why: `alter table sume.events ...` asks for an access exclusive lock. While any transaction
//! holds even a share lock on the table (a report left `idle in transaction`, a long `select`),
//! the `alter` waits, and every lock asked for after it queues behind it, ingest's inserts
//! included: the fleet answers 503 until that transaction ends. Under `lock_timeout` the wait
//! ends after [`LockWaits::timeout`] and the queue behind it drains at once, so an insert waits
//! at most that long, far below INGEST_TIMEOUT, and is answered 2xx. Each refused attempt is
//! logged with the sessions that hold locks on the schema's tables since before it began.
//!
//! Migrations built with `create index concurrently` (`-- index concurrently:`) are not run
//! this way: their lock (share update exclusive) never blocks a write, and their wait for older
//! transactions is the build's own, which a timeout would only cut into an invalid index.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use crate::db::DbError;

/// An arbitrary constant naming "sume-inbox migrations" among advisory locks.
const LOCK_KEY: i64 = 0x5355_4d45_494e_4258;

/// How often an instance that finds the lock taken tries again.
const LOCK_RETRY: Duration = Duration::from_millis(200);

/// Where a migration run stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Step {
    /// Reading which migrations the schema has.
    #[default]
    Reading,
    /// Waiting, since then, for the advisory lock another session holds (another instance
    /// migrating).
    Locking(Instant),
    /// Applying this migration (its version and name).
    Applying(i32, &'static str),
}

/// How long each attempt may wait for its locks, and the pauses between attempts.
#[derive(Debug, Clone)]
pub struct LockWaits {
    /// `lock_timeout` of each attempt: the longest any statement queued behind the migration
    /// (an ingest insert) waits for it.
    pub timeout: Duration,
    /// The pause after the first refused attempt; each later one doubles it.
    pub first_pause: Duration,
    /// The longest pause between two attempts.
    pub max_pause: Duration,
    /// Attempts refused so far (shared by clones), for a caller that reports progress.
    pub refused: Arc<AtomicU64>,
    /// Where the run stands (shared by clones), for a caller that reports progress.
    pub step: Arc<Mutex<Step>>,
}

impl Default for LockWaits {
    /// One second per attempt (INGEST_TIMEOUT is 10 s by default), pauses from one second
    /// doubling to 30 s: an open transaction delays the migration, never ingest.
    fn default() -> LockWaits {
        LockWaits {
            timeout: Duration::from_secs(1),
            first_pause: Duration::from_secs(1),
            max_pause: Duration::from_secs(30),
            refused: Arc::default(),
            step: Arc::default(),
        }
    }
}

impl LockWaits {
    /// Attempts refused at `lock_timeout` so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Where the run stands.
    pub fn step(&self) -> Step {
        *self.step.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says where the run stands.
    pub(super) fn now(&self, step: Step) {
        *self.step.lock().unwrap_or_else(|p| p.into_inner()) = step;
    }
}

/// Takes the migration lock, trying again while another instance holds it. Never waits inside
/// a statement: `create index concurrently` waits for every transaction older than its
/// snapshot, so an instance blocked in `pg_advisory_lock` would deadlock the one building.
pub(super) async fn lock(client: &Client, waits: &LockWaits) -> Result<(), DbError> {
    let started = Instant::now();
    let mut told = Duration::ZERO;
    loop {
        let taken: bool = client
            .query_one("select pg_try_advisory_lock($1)", &[&LOCK_KEY])
            .await
            .map_err(|e| DbError::query("migrate_lock", e))?
            .get(0);
        if taken {
            return Ok(());
        }
        waits.now(Step::Locking(started));
        if started.elapsed() >= told + Duration::from_secs(10) {
            told = started.elapsed();
            tracing::info!(
                waited_secs = told.as_secs(),
                "another instance is migrating the schema; waiting for it"
            );
        }
        tokio::time::sleep(LOCK_RETRY).await;
    }
}

/// Lets the migration lock go (a dropped connection lets it go too).
pub(super) async fn unlock(client: &Client) {
    let _ = client
        .execute("select pg_advisory_unlock($1)", &[&LOCK_KEY])
        .await;
}

/// Applies one migration in a transaction, trying again while its locks cannot be had within
/// `waits.timeout` (or it met a deadlock); any other error ends it.
pub(super) async fn apply_in_transaction(
    client: &mut Client,
    version: i32,
    name: &str,
    sql: &str,
    waits: &LockWaits,
) -> Result<(), DbError> {
    let mut pause = waits.first_pause;
    loop {
        let failed = match attempt(client, version, name, sql, waits.timeout).await {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let waited = failed.code().is_some_and(|c| {
            *c == SqlState::LOCK_NOT_AVAILABLE || *c == SqlState::T_R_DEADLOCK_DETECTED
        });
        if !waited {
            return Err(DbError::Migration(version, failed));
        }
        let refused = waits.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let holders = holders(client, waits.timeout).await;
        tracing::warn!(
            version,
            name,
            attempt = refused,
            lock_timeout_ms = waits.timeout.as_millis() as u64,
            next_in_ms = pause.as_millis() as u64,
            holders = %holders,
            "migration could not take its locks in time (rolled back, ingest goes on); trying again"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(waits.max_pause);
    }
}

/// One attempt: the migration and its row in `sume.schema_migrations`, under `lock_timeout`
/// (`set local`: it ends with the transaction). Rolled back on any error.
async fn attempt(
    client: &mut Client,
    version: i32,
    name: &str,
    sql: &str,
    timeout: Duration,
) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let ms = timeout.as_millis().max(1);
    let done = async {
        tx.batch_execute(&format!("set local lock_timeout = '{ms}ms'"))
            .await?;
        tx.batch_execute(sql).await?;
        tx.execute(
            "insert into sume.schema_migrations (version, name) values ($1, $2)",
            &[&version, &name],
        )
        .await
    }
    .await;
    match done {
        Ok(_) => tx.commit().await,
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// The sessions holding locks on the schema's tables in transactions older than `older`, the
/// oldest first (at most five): what a migration refused at `lock_timeout` waited for. Never
/// fails: a read that fails says so instead.
async fn holders(client: &Client, older: Duration) -> String {
    let rows = client
        .query(
            "select a.pid, coalesce(a.usename::text, '-'), coalesce(a.application_name, ''),
                    coalesce(a.state, '-'),
                    extract(epoch from now() - a.xact_start)::float8,
                    string_agg(distinct c.relname::text, ',' order by c.relname::text),
                    left(coalesce(a.query, ''), 120)
             from pg_locks l
             join pg_class c on c.oid = l.relation
             join pg_namespace n on n.oid = c.relnamespace and n.nspname = 'sume'
             join pg_stat_activity a on a.pid = l.pid
             where l.granted
               and l.pid <> pg_backend_pid()
               and a.xact_start < now() - make_interval(secs => $1)
             group by a.pid, a.usename, a.application_name, a.state, a.xact_start, a.query
             order by a.xact_start
             limit 5",
            &[&older.as_secs_f64()],
        )
        .await;
    match rows {
        Err(e) => format!("(not known: {e})"),
        Ok(rows) if rows.is_empty() => {
            "(none left: the transaction it waited for has ended)".into()
        }
        Ok(rows) => rows
            .iter()
            .map(|r| {
                format!(
                    "pid {} (user {}, application {:?}, {}, transaction open {:.0} s, on {}): {:?}",
                    r.get::<_, i32>(0),
                    r.get::<_, String>(1),
                    r.get::<_, String>(2),
                    r.get::<_, String>(3),
                    r.get::<_, f64>(4),
                    r.get::<_, String>(5),
                    r.get::<_, String>(6),
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}
