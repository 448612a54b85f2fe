//! Embedded, numbered migrations (`sql/NNNN_name.sql`), applied under an advisory lock so that
//! any number of instances may start at once: the first applies, the others wait and find
//! nothing left to do. Each migration takes its table locks under a short `lock_timeout` and
//! tries again while they cannot be had, so an open transaction delays the migration, never the
//! fleet's writes queued behind it. Both waits are in `lock_waits.rs`, with where the run stands
//! ([`Step`]) for a caller that reports it.

use tokio_postgres::Client;

use super::DbError;

mod access;
mod lock_waits;

pub use access::{schema_access, SchemaAccess};
pub use lock_waits::{LockWaits, Step};

/// A migration: its version, its name (the file is `sql/{version:04}_{name}.sql`) and its SQL.
pub type Migration = (i32, &'static str, &'static str);

/// Every migration, in order. A test checks this list against the files in `sql/`. Numbers may
/// leave gaps (a number is taken when its change is begun, and changes land in any order): each
/// version is applied when it is missing, whatever the highest applied one, so a migration that
/// lands after a higher-numbered one is still applied. Migrations are additive and independent
/// of each other's order for that reason.
pub const MIGRATIONS: &[Migration] = &[
    (1, "init", include_str!("../../../../../sql/0001_init.sql")),
    (
        2,
        "sweep",
        include_str!("../../../../../sql/0002_sweep.sql"),
    ),
    (
        3,
        "retention",
        include_str!("../../../../../sql/0003_retention.sql"),
    ),
    (
        4,
        "signed_keys",
        include_str!("../../../../../sql/0004_signed_keys.sql"),
    ),
    (
        5,
        "give_up_superseded",
        include_str!("../../../../../sql/0005_give_up_superseded.sql"),
    ),
    (
        6,
        "daily_reads",
        include_str!("../../../../../sql/0006_daily_reads.sql"),
    ),
    (
        7,
        "close_feed",
        include_str!("../../../../../sql/0007_close_feed.sql"),
    ),
    (
        8,
        "audit",
        include_str!("../../../../../sql/0008_audit.sql"),
    ),
    (
        9,
        "instance_minutes",
        include_str!("../../../../../sql/0009_instance_minutes.sql"),
    ),
    (
        10,
        "job_polls",
        include_str!("../../../../../sql/0010_job_polls.sql"),
    ),
    (
        11,
        "jobs_order_id",
        include_str!("../../../../../sql/0011_jobs_order_id.sql"),
    ),
    (
        12,
        "autovacuum",
        include_str!("../../../../../sql/0012_autovacuum.sql"),
    ),
    (
        13,
        "orphan_mark",
        include_str!("../../../../../sql/0013_orphan_mark.sql"),
    ),
    (
        14,
        "give_up_rechecks",
        include_str!("../../../../../sql/0014_give_up_rechecks.sql"),
    ),
    (
        15,
        "key_sweeps",
        include_str!("../../../../../sql/0015_key_sweeps.sql"),
    ),
    (
        16,
        "events_awaiting",
        include_str!("../../../../../sql/0016_events_awaiting.sql"),
    ),
    (
        17,
        "rate_buckets_day_limit",
        include_str!("../../../../../sql/0017_rate_buckets_day_limit.sql"),
    ),
    (
        18,
        "instance_keys",
        include_str!("../../../../../sql/0018_instance_keys.sql"),
    ),
    (
        19,
        "job_traceparent",
        include_str!("../../../../../sql/0019_job_traceparent.sql"),
    ),
];

/// The schema version this binary expects.
pub fn latest() -> i32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// The first line of a migration that builds an index with `create index concurrently`:
/// `-- index concurrently: schema.name`. Such a file holds that one statement, run outside a
/// transaction.
const CONCURRENT_INDEX: &str = "-- index concurrently: ";

/// Applies what is missing; answers the versions it applied. A schema already at this
/// binary's version (or newer, during a rolling upgrade) is only read: a runtime role with no
/// right to change the schema starts as well as the role that migrated it.
pub async fn migrate(client: &mut Client) -> Result<Vec<i32>, DbError> {
    migrate_with(client, MIGRATIONS, &LockWaits::default()).await
}

/// [`migrate`] for any list of migrations (this binary's is [`MIGRATIONS`]) and lock waits:
/// what a test runs to apply a migration of its own beside the embedded ones.
pub async fn migrate_with(
    client: &mut Client,
    migrations: &[Migration],
    waits: &LockWaits,
) -> Result<Vec<i32>, DbError> {
    if all_applied(client, migrations).await {
        return Ok(Vec::new());
    }
    lock_waits::lock(client, waits).await?;
    let result = apply_missing(client, migrations, waits).await;
    // Unlock whatever happened; a dropped connection releases the lock anyway.
    lock_waits::unlock(client).await;
    result
}

/// Whether every migration of this binary is applied (false before the first one, or when the
/// table cannot be read). Versions, not the highest one: a lower number that landed later is
/// still missing where a higher one is applied.
async fn all_applied(client: &Client, migrations: &[Migration]) -> bool {
    let Ok(rows) = client
        .query("select version from sume.schema_migrations", &[])
        .await
    else {
        return false;
    };
    let applied: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    migrations.iter().all(|(v, _, _)| applied.contains(v))
}

async fn apply_missing(
    client: &mut Client,
    migrations: &[Migration],
    waits: &LockWaits,
) -> Result<Vec<i32>, DbError> {
    client
        .batch_execute(
            "create schema if not exists sume;
             create table if not exists sume.schema_migrations (
                 version    integer primary key,
                 name       text not null,
                 applied_at timestamptz not null default now()
             );",
        )
        .await
        .map_err(|e| DbError::query("migrate_bootstrap", e))?;
    let rows = client
        .query("select version from sume.schema_migrations", &[])
        .await
        .map_err(|e| DbError::query("migrate_applied", e))?;
    let applied: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    let mut done = Vec::new();
    for (version, name, sql) in migrations {
        if applied.contains(version) {
            continue;
        }
        waits.now(Step::Applying(*version, name));
        match concurrent_index(sql) {
            Some(index) => apply_concurrently(client, *version, name, index, sql).await?,
            None => lock_waits::apply_in_transaction(client, *version, name, sql, waits).await?,
        }
        tracing::info!(version, name, "applied migration");
        done.push(*version);
    }
    Ok(done)
}

/// The index a migration builds concurrently, from its first line.
fn concurrent_index(sql: &str) -> Option<&str> {
    let index = sql.lines().next()?.strip_prefix(CONCURRENT_INDEX)?.trim();
    let plain = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    let (schema, name) = index.split_once('.')?;
    (plain(schema) && plain(name)).then_some(index)
}

/// Builds an index outside a transaction. A build cut short (a crash, a cancel, a lost
/// connection) leaves the index invalid: it is dropped and built again.
async fn apply_concurrently(
    client: &Client,
    version: i32,
    name: &str,
    index: &str,
    sql: &str,
) -> Result<(), DbError> {
    let failed = |e| DbError::Migration(version, e);
    let invalid = client
        .query_opt(
            "select not indisvalid from pg_index where indexrelid = to_regclass($1)",
            &[&index],
        )
        .await
        .map_err(failed)?
        .is_some_and(|r| r.get::<_, bool>(0));
    if invalid {
        tracing::warn!(
            version,
            index,
            "an earlier build left the index invalid: rebuilding it"
        );
        client
            .batch_execute(&format!("drop index concurrently if exists {index}"))
            .await
            .map_err(failed)?;
    }
    client.batch_execute(sql).await.map_err(failed)?;
    client
        .execute(
            "insert into sume.schema_migrations (version, name) values ($1, $2)
             on conflict (version) do nothing",
            &[&version, &name],
        )
        .await
        .map_err(failed)?;
    Ok(())
}

impl super::Store {
    /// The applied schema version (0 before the first migration).
    pub async fn schema_migrations_version(&self) -> Result<i32, DbError> {
        let client = self.client().await?;
        let row = super::sql::SCHEMA_MIGRATIONS_VERSION
            .query_one(&client, &[])
            .await?;
        Ok(row.get(0))
    }

    /// This binary's migrations that the schema lacks (none: the schema is current for it,
    /// however many newer ones it holds besides).
    pub async fn schema_migrations_missing(&self) -> Result<Vec<i32>, DbError> {
        let client = self.client().await?;
        let rows = super::sql::SCHEMA_MIGRATIONS_APPLIED
            .query(&client, &[])
            .await?;
        let applied: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        Ok(lacking(&applied))
    }

    /// What `/readyz` needs, in one round trip: this binary's migrations the schema lacks, and
    /// whether the session is read-only (a hot standby, `default_transaction_read_only`; its
    /// connection is then closed, not pooled again).
    pub async fn schema_readiness(&self) -> Result<(Vec<i32>, bool), DbError> {
        let client = self.client().await?;
        let row = super::sql::SCHEMA_MIGRATIONS_READINESS
            .query_one(&client, &[])
            .await?;
        let applied: Vec<i32> = row.get("applied");
        let read_only: bool = row.get("read_only");
        if read_only {
            // Read from the role's and the database's settings when it opened: the next check
            // reads them afresh (a hot standby answers the same again).
            client.discard();
        }
        Ok((lacking(&applied), read_only))
    }
}

/// This binary's migrations not among `applied`.
fn lacking(applied: &[i32]) -> Vec<i32> {
    MIGRATIONS
        .iter()
        .map(|m| m.0)
        .filter(|v| !applied.contains(v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_in_sql_is_listed_in_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sql");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".sql") && n.as_bytes()[0].is_ascii_digit())
            .collect();
        files.sort();
        let listed: Vec<String> = MIGRATIONS
            .iter()
            .map(|(v, name, _)| format!("{v:04}_{name}.sql"))
            .collect();
        assert_eq!(files, listed);
        for pair in MIGRATIONS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "versions increase (gaps allowed)");
        }
    }

    #[test]
    fn a_concurrent_index_is_named_on_the_first_line_and_nowhere_else() {
        assert_eq!(
            concurrent_index("-- index concurrently: sume.jobs_order_id\ncreate index ..."),
            Some("sume.jobs_order_id")
        );
        for not in [
            "create index concurrently x on t (a)",
            "-- a comment\n-- index concurrently: sume.x",
            "-- index concurrently: jobs_order_id",
            "-- index concurrently: sume.x; drop table sume.jobs",
            "-- index concurrently: sume.",
        ] {
            assert_eq!(concurrent_index(not), None, "{not}");
        }
        let concurrent: Vec<i32> = MIGRATIONS
            .iter()
            .filter(|(_, _, sql)| concurrent_index(sql).is_some())
            .map(|(v, _, _)| *v)
            .collect();
        assert!(concurrent.contains(&11), "{concurrent:?}");
        for (v, _, sql) in MIGRATIONS {
            assert_eq!(
                concurrent_index(sql).is_some(),
                sql.to_lowercase()
                    .contains("index concurrently if not exists"),
                "migration {v}: a concurrent build must be declared on its first line"
            );
        }
    }
}
