//! A primary and a hot standby, two throwaway clusters of `scripts/devpg` on loopback:
//! streaming replication from a base backup (`devpg standby`: `pg_basebackup -R`), synchronous
//! when the primary names it in `synchronous_standby_names`. The daemon reaches them as an
//! operator would configure it, through one multi-host URL with
//! `target_session_attrs=read-write`: the first host (in the URL's order) that takes writes.
//!
//! Both clusters are destroyed when the [`Pair`] drops.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};
use tokio::time::Instant;

use crate::sql;
use crate::stack;

/// The database the daemon uses on the pair.
pub(super) const DATABASE: &str = "chaos";

/// Two nodes; either may be the primary.
pub(super) struct Pair {
    devpg: PathBuf,
    dirs: [PathBuf; 2],
    /// Each node's port, kept across restarts and rebuilds.
    pub(super) ports: [u16; 2],
    /// The node that takes writes now (as far as this suite made it so).
    pub(super) primary: usize,
}

impl Pair {
    /// Node 0 a fresh primary with the database, node 1 its standby, synchronous when `sync`.
    pub(super) async fn start(
        devpg: &Path,
        work_dir: &Path,
        name: &str,
        sync: bool,
        patience: Duration,
    ) -> anyhow::Result<Pair> {
        let first = super::super::world::quiet_port()?;
        let second = loop {
            let p = super::super::world::quiet_port()?;
            if p != first {
                break p;
            }
        };
        let pair = Pair {
            devpg: devpg.to_owned(),
            dirs: [0, 1].map(|i| work_dir.join(format!("{name}-{i}"))),
            ports: [first, second],
            primary: 0,
        };
        for dir in &pair.dirs {
            stack::quietly(&pair.devpg, "destroy", dir);
        }
        pair.devpg(&["start"], 0, Some(first)).await?;
        crate::stages::fresh_database(&pair.node_url(0, "postgres"), DATABASE).await?;
        pair.rebuild_as_standby(1).await?;
        if sync {
            pair.set_sync(true).await?;
        }
        pair.wait_standby(sync, patience).await?;
        Ok(pair)
    }

    /// `postgres://postgres@127.0.0.1:PORT/db` of one node.
    pub(super) fn node_url(&self, node: usize, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.ports[node])
    }

    /// The daemon's URL: both nodes, node 0 first, the first one that takes writes.
    pub(super) fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{DATABASE}?target_session_attrs=read-write",
            self.ports[0], self.ports[1]
        )
    }

    /// The node that is not the primary.
    pub(super) fn standby(&self) -> usize {
        1 - self.primary
    }

    /// `pg_ctl stop -m immediate` of a node, as in a crash.
    pub(super) async fn crash(&self, node: usize) -> anyhow::Result<()> {
        self.devpg(&["kill"], node, None).await
    }

    /// A clean, fast shutdown of a node (a primary streams all its WAL to its standbys first).
    pub(super) async fn stop(&self, node: usize) -> anyhow::Result<()> {
        self.devpg(&["stop"], node, None).await
    }

    /// Starts a node again on its port, as whatever its data directory says it is.
    pub(super) async fn start_node(&self, node: usize) -> anyhow::Result<()> {
        self.devpg(&["start"], node, Some(self.ports[node])).await
    }

    /// Promotes the standby; it is the primary from then on.
    pub(super) async fn promote(&mut self) -> anyhow::Result<()> {
        let node = self.standby();
        self.devpg(&["promote"], node, None).await?;
        self.primary = node;
        Ok(())
    }

    /// Replaces a node by a fresh standby of the primary (its old data thrown away), on its
    /// own port.
    pub(super) async fn rebuild_as_standby(&self, node: usize) -> anyhow::Result<()> {
        stack::quietly(&self.devpg, "destroy", &self.dirs[node]);
        self.devpg(&["standby"], node, None).await
    }

    /// Names (or stops naming) the standby as synchronous on the primary.
    pub(super) async fn set_sync(&self, on: bool) -> anyhow::Result<()> {
        let statement = if on {
            sql::SERVER_SYNC_STANDBY_ON
        } else {
            sql::SERVER_SYNC_STANDBY_OFF
        };
        self.on_primary(&[statement, sql::SERVER_RELOAD]).await
    }

    /// Runs these statements, one by one, on the primary's `postgres` database.
    pub(super) async fn on_primary(
        &self,
        statements: &[sume_inbox::db::Statement],
    ) -> anyhow::Result<()> {
        self.on_node(self.primary, statements).await
    }

    /// Runs these statements, one by one, on a node's `postgres` database.
    pub(super) async fn on_node(
        &self,
        node: usize,
        statements: &[sume_inbox::db::Statement],
    ) -> anyhow::Result<()> {
        let db = crate::stages::client(&self.node_url(node, "postgres")).await?;
        for s in statements {
            db.batch_execute(s.sql())
                .await
                .with_context(|| format!("{} on node {node}", s.name()))?;
        }
        Ok(())
    }

    /// Waits until the primary streams to its standby (synchronously when `sync`).
    pub(super) async fn wait_standby(&self, sync: bool, patience: Duration) -> anyhow::Result<()> {
        let db = crate::stages::client(&self.node_url(self.primary, "postgres")).await?;
        let deadline = Instant::now() + patience;
        loop {
            let row = db.query_one(sql::SERVER_REPLICATION.sql(), &[]).await?;
            let (streaming, synchronous): (i64, i64) = (row.get(0), row.get(1));
            if streaming >= 1 && (!sync || synchronous >= 1) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the standby is not streaming (synchronously: {sync}) after {patience:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Points the standby's replication connection at `host:port` (a proxy before the
    /// primary); the WAL receiver reconnects there.
    pub(super) async fn replicate_through(&self, host: &str, port: u16) -> anyhow::Result<()> {
        let conninfo = format!("host={host} port={port} user=postgres");
        let db = crate::stages::client(&self.node_url(self.standby(), "postgres")).await?;
        db.batch_execute(
            &sql::SERVER_PRIMARY_CONNINFO
                .sql()
                .replace("{conninfo}", &conninfo),
        )
        .await
        .context("primary_conninfo")?;
        db.batch_execute(sql::SERVER_RELOAD.sql()).await?;
        Ok(())
    }

    /// Waits until the standby's WAL receiver streams from `port` (after
    /// [`Pair::replicate_through`]).
    pub(super) async fn wait_receiving_from(
        &self,
        port: u16,
        patience: Duration,
    ) -> anyhow::Result<()> {
        let db = crate::stages::client(&self.node_url(self.standby(), "postgres")).await?;
        let deadline = Instant::now() + patience;
        loop {
            let row = db
                .query_one(sql::SERVER_WAL_RECEIVER_PORT.sql(), &[])
                .await?;
            if row.get::<_, i32>(0) == i32::from(port) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the standby does not stream from port {port} after {patience:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `scripts/devpg CMD DIR [..]` for a node, on a thread of its own.
    async fn devpg(&self, cmd: &[&str], node: usize, port: Option<u16>) -> anyhow::Result<()> {
        let mut c = Command::new(&self.devpg);
        c.args(cmd).arg(&self.dirs[node]);
        if cmd == ["standby"] {
            c.arg(&self.dirs[1 - node])
                .arg(self.ports[node].to_string());
        }
        if let Some(p) = port {
            c.arg(p.to_string());
        }
        c.stdout(Stdio::null()).stderr(Stdio::inherit());
        tokio::task::spawn_blocking(move || stack::run_devpg(c)).await?
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for dir in &self.dirs {
            stack::quietly(&self.devpg, "destroy", dir);
        }
    }
}
