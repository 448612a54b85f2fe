//! The child processes under load: the daemon (`sume-inbox serve` with the run's settings)
//! and this binary's `baseline-server`, each held by a [`Proc`] that stops it on drop, and the
//! free ports they listen on.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// A child process, stopped on drop.
pub struct Proc {
    /// Names the process in errors (`sume-inbox`, `baseline`).
    pub name: &'static str,
    child: Child,
}

impl Proc {
    /// The process id, for reading its memory and CPU time under `/proc`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails when the process has already exited.
    pub fn alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited early ({status})", self.name);
        }
        Ok(())
    }

    /// SIGKILL at once, as in a crash (`kill -9`), and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then up to `grace` for a clean exit, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // SAFETY: kill(2) on our own child's pid; no memory is touched.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// Makes the child receive SIGTERM when this process dies, whatever way.
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe and only sets a flag of the new process.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

/// A free loopback port (bound, read and released; the child binds it right after).
pub fn free_port() -> anyhow::Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?)
}

/// The daemon's tunables passed through from this process's environment, with defaults.
pub const DAEMON_TUNABLES: &[(&str, &str)] = &[
    ("WORKER_THREADS", "1"),
    ("INGEST_WRITERS", "2"),
    ("INGEST_BATCH_MAX", "512"),
    ("DB_POOL_SIZE", "16"),
];

/// The effective value of each tunable for this run.
pub fn daemon_settings() -> Vec<(String, String)> {
    DAEMON_TUNABLES
        .iter()
        .map(|(k, default)| {
            let v = std::env::var(k)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| default.to_string());
            (k.to_string(), v)
        })
        .collect()
}

/// Starts `sume-inbox serve`, logging (warnings and up) to `log`.
pub fn spawn_daemon(
    bin: &Path,
    database_url: &str,
    secret: &str,
    listen: SocketAddr,
    admin: SocketAddr,
    overrides: &[(String, String)],
    log: &Path,
) -> anyhow::Result<Proc> {
    let log_file =
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .env("DATABASE_URL", database_url)
        .env("SUME_WEBHOOK_SECRET", secret)
        .env("LISTEN_ADDR", listen.to_string())
        .env("ADMIN_ADDR", admin.to_string())
        // Nothing in a benchmark may leave the machine: Sume's API is an address that refuses.
        .env("SUME_API_URL", "http://127.0.0.1:9")
        .env("LOG_FORMAT", "json")
        .env("RUST_LOG", "warn")
        .env_remove("SUME_API_KEYS")
        .env_remove("SUME_API_KEY")
        .env_remove("ADMIN_TOKEN")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file);
    for (k, v) in daemon_settings()
        .into_iter()
        .chain(overrides.iter().cloned())
    {
        cmd.env(k, v);
    }
    die_with_parent(&mut cmd);
    let child = cmd.spawn().with_context(|| {
        format!(
            "starting {} (build it with `cargo build --release -p sume-inbox`)",
            bin.display()
        )
    })?;
    Ok(Proc {
        name: "sume-inbox",
        child,
    })
}

/// Starts this binary's `baseline-server` and answers where it listens.
pub fn spawn_baseline(
    database_url: &str,
    secret: &str,
    pool_size: usize,
    log: &Path,
) -> anyhow::Result<(Proc, SocketAddr)> {
    let me = std::env::current_exe()?;
    let log_file = std::fs::File::create(log)?;
    let mut cmd = Command::new(me);
    cmd.arg("baseline-server")
        .arg("--database-url")
        .arg(database_url)
        .arg("--pool-size")
        .arg(pool_size.to_string())
        .env("SUME_WEBHOOK_SECRET", secret)
        // Kept open (and never written): its end tells the server that we are gone.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log_file);
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut proc = Proc {
        name: "baseline",
        child,
    };
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok());
    match addr {
        Some(addr) => Ok((proc, addr)),
        None => {
            proc.alive()?;
            bail!(
                "the baseline server did not say where it listens (see {})",
                log.display()
            )
        }
    }
}
