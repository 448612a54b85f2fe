//! `sume-inbox reconcile` as README tells an operator to run it after a failover to an
//! asynchronous replica: the same binary as the daemon, DATABASE_URL (the multi-host URL) and
//! Sume's API and key, `--since` covering the run; its JSON report read back.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};
use tokio::time::Instant;

use super::app::{KEY_NAME, KEY_SECRET};

/// What one run of reconcile reported for the key, and how long it took.
#[derive(Debug, Clone, Default)]
pub(super) struct Reconciled {
    /// Jobs Sume listed within `--since`.
    pub(super) listed: u64,
    /// Registered jobs it closed.
    pub(super) closed: u64,
    /// Registered jobs already closed in the same state.
    pub(super) already_closed: u64,
    /// Pages of Sume's list read.
    pub(super) pages: u64,
    /// From the start of the process to its exit.
    pub(super) took: Duration,
}

/// Runs `BIN reconcile --since SINCE --json` and reads its report; fails unless it exits 0.
pub(super) async fn run(
    bin: &Path,
    database_url: &str,
    api_url: &str,
    since: &str,
) -> anyhow::Result<Reconciled> {
    let mut cmd = Command::new(bin);
    cmd.args(["reconcile", "--since", since, "--json"])
        .env("DATABASE_URL", database_url)
        .env("SUME_API_URL", api_url)
        .env("SUME_API_KEYS", format!("{KEY_NAME}:{KEY_SECRET}"))
        .env_remove("SUME_API_KEY")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await?
        .context("running sume-inbox reconcile")?;
    let took = started.elapsed();
    if !out.status.success() {
        bail!(
            "sume-inbox reconcile failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reconcile's JSON report")?;
    let key = &report["keys"][0];
    let n = |field: &str| key[field].as_u64().unwrap_or(0);
    Ok(Reconciled {
        listed: n("listed"),
        closed: n("closed"),
        already_closed: n("already_closed"),
        pages: n("pages"),
        took,
    })
}
