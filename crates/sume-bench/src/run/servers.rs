//! The servers under load, each a child process started and waited for here: the daemon
//! (`sume-inbox serve`, the release build beside this binary or --daemon-bin), each --variant
//! of it, and the per-request baseline. [`Servers`] holds them for the steps and stops them
//! before the stages that want the machine to themselves.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;

use crate::cli::RunArgs;
use crate::load;
use crate::report::Server;
use crate::stack::{self, Proc};

/// A server under load.
pub(super) struct Target {
    pub(super) server: Server,
    pub(super) label: String,
    pub(super) proc: Proc,
    pub(super) addr: SocketAddr,
    /// The daemon's admin address (its `/metrics`).
    pub(super) admin: Option<SocketAddr>,
}

/// Every server of a run, in the order they take their turn at each step.
pub(super) struct Servers {
    daemon: Target,
    variants: Vec<Target>,
    baseline: Option<Target>,
}

impl Servers {
    /// Starts the daemon, then each variant, then (unless --no-baseline) the baseline.
    pub(super) async fn start(
        args: &RunArgs,
        url: &str,
        secret: &str,
        work_dir: &Path,
    ) -> anyhow::Result<Servers> {
        let daemon_bin = match &args.daemon_bin {
            Some(p) => p.clone(),
            None => sibling("sume-inbox")?,
        };
        let daemon = start_daemon(&daemon_bin, url, secret, None, &[], work_dir).await?;
        let mut variants = Vec::new();
        for v in &args.variants {
            let bin = v.bin.clone().unwrap_or_else(|| daemon_bin.clone());
            variants.push(start_daemon(&bin, url, secret, Some(&v.label), &v.env, work_dir).await?);
        }
        let baseline = if args.no_baseline {
            None
        } else {
            Some(start_baseline(url, secret, args.baseline_pool, work_dir).await?)
        };
        Ok(Servers {
            daemon,
            variants,
            baseline,
        })
    }

    /// The daemon, its variants, then the baseline.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Target> {
        std::iter::once(&mut self.daemon)
            .chain(self.variants.iter_mut())
            .chain(self.baseline.as_mut())
    }

    /// Stops every server, giving the daemons longer to finish their writes.
    pub(super) fn stop(mut self) {
        self.daemon.proc.stop(Duration::from_secs(20));
        for v in &mut self.variants {
            v.proc.stop(Duration::from_secs(20));
        }
        if let Some(b) = self.baseline.as_mut() {
            b.proc.stop(Duration::from_secs(5));
        }
    }
}

/// Starts a daemon (the main one, or a labelled variant) and waits until it is ready.
async fn start_daemon(
    bin: &Path,
    url: &str,
    secret: &str,
    variant: Option<&str>,
    overrides: &[(String, String)],
    work_dir: &Path,
) -> anyhow::Result<Target> {
    let listen = stack::free_port()?;
    let admin = stack::free_port()?;
    let log = work_dir.join(match variant {
        Some(v) => format!("daemon-{v}.log"),
        None => "daemon.log".to_owned(),
    });
    eprintln!("sume-bench: starting {}", bin.display());
    let proc = stack::spawn_daemon(bin, url, secret, listen, admin, overrides, &log)?;
    let mut target = Target {
        server: if variant.is_some() {
            Server::Variant
        } else {
            Server::Daemon
        },
        label: match variant {
            Some(v) => format!("sume-inbox [{v}]"),
            None => "sume-inbox".to_owned(),
        },
        proc,
        addr: listen,
        admin: Some(admin),
    };
    if !load::wait_ready(listen, "/readyz", Duration::from_secs(60)).await {
        target.proc.alive()?;
        bail!("the daemon is not ready after 60 s; see {}", log.display());
    }
    Ok(target)
}

/// Starts the per-request baseline and waits until it answers.
async fn start_baseline(
    url: &str,
    secret: &str,
    pool: usize,
    work_dir: &Path,
) -> anyhow::Result<Target> {
    let log = work_dir.join("baseline.log");
    let (proc, addr) = stack::spawn_baseline(url, secret, pool, &log)?;
    if !load::wait_ready(addr, "/healthz", Duration::from_secs(30)).await {
        bail!(
            "the baseline is not ready after 30 s; see {}",
            log.display()
        );
    }
    Ok(Target {
        server: Server::Baseline,
        label: Server::Baseline.label().to_owned(),
        proc,
        addr,
        admin: None,
    })
}

/// A binary built beside this one (same profile, same target directory).
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let path = me.with_file_name(name);
    if !path.exists() {
        bail!(
            "{} not found: build it (`cargo build --release -p sume-inbox`) or pass --daemon-bin",
            path.display()
        );
    }
    Ok(path)
}
