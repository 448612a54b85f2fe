//! Embedded, numbered migrations (`sql/NNNN_name.sql`), applied under an advisory lock so that
//! any number of instances may start at once: the first applies, the others wait and find
//! nothing left to do.

use tokio_postgres::Client;

use super::DbError;

/// Every migration, in order. A test checks this list against the files in `sql/`. Numbers may
/// leave gaps (a number is taken when its change is begun, and changes land in any order): each
/// version is applied when it is missing, whatever the highest applied one, so a migration that
/// lands after a higher-numbered one is still applied. Migrations are additive and independent
/// of each other's order for that reason.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "init", include_str!("../../../../sql/0001_init.sql")),
    (2, "sweep", include_str!("../../../../sql/0002_sweep.sql")),
    (
        3,
        "retention",
        include_str!("../../../../sql/0003_retention.sql"),
    ),
    (
        4,
        "signed_keys",
        include_str!("../../../../sql/0004_signed_keys.sql"),
    ),
    (
        5,
        "give_up_superseded",
        include_str!("../../../../sql/0005_give_up_superseded.sql"),
    ),
    (
        6,
        "daily_reads",
        include_str!("../../../../sql/0006_daily_reads.sql"),
    ),
    (
        7,
        "close_feed",
        include_str!("../../../../sql/0007_close_feed.sql"),
    ),
    (8, "audit", include_str!("../../../../sql/0008_audit.sql")),
    (
        10,
        "job_polls",
        include_str!("../../../../sql/0010_job_polls.sql"),
    ),
];

/// The schema version this binary expects.
pub fn latest() -> i32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

/// An arbitrary constant naming "sume-inbox migrations" among advisory locks.
const LOCK_KEY: i64 = 0x5355_4d45_494e_4258;

/// Applies what is missing; answers the versions it applied. A schema already at this
/// binary's version (or newer, during a rolling upgrade) is only read: a runtime role with no
/// right to change the schema starts as well as the role that migrated it.
pub async fn migrate(client: &mut Client) -> Result<Vec<i32>, DbError> {
    if all_applied(client).await {
        return Ok(Vec::new());
    }
    let q = |statement: &'static str| move |e| DbError::query(statement, e);
    client
        .execute("select pg_advisory_lock($1)", &[&LOCK_KEY])
        .await
        .map_err(q("migrate_lock"))?;
    let result = apply_missing(client).await;
    // Unlock whatever happened; a dropped connection releases the lock anyway.
    let _ = client
        .execute("select pg_advisory_unlock($1)", &[&LOCK_KEY])
        .await;
    result
}

/// Whether every migration of this binary is applied (false before the first one, or when the
/// table cannot be read). Versions, not the highest one: a lower number that landed later is
/// still missing where a higher one is applied.
async fn all_applied(client: &Client) -> bool {
    let Ok(rows) = client
        .query("select version from sume.schema_migrations", &[])
        .await
    else {
        return false;
    };
    let applied: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    MIGRATIONS.iter().all(|(v, _, _)| applied.contains(v))
}

async fn apply_missing(client: &mut Client) -> Result<Vec<i32>, DbError> {
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
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        let tx = client
            .transaction()
            .await
            .map_err(|e| DbError::query("migrate_begin", e))?;
        tx.batch_execute(sql)
            .await
            .map_err(|e| DbError::Migration(*version, e))?;
        tx.execute(
            "insert into sume.schema_migrations (version, name) values ($1, $2)",
            &[version, name],
        )
        .await
        .map_err(|e| DbError::Migration(*version, e))?;
        tx.commit()
            .await
            .map_err(|e| DbError::Migration(*version, e))?;
        tracing::info!(version, name, "applied migration");
        done.push(*version);
    }
    Ok(done)
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
        Ok(MIGRATIONS
            .iter()
            .map(|m| m.0)
            .filter(|v| !applied.contains(v))
            .collect())
    }
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
}
