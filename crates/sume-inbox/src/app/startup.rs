//! The database at start: the pool, once the schema is at least this binary's (migrated over a
//! direct connection, or, behind a transaction pooler without MIGRATE_DATABASE_URL, only read).
//!
//! The database and the daemon often start together, so a server that does not answer yet is
//! waited for, up to [`STARTUP_PATIENCE`]; a refusal that waiting cannot fix (a wrong password,
//! role, database or host name) stops the start at once. Either way the error names the setting
//! and the target tried, never the password. What the start waits for is told to [`Starting`],
//! which LISTEN_ADDR's answers read meanwhile (`super::starting`).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::RunError;
use crate::config::declared::{DATABASE_URL, LISTEN_DATABASE_URL, MIGRATE_DATABASE_URL};
use crate::config::{Config, Pooler};
use crate::db::migrate::LockWaits;
use crate::db::{self, migrate, reach, DbError, Store};
use crate::http::starting::Starting;

/// How long start-up keeps trying to reach the database before giving up.
pub const STARTUP_PATIENCE: Duration = Duration::from_secs(30);

/// Runs `attempt` until it answers, retrying while the server behind `setting`'s `url` cannot
/// be reached yet, for at most [`STARTUP_PATIENCE`]. A failure to reach it is answered as
/// [`DbError::Unreachable`], at once when it is permanent.
async fn patiently<T, F, Fut>(
    setting: &'static str,
    url: &str,
    shutdown: &CancellationToken,
    starting: &Starting,
    mut attempt: F,
) -> Result<T, DbError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, DbError>>,
{
    starting.database(format!("connecting to {setting}"));
    let deadline = tokio::time::Instant::now() + STARTUP_PATIENCE;
    let mut wait = Duration::from_millis(200);
    loop {
        // An attempt that hangs (a server that accepts and says nothing, the migrations' lock
        // held by another instance) is dropped at a stop asked for, and its connection with it.
        let answer = tokio::select! {
            answer = attempt() => answer,
            _ = shutdown.cancelled() => return Err(abandoned(setting, url)),
        };
        let e = match answer {
            Ok(answer) => return Ok(answer),
            Err(e) => reach::unreachable_from(setting, url, &e).unwrap_or(e),
        };
        let DbError::Unreachable {
            permanent: false,
            problem,
            ..
        } = &e
        else {
            return Err(e);
        };
        // The server's or the network's words, as `/readyz` says them, not the target.
        starting.database(format!("{setting} not reachable yet: {problem}"));
        if tokio::time::Instant::now() >= deadline {
            return Err(gave_up(e));
        }
        tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "database not reachable yet");
        // A stop asked for during the pause is said as one (`migrate` exits 1 on it, saying
        // nothing was applied), not as the last failure to connect.
        tokio::select! {
            _ = shutdown.cancelled() => return Err(abandoned(setting, url)),
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

/// The start given up at a stop asked for, while the server behind `setting`'s `url` was waited
/// for.
fn abandoned(setting: &'static str, url: &str) -> DbError {
    DbError::Abandoned {
        setting,
        target: reach::redacted(url),
    }
}

/// A transient failure that outlasted [`STARTUP_PATIENCE`], saying so.
fn gave_up(e: DbError) -> DbError {
    match e {
        DbError::Unreachable {
            setting,
            target,
            problem,
            permanent,
        } => DbError::Unreachable {
            setting,
            target,
            problem: format!(
                "{problem} (still failing after {}s of retries: is the server up and reachable from here?)",
                STARTUP_PATIENCE.as_secs()
            ),
            permanent,
        },
        e => e,
    }
}

/// Applies migrations (under the advisory lock) on `url`, the direct connection of `setting`,
/// telling `starting` where they stand.
pub async fn migrate_with_retry(
    setting: &'static str,
    url: &str,
    shutdown: &CancellationToken,
    starting: &Starting,
) -> Result<Vec<i32>, DbError> {
    patiently(setting, url, shutdown, starting, || async {
        let mut client = db::connect_named(setting, url).await?;
        let waits = LockWaits::default();
        starting.migrations(&waits);
        match migrate::migrate_with(&mut client, migrate::MIGRATIONS, &waits).await {
            Ok(applied) => Ok(applied),
            Err(e) => Err(reach::lacking_rights(setting, url, &client, e).await),
        }
    })
    .await
}

/// The pool, once the schema is at least this binary's and LISTEN_DATABASE_URL (when set)
/// lets the daemon in; `starting` hears what it waits for meanwhile.
pub async fn open_store(
    config: &Config,
    shutdown: &CancellationToken,
    starting: &Starting,
) -> Result<Store, RunError> {
    let store = schema_checked_store(config, shutdown, starting).await?;
    if let Some(listen) = &config.database.listen_url {
        // Connected once, as DATABASE_URL is: a refusal stops the start here, naming the
        // setting, rather than a LISTEN connection retried for ever once serving.
        let url = listen.expose();
        patiently(LISTEN_DATABASE_URL.name, url, shutdown, starting, || {
            db::connect_named(LISTEN_DATABASE_URL.name, url)
        })
        .await?;
    }
    Ok(store)
}

/// The pool, once the schema is at least this binary's.
async fn schema_checked_store(
    config: &Config,
    shutdown: &CancellationToken,
    starting: &Starting,
) -> Result<Store, RunError> {
    let routes = &config.database;
    let url = config.database_url.expose();
    let store = Store::new(url, config.db_pool_size)?;
    let listen = routes.listen_url.as_ref().map(|u| u.expose());
    let store = match (routes.pooler, listen) {
        (Pooler::Transaction, listen) => store.behind_pooler(listen),
        (Pooler::None, Some(listen)) => store.listen_on(LISTEN_DATABASE_URL.name, listen),
        (Pooler::None, None) => store,
    };
    let store = store.with_writer_connections(url, config.ingest.writers)?;
    let mut migrated = None;
    if let Some(migrate_url) = routes.migrate_at_start(&config.database_url) {
        let setting = match &routes.migrate_url {
            Some(_) => MIGRATE_DATABASE_URL.name,
            None => DATABASE_URL.name,
        };
        let applied = migrate_with_retry(setting, migrate_url, shutdown, starting).await?;
        migrated = Some((setting, applied.len()));
    }
    // Read through DATABASE_URL even once migrated: MIGRATE_DATABASE_URL may name another
    // database than the one served, whose every write would then fail for want of the schema.
    let found = patiently(DATABASE_URL.name, url, shutdown, starting, || async {
        match store.schema_migrations_missing().await {
            Ok(missing) => Ok(missing),
            Err(e) => Err(match reach::lacking_usage(DATABASE_URL.name, url, &e) {
                Some(refused) => refused,
                None => reach::every_host(DATABASE_URL.name, url, e).await,
            }),
        }
    })
    .await;
    let missing = match found {
        Ok(missing) if missing.is_empty() => {
            log_schema(&store, migrated.map(|(_, applied)| applied)).await?;
            return Ok(store);
        }
        Ok(missing) => missing,
        Err(e) if e.is_missing_schema() => migrate::MIGRATIONS.iter().map(|m| m.0).collect(),
        Err(e) => return Err(e.into()),
    };
    Err(match migrated {
        Some((setting, _)) if setting != DATABASE_URL.name => RunError::Config(format!(
            "{db}: the database it names is not migrated (it lacks migration(s) {missing:?} of \
             this binary's version {latest}), though {setting}'s was: they name different \
             databases; point both at the one to serve",
            db = DATABASE_URL.name,
            latest = migrate::latest(),
        )),
        _ => RunError::SchemaBehind(missing),
    })
}

/// Logs where the schema stands once it is at least this binary's: current, or newer than this
/// binary knows (a later release migrated it), as `migrate` says. `applied` is what the start
/// applied; `None` where migrations are a step of their own. A version that cannot be read
/// is an error, not a current schema.
async fn log_schema(store: &Store, applied: Option<usize>) -> Result<(), DbError> {
    let latest = migrate::latest();
    let step = if applied.is_none() {
        " (migrations are a step of their own)"
    } else {
        ""
    };
    let found = store.schema_migrations_version().await?;
    match found {
        found if found > latest => tracing::info!(
            applied,
            schema = found,
            binary = latest,
            "schema at version {found}, newer than this binary's {latest} (a later release \
             migrated it): this binary runs on it{step}"
        ),
        _ => tracing::info!(applied, schema = latest, "schema is current{step}"),
    }
    Ok(())
}
