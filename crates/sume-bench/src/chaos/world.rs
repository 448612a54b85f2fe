//! What every scenario stands on: the PostgreSQL server (a throwaway cluster of this run, or
//! --database-url), a database of each scenario's own on it, the daemons as child processes,
//! and the faults done to the server: cutting connections, locking the inbox, a crash.
//!
//! Everything started here is stopped when its guard drops ([`Postgres`], [`Proc`]), on every
//! way out of a run, errors and panics included.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use rand::Rng;

use crate::load;
use crate::sql;
use crate::stack::{self, Postgres, Proc};

use super::args::ChaosArgs;

/// The server and what the daemons share.
pub(super) struct World {
    pg: Option<Postgres>,
    /// The server's URL (its `postgres` database), for creating the scenarios' databases.
    pub(super) server_url: String,
    bin: PathBuf,
    /// The webhook secret of every daemon and every signed delivery of the run.
    pub(super) secret: String,
    pub(super) work_dir: PathBuf,
}

impl World {
    /// Creates the work directory and starts the throwaway cluster (unless --database-url).
    pub(super) fn start(args: &ChaosArgs) -> anyhow::Result<World> {
        std::fs::create_dir_all(&args.work_dir)
            .with_context(|| format!("creating {}", args.work_dir.display()))?;
        let work_dir = std::fs::canonicalize(&args.work_dir)?;
        let bin = match &args.daemon_bin {
            Some(p) => p.clone(),
            None => std::env::current_exe()?.with_file_name("sume-inbox"),
        };
        if !bin.exists() {
            bail!(
                "{} not found: build it (`cargo build --release -p sume-inbox`) or pass --daemon-bin",
                bin.display()
            );
        }
        let (pg, server_url) = match &args.database_url {
            Some(url) => (None, url.clone()),
            None => {
                eprintln!("sume-bench chaos: starting a throwaway PostgreSQL");
                // Out of the range other throwaway clusters take (scripts/devpg scans
                // 25432-25999), so that none takes the port while this one is crashed: its
                // clients would then reach a server without their database.
                let port = quiet_port()?;
                let pg = Postgres::start_on(&args.devpg, &work_dir.join("pg"), false, Some(port))?;
                let url = pg.url.clone();
                (Some(pg), url)
            }
        };
        let secret = format!("whsec_chaos_{:016x}", rand::thread_rng().gen::<u64>());
        Ok(World {
            pg,
            server_url,
            bin,
            secret,
            work_dir,
        })
    }

    /// The daemon binary (`sume-inbox`), for its other commands (`reconcile`).
    pub(super) fn bin(&self) -> PathBuf {
        self.bin.clone()
    }

    /// Whether the server is this run's own, so that it may be crashed.
    pub(super) fn owns_server(&self) -> bool {
        self.pg.is_some()
    }

    /// A fresh, empty database named `name` (lower-case letters and `_`); answers its URL.
    pub(super) async fn database(&self, name: &str) -> anyhow::Result<String> {
        crate::stages::fresh_database(&self.server_url, name).await
    }

    /// Starts a daemon on `url` with these settings over the defaults, on free ports.
    pub(super) fn daemon(
        &self,
        url: &str,
        name: &str,
        settings: &[(&str, String)],
    ) -> anyhow::Result<Daemon> {
        let mut d = Daemon {
            bin: self.bin.clone(),
            url: url.to_owned(),
            secret: self.secret.clone(),
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            log_dir: self.work_dir.clone(),
            name: name.to_owned(),
            listen: stack::free_port()?,
            admin: stack::free_port()?,
            starts: 0,
            proc: None,
        };
        d.spawn()?;
        Ok(d)
    }

    /// Stops PostgreSQL at once, as in a crash. The script runs on a thread of its own, so
    /// the load goes on meanwhile (and no runtime thread that started a daemon is given up:
    /// the daemons are told to stop when the thread that started them ends).
    pub(super) async fn crash(&self) -> anyhow::Result<()> {
        self.devpg("kill").await
    }

    /// Starts PostgreSQL again after [`World::crash`]; returns once it accepts connections.
    pub(super) async fn recover(&self) -> anyhow::Result<()> {
        self.devpg("start").await
    }

    async fn devpg(&self, cmd: &str) -> anyhow::Result<()> {
        let Some(pg) = &self.pg else {
            bail!("the crash scenario needs the run's own cluster")
        };
        let command = pg.devpg(cmd);
        tokio::task::spawn_blocking(move || stack::run_devpg(command)).await?
    }
}

/// A free port in 26000-26999, from a random start.
pub(super) fn quiet_port() -> anyhow::Result<u16> {
    let first = rand::thread_rng().gen_range(26_000..27_000u16);
    (0..1_000)
        .map(|i| 26_000 + (first - 26_000 + i) % 1_000)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .ok_or_else(|| anyhow::anyhow!("no free port in 26000-26999"))
}

/// A daemon child process, restartable on the same ports.
pub(super) struct Daemon {
    bin: PathBuf,
    url: String,
    secret: String,
    settings: Vec<(String, String)>,
    log_dir: PathBuf,
    name: String,
    /// The webhook listener.
    pub(super) listen: SocketAddr,
    /// The admin listener (`/metrics`).
    pub(super) admin: SocketAddr,
    starts: u32,
    proc: Option<Proc>,
}

impl Daemon {
    fn spawn(&mut self) -> anyhow::Result<()> {
        self.starts += 1;
        let log = self
            .log_dir
            .join(format!("daemon-{}-{}.log", self.name, self.starts));
        self.proc = Some(stack::spawn_daemon(
            &self.bin,
            &self.url,
            &self.secret,
            self.listen,
            self.admin,
            &self.settings,
            &log,
        )?);
        Ok(())
    }

    /// The current process's id, for reading its memory under `/proc`.
    pub(super) fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(Proc::pid)
    }

    /// The log of the current process, for error messages.
    pub(super) fn log(&self) -> PathBuf {
        self.log_dir
            .join(format!("daemon-{}-{}.log", self.name, self.starts))
    }

    /// `kill -9`, then a new process on the same ports at once.
    pub(super) fn kill_and_restart(&mut self) -> anyhow::Result<()> {
        if let Some(p) = self.proc.as_mut() {
            p.kill();
        }
        self.spawn()
    }

    /// Waits until `/readyz` answers 200.
    pub(super) async fn wait_ready(&mut self, patience: Duration) -> anyhow::Result<()> {
        if load::wait_ready(self.listen, "/readyz", patience).await {
            return Ok(());
        }
        self.alive()?;
        bail!(
            "the daemon is not ready after {patience:?}; see {}",
            self.log().display()
        )
    }

    /// Fails when the process has exited.
    pub(super) fn alive(&mut self) -> anyhow::Result<()> {
        match self.proc.as_mut() {
            Some(p) => p.alive(),
            None => bail!("the daemon was never started"),
        }
    }

    /// Whether `/healthz` answers 200: the process runs and none of its tasks has died.
    pub(super) async fn healthy(&self) -> bool {
        load::get_text(self.listen, "/healthz").await.is_some()
    }

    /// The sum of every sample of a metric family on the admin port (0 when absent).
    pub(super) async fn metric(&self, family: &str) -> f64 {
        let text = load::get_text(self.admin, "/metrics")
            .await
            .unwrap_or_default();
        metric_sum(&text, family)
    }

    /// Stops it (SIGTERM, then SIGKILL after a grace).
    pub(super) fn stop(&mut self) {
        if let Some(p) = self.proc.as_mut() {
            p.stop(Duration::from_secs(20));
        }
    }
}

/// The sum of the samples of `family` (`name` or `name{labels}`) in Prometheus text, filtered
/// by a label fragment when `family` carries one (`name{kind="header"}` matches that label).
pub(super) fn metric_sum(text: &str, family: &str) -> f64 {
    let (name, label) = match family.split_once('{') {
        Some((n, l)) => (n, Some(l.trim_end_matches('}'))),
        None => (family, None),
    };
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (series_name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest),
                None => (series, ""),
            };
            (series_name == name && label.is_none_or(|want| labels.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// Cuts every connection to `database` but this client's; answers how many were cut.
pub(super) async fn terminate_backends(server_url: &str, database: &str) -> anyhow::Result<i64> {
    let db = crate::stages::client(server_url).await?;
    let row = db
        .query_one(sql::SERVER_TERMINATE_BACKENDS.sql(), &[&database])
        .await
        .context("pg_terminate_backend")?;
    Ok(row.get(0))
}

/// Holds `lock table sume.events in access exclusive mode` for `hold` in a transaction of its
/// own, then rolls it back.
pub(super) async fn lock_inbox(url: &str, hold: Duration) -> anyhow::Result<()> {
    let mut db = crate::stages::client(url).await?;
    let tx = db.transaction().await?;
    tx.batch_execute(sql::EVENTS_LOCK.sql())
        .await
        .context("locking sume.events")?;
    tokio::time::sleep(hold).await;
    tx.rollback().await?;
    Ok(())
}

/// The name of a database URL's database (after the last `/`).
pub(super) fn database_name(url: &str) -> &str {
    url.rsplit_once('/').map_or(url, |(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_sums_read_prometheus_text() {
        let text = "# HELP x\nsume_inbox_webhooks_total{outcome=\"stored\"} 7\n\
                    sume_inbox_webhooks_total{outcome=\"duplicate\"} 3\nother 1\n";
        assert_eq!(metric_sum(text, "sume_inbox_webhooks_total"), 10.0);
        assert_eq!(
            metric_sum(text, "sume_inbox_webhooks_total{outcome=\"stored\"}"),
            7.0
        );
        assert_eq!(metric_sum(text, "missing"), 0.0);
        assert_eq!(database_name("postgres://u@h:1/chaos_kill"), "chaos_kill");
    }
}
