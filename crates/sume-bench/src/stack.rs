//! What a run stands on: a throwaway PostgreSQL (`scripts/devpg`), the daemon and the baseline
//! as child processes, their memory from `/proc`, and enough file descriptors.
//!
//! Every process started here is stopped when its guard drops (SIGTERM, then SIGKILL after a
//! grace period), and is told by the kernel to stop if this process dies first.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// A throwaway cluster; destroyed on drop unless kept.
pub struct Postgres {
    script: PathBuf,
    dir: PathBuf,
    pub url: String,
    keep: bool,
}

impl Postgres {
    /// Starts a fresh cluster in `dir` (removing whatever an earlier run left there).
    pub fn start(script: &Path, dir: &Path, keep: bool) -> anyhow::Result<Postgres> {
        let _ = Command::new(script)
            .arg("destroy")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let out = Command::new(script)
            .arg("start")
            .arg(dir)
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            bail!("{} start {} failed", script.display(), dir.display());
        }
        let url = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if !url.starts_with("postgres://") {
            bail!("{} start printed no DATABASE_URL", script.display());
        }
        Ok(Postgres {
            script: script.to_owned(),
            dir: dir.to_owned(),
            url,
            keep,
        })
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let cmd = if self.keep { "stop" } else { "destroy" };
        let _ = Command::new(&self.script)
            .arg(cmd)
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A child process, stopped on drop.
pub struct Proc {
    pub name: &'static str,
    child: Child,
}

impl Proc {
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

/// Resident memory of a process, in KiB, from `/proc/PID/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// Peak resident set (VmHWM) since the process started.
    pub peak_kib: u64,
    /// Resident set now (VmRSS).
    pub now_kib: u64,
}

pub fn memory(pid: u32) -> anyhow::Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(parse_memory(&status))
}

fn parse_memory(status: &str) -> Memory {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Memory {
        peak_kib: field("VmHWM:"),
        now_kib: field("VmRSS:"),
    }
}

/// CPU time (user + system) a process has used, from `/proc/PID/stat`; with `children`, also
/// that of its children it has waited for (PostgreSQL's exited backends and workers).
pub fn cpu_time(pid: u32, children: bool) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, ticks) = parse_stat(&stat, children)?;
    Some(ticks_to_duration(ticks))
}

/// The CPU time of a PostgreSQL cluster: the postmaster, every live child, and every child that
/// has exited (counted in the postmaster's children times).
pub fn cluster_cpu_time(postmaster: u32) -> Option<Duration> {
    let mut ticks = 0;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if pid == postmaster {
            ticks += parse_stat(&stat, true).map_or(0, |(_, t)| t);
            found = true;
        } else if let Some((ppid, t)) = parse_stat(&stat, false) {
            if ppid == postmaster {
                ticks += t;
            }
        }
    }
    found.then(|| ticks_to_duration(ticks))
}

fn ticks_to_duration(ticks: u64) -> Duration {
    // SAFETY: sysconf only reads a configuration value.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / per_sec)
}

/// `(ppid, utime + stime [+ cutime + cstime])` in clock ticks. The command name (field 2) may
/// hold spaces and parentheses, so fields are counted from its closing parenthesis.
fn parse_stat(stat: &str, children: bool) -> Option<(u32, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let ppid = num(1)? as u32;
    let mut ticks = num(11)? + num(12)?;
    if children {
        ticks += num(13)? + num(14)?;
    }
    Some((ppid, ticks))
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

/// Raises the open-file limit to what `needed` descriptors take (children inherit it).
pub fn ensure_fd_limit(needed: u64) -> anyhow::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read only the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            bail!("getrlimit(RLIMIT_NOFILE) failed");
        }
        if lim.rlim_cur < needed {
            lim.rlim_cur = needed.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    if lim.rlim_cur < needed {
        bail!(
            "the open-file limit is {} and this run needs about {needed}: raise it (`ulimit -n {needed}`)",
            lim.rlim_cur
        );
    }
    Ok(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_status() {
        let status =
            "Name:\tsume-inbox\nVmPeak:\t  900000 kB\nVmHWM:\t   45312 kB\nVmRSS:\t   40100 kB\n";
        assert_eq!(
            parse_memory(status),
            Memory {
                peak_kib: 45_312,
                now_kib: 40_100
            }
        );
        assert_eq!(parse_memory(""), Memory::default());
    }

    #[test]
    fn reads_cpu_times_from_proc_stat() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime ...
        let stat = "4242 (postgres: a) b) S 4000 4000 4000 0 -1 4194560 10 0 0 0 150 50 7 3 20 0 1";
        assert_eq!(parse_stat(stat, false), Some((4000, 200)));
        assert_eq!(parse_stat(stat, true), Some((4000, 210)));
        assert_eq!(parse_stat("garbage", false), None);
        let me = cpu_time(std::process::id(), false).unwrap();
        assert!(me < Duration::from_secs(3_600));
    }

    #[test]
    fn reads_our_own_memory() {
        let m = memory(std::process::id()).unwrap();
        assert!(m.peak_kib >= m.now_kib && m.now_kib > 0, "{m:?}");
    }
}
