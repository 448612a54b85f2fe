//! The disk-full scenario's cluster: a PostgreSQL of its own whose data directory lives on a
//! small tmpfs (`mount -t tmpfs -o size=...`), so that a ballast file written beside it fills
//! the disk for real: PostgreSQL then fails to extend a table (`53100 disk_full`) or to write
//! its WAL (a PANIC and a restart). Its log lives outside the tmpfs, so that what it says while
//! the disk is full is kept.
//!
//! The cluster is destroyed and the tmpfs unmounted when [`SmallDisk`] drops.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};
use rand::Rng;
use tokio::time::Instant;

use super::args::ChaosArgs;

/// A throwaway cluster on a tmpfs of `--disk-mib`.
pub(super) struct SmallDisk {
    mount: PathBuf,
    devpg: PathBuf,
    cluster: PathBuf,
    log: PathBuf,
    ballast: PathBuf,
    /// The scenario's database on it.
    pub(super) url: String,
}

impl SmallDisk {
    /// Whether a tmpfs can be mounted here (root with CAP_SYS_ADMIN); the reason when not.
    pub(super) fn usable() -> Result<(), String> {
        let dir = std::env::temp_dir().join(format!("sume-chaos-mount-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let mounted = mount_tmpfs(&dir, 1).map_err(|e| format!("{e:#}"));
        if mounted.is_ok() {
            unmount(&dir);
        }
        let _ = std::fs::remove_dir(&dir);
        mounted
    }

    /// Mounts the tmpfs, starts the cluster on it, and creates `db_name`.
    pub(super) async fn start(
        args: &ChaosArgs,
        work_dir: &Path,
        db_name: &str,
    ) -> anyhow::Result<SmallDisk> {
        let tag = format!(
            "{}-{:x}",
            std::process::id(),
            rand::thread_rng().gen::<u32>()
        );
        // Under /tmp: the cluster's unprivileged owner must reach it (a checkout under /root
        // may be closed to it, and the cluster would then move off the tmpfs).
        let mount = std::env::temp_dir().join(format!("sume-chaos-disk-{tag}"));
        std::fs::create_dir_all(&mount)?;
        mount_tmpfs(&mount, args.disk_mib)?;
        let log = work_dir.join(format!("postgres-disk-{tag}.log"));
        let mut disk = SmallDisk {
            cluster: mount.join("pg"),
            ballast: mount.join("ballast"),
            mount,
            devpg: args.devpg.clone(),
            log,
            url: String::new(),
        };
        disk.prepare_log()?;
        let port = super::world::quiet_port()?;
        let server_url = disk.devpg_start(Some(port)).await?;
        disk.url = crate::stages::fresh_database(&server_url, db_name).await?;
        Ok(disk)
    }

    /// The cluster's log as a link to a file off the tmpfs, writable by its owner.
    fn prepare_log(&self) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.cluster)?;
        std::fs::File::create(&self.log)?;
        std::fs::set_permissions(
            &self.log,
            std::os::unix::fs::PermissionsExt::from_mode(0o666),
        )?;
        std::os::unix::fs::symlink(&self.log, self.cluster.join("postgres.log"))?;
        Ok(())
    }

    async fn devpg_start(&self, port: Option<u16>) -> anyhow::Result<String> {
        let mut cmd = Command::new(&self.devpg);
        cmd.arg("start").arg(&self.cluster);
        if let Some(p) = port {
            cmd.arg(p.to_string());
        }
        cmd.stderr(Stdio::inherit());
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        if !out.status.success() {
            bail!("devpg start on the tmpfs failed");
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_owned())
    }

    /// Writes the ballast until the disk is full; answers the bytes written.
    pub(super) fn fill(&mut self) -> anyhow::Result<u64> {
        let mut f = std::fs::File::create(&self.ballast).context("creating the ballast")?;
        let chunk = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => return Err(e).context("writing the ballast"),
            }
        }
        let _ = f.flush();
        Ok(written)
    }

    /// Removes the ballast: the space is back.
    pub(super) fn free(&mut self) -> anyhow::Result<()> {
        std::fs::remove_file(&self.ballast).context("removing the ballast")
    }

    /// Waits until the server accepts connections again, starting the cluster once if it gave
    /// up (a PANIC during recovery); answers how long that took.
    pub(super) async fn ensure_up(&self, patience: Duration) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let mut restarted = false;
        loop {
            if answers(&self.url).await {
                return Ok(start.elapsed());
            }
            if !restarted && start.elapsed() > Duration::from_secs(10) {
                restarted = true;
                self.devpg_start(None).await?;
            }
            if start.elapsed() > patience {
                bail!(
                    "PostgreSQL on the tmpfs answers nothing {patience:?} after the space came back; see {}",
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// PANIC lines in the cluster's log.
    pub(super) fn panics(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("PANIC:"))
            .count()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        crate::stack::quietly(&self.devpg, "destroy", &self.cluster);
        unmount(&self.mount);
        let _ = std::fs::remove_dir(&self.mount);
    }
}

/// Whether the server answers a query on `url`.
async fn answers(url: &str) -> bool {
    let Ok(Ok(db)) = tokio::time::timeout(Duration::from_secs(2), crate::stages::client(url)).await
    else {
        return false;
    };
    db.query_one(crate::sql::SERVER_NOW.sql(), &[])
        .await
        .is_ok()
}

fn mount_tmpfs(dir: &Path, mib: u64) -> anyhow::Result<()> {
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o"])
        .arg(format!("size={mib}m,mode=0755"))
        .arg("tmpfs")
        .arg(dir)
        .stderr(Stdio::piped())
        .output()
        .context("running mount")?;
    if !out.status.success() {
        bail!(
            "mount -t tmpfs failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn unmount(dir: &Path) {
    let _ = Command::new("umount")
        .arg("-l")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
