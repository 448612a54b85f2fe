//! The throwaway PgBouncer of the fleet benchmark (`scripts/devbouncer`, transaction mode, in
//! front of the run's PostgreSQL), its process for the CPU column, and the server connections
//! it holds open, read from its admin console (`SHOW SERVERS`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use crate::stack::{quietly, start_fresh};

/// A running PgBouncer; destroyed when dropped.
pub struct Bouncer {
    script: PathBuf,
    dir: PathBuf,
    /// The pooler's URL (database `postgres`, reaching the same database on the server).
    pub url: String,
    /// Its admin console's URL (the `pgbouncer` database).
    admin_url: String,
}

impl Bouncer {
    /// Starts a fresh PgBouncer in `dir` in front of the server of `pg_url`.
    pub fn start(script: &Path, dir: &Path, pg_url: &str) -> anyhow::Result<Bouncer> {
        let url = start_fresh(script, dir, &[pg_url.to_owned()])?;
        let Some(base) = url.strip_suffix("/postgres") else {
            bail!("{} start printed no pooler URL", script.display());
        };
        Ok(Bouncer {
            script: script.to_owned(),
            dir: dir.to_owned(),
            admin_url: format!("{base}/pgbouncer"),
            url,
        })
    }

    /// PgBouncer's process id, from its pid file (in DIR, or the directory DIR/home names).
    pub fn pid(&self) -> Option<u32> {
        let home = std::fs::read_to_string(self.dir.join("home"))
            .map(|h| PathBuf::from(h.trim()))
            .unwrap_or_else(|_| self.dir.clone());
        std::fs::read_to_string(home.join("pgbouncer.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// A connection to the admin console, for [`server_connections`].
    pub async fn admin(&self) -> anyhow::Result<tokio_postgres::Client> {
        let (client, driver) = tokio_postgres::connect(&self.admin_url, tokio_postgres::NoTls)
            .await
            .context("connecting to PgBouncer's admin console")?;
        tokio::spawn(driver);
        Ok(client)
    }
}

/// The server connections PgBouncer holds open now (one row each of `SHOW SERVERS`; the admin
/// console speaks the simple protocol only).
pub async fn server_connections(admin: &tokio_postgres::Client) -> anyhow::Result<u64> {
    let messages = admin.simple_query("SHOW SERVERS").await?;
    Ok(messages
        .iter()
        .filter(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_)))
        .count() as u64)
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        quietly(&self.script, "destroy", &self.dir);
    }
}
