//! The throwaway PostgreSQL cluster a run writes to (`scripts/devpg start`, destroyed or
//! stopped when its guard drops), and the postmaster's pid for the cluster's CPU time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// A throwaway cluster; destroyed on drop unless kept.
pub struct Postgres {
    script: PathBuf,
    dir: PathBuf,
    /// The port asked for at the start, asked for again at a restart.
    port: Option<u16>,
    /// The cluster's `postgres://` URL, as `scripts/devpg start` printed it.
    pub url: String,
    keep: bool,
}

impl Postgres {
    /// Starts a fresh cluster in `dir` (removing whatever an earlier run left there).
    pub fn start(script: &Path, dir: &Path, keep: bool) -> anyhow::Result<Postgres> {
        Self::start_on(script, dir, keep, None)
    }

    /// Like [`Postgres::start`], on `port` when given (else the script's first free one).
    pub fn start_on(
        script: &Path,
        dir: &Path,
        keep: bool,
        port: Option<u16>,
    ) -> anyhow::Result<Postgres> {
        let port_arg = port.map(|p| p.to_string());
        let url = start_fresh(script, dir, port_arg.as_slice())?;
        if !url.starts_with("postgres://") {
            bail!("{} start printed no DATABASE_URL", script.display());
        }
        Ok(Postgres {
            script: script.to_owned(),
            dir: dir.to_owned(),
            port,
            url,
            keep,
        })
    }
}

impl Postgres {
    /// Stops the cluster at once (`devpg kill`: `pg_ctl stop -m immediate`), as in a crash:
    /// no checkpoint, every backend gone, recovery from the WAL at the next start.
    pub fn kill(&self) -> anyhow::Result<()> {
        run_devpg(self.devpg("kill"))
    }

    /// Starts the cluster again on its port and waits until it accepts connections.
    pub fn restart(&self) -> anyhow::Result<()> {
        run_devpg(self.devpg("start"))
    }

    /// The `scripts/devpg CMD DIR` command for this cluster, to run where blocking is fine
    /// (e.g. on a thread of its own while the load goes on); see [`run_devpg`].
    pub fn devpg(&self, cmd: &str) -> Command {
        let mut c = Command::new(&self.script);
        c.arg(cmd).arg(&self.dir);
        // A restart on the port it was given, or none: never on another one, where the
        // clients would not find it.
        if let (Some(port), "start") = (self.port, cmd) {
            c.arg(port.to_string());
        }
        c.stdout(Stdio::null()).stderr(Stdio::inherit());
        c
    }
}

/// Runs a command of [`Postgres::devpg`]; fails unless it succeeds.
pub fn run_devpg(mut cmd: Command) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

impl Drop for Postgres {
    fn drop(&mut self) {
        quietly(
            &self.script,
            if self.keep { "stop" } else { "destroy" },
            &self.dir,
        );
    }
}

/// `SCRIPT start DIR ARGS...` of a throwaway service script (`scripts/devpg`,
/// `scripts/devbouncer`) after removing whatever an earlier run left in DIR; answers the last
/// line it printed (its URL).
pub fn start_fresh(script: &Path, dir: &Path, args: &[String]) -> anyhow::Result<String> {
    quietly(script, "destroy", dir);
    let out = Command::new(script)
        .arg("start")
        .arg(dir)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} start {} failed", script.display(), dir.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned())
}

/// `SCRIPT CMD DIR`, its output and outcome ignored: the stop or removal of something that may
/// already be gone.
pub fn quietly(script: &Path, cmd: &str, dir: &Path) {
    let _ = Command::new(script)
        .arg(cmd)
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The postmaster of the cluster this client is connected to, when it runs on this machine
/// and the user may read its data directory.
pub async fn postmaster_pid(db: &tokio_postgres::Client) -> Option<u32> {
    let row = db
        .query_one(crate::sql::SERVER_DATA_DIRECTORY.sql(), &[])
        .await
        .ok()?;
    let dir: String = row.get(0);
    let pidfile = std::fs::read_to_string(Path::new(&dir).join("postmaster.pid")).ok()?;
    pidfile.lines().next()?.trim().parse().ok()
}
