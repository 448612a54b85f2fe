//! What a run needs before any server starts: enough file descriptors, the work directory,
//! the database (a throwaway cluster or --database-url), migrated and checked to be durable,
//! and the run's webhook secret with the generator that signs with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context as _};
use rand::Rng;
use sume_wire::Secret;

use crate::cli::RunArgs;
use crate::sql;
use crate::stack::{self, Postgres};
use crate::webhook::Generator;

/// Raises the open-file limit for the most connections a step opens and creates the work
/// directory; answers the directory's absolute path.
pub(super) fn prepare(args: &RunArgs) -> anyhow::Result<PathBuf> {
    let most = args
        .connections
        .iter()
        .copied()
        .chain([args.rate_connections])
        .max()
        .unwrap_or(1) as u64;
    // Our sockets, the server's, PostgreSQL's, and slack for files and reconnects.
    let limit = stack::ensure_fd_limit(2 * most + 1024)?;
    eprintln!("sume-bench: open-file limit {limit}");
    work_dir(&args.work_dir)
}

/// Creates `dir` if missing; answers its absolute path.
pub(crate) fn work_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(std::fs::canonicalize(dir)?)
}

/// A throwaway cluster in WORK_DIR/pg (destroyed when the guard drops), migrated and checked
/// durable, with a connection to it that the benchmark's own counts leave out.
pub(crate) async fn throwaway_durable(
    devpg: &Path,
    work_dir: &Path,
) -> anyhow::Result<(Postgres, tokio_postgres::Client)> {
    let pg = Postgres::start(devpg, &work_dir.join("pg"), false)?;
    let db = open_durable(&pg.url).await?;
    db.batch_execute(sql::SERVER_MARK_OWN_CONNECTION.sql())
        .await?;
    Ok((pg, db))
}

/// The database's URL, and the throwaway cluster behind it (stopped when the guard drops)
/// unless --database-url names one.
pub(super) fn database(
    args: &RunArgs,
    work_dir: &std::path::Path,
) -> anyhow::Result<(Option<Postgres>, String)> {
    Ok(match &args.database_url {
        Some(url) => (None, url.clone()),
        None => {
            eprintln!("sume-bench: starting a throwaway PostgreSQL");
            let pg = Postgres::start(&args.devpg, &work_dir.join("pg"), args.keep_pg)?;
            let url = pg.url.clone();
            (Some(pg), url)
        }
    })
}

/// Connects and migrates; fails unless PostgreSQL runs with fsync and synchronous_commit on.
pub(crate) async fn open_durable(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let mut db = connect(url).await?;
    sume_inbox::db::migrate::migrate(&mut db).await?;
    let sync: String = db
        .query_one(sql::SERVER_SYNCHRONOUS_COMMIT.sql(), &[])
        .await?
        .get(0);
    let fsync: String = db.query_one(sql::SERVER_FSYNC.sql(), &[]).await?.get(0);
    if sync != "on" || fsync != "on" {
        bail!("PostgreSQL runs with synchronous_commit={sync}, fsync={fsync}: a durable benchmark needs both on");
    }
    Ok(db)
}

/// A fresh webhook secret for this run, and the generator signing deliveries with it (their
/// ids carry a fresh run id; their header ids differ from the body's with `other_header_ids`;
/// every shape in turn with `mixed_shapes`).
pub(crate) fn secret_and_generator(
    other_header_ids: bool,
    mixed_shapes: bool,
) -> (String, Arc<Generator>) {
    let (secret, run_id) = {
        let mut rng = rand::thread_rng();
        (
            format!("whsec_bench_{:016x}", rng.gen::<u64>()),
            format!("{:06x}", rng.gen::<u32>() & 0xff_ffff),
        )
    };
    let generator = Generator::new(Secret::new(secret.clone()), run_id);
    let generator = if other_header_ids {
        generator.with_other_header_ids()
    } else {
        generator
    };
    let generator = if mixed_shapes {
        generator.with_mixed_shapes()
    } else {
        generator
    };
    (secret, Arc::new(generator))
}

pub(crate) async fn connect(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, driver) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting to PostgreSQL")?;
    tokio::spawn(driver);
    Ok(client)
}
