//! `sume-inbox reconcile --since 6h`: closes, through the normal fold, every registered job
//! that Sume's job list reports terminal (see [`crate::operations::reconciliation`]). Run it after a database
//! restore or a failover to an asynchronous replica; it needs DATABASE_URL and the API keys,
//! not a running daemon, and spends the same read budget as the fleet.

use clap::Args;

use super::CliError;
use crate::config::{self, ApiKey, ConfigError};
use crate::db::Store;
use crate::operations::reconciliation::{Reconcile, ReconcileReport};

/// `reconcile`'s settings: the database, Sume's API and its budget, as `serve` reads them.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// How far back to look: jobs Sume created within this (e.g. 6h; cover the time since the
    /// restore point, plus your longest job).
    #[arg(long, default_value = "6h")]
    pub since: String,
    /// The longest the run waits for the read budget, in all (it shares the fleet's).
    #[arg(long, default_value = "10m")]
    pub max_wait: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// `transaction` when DATABASE_URL is a transaction pooler (unnamed statements only).
    #[arg(long, env = "DB_POOLER", default_value = "none")]
    pub db_pooler: String,
    /// Base URL of Sume's API.
    #[arg(
        long,
        env = "SUME_API_URL",
        default_value = "https://www.sume.so/api/v1"
    )]
    pub sume_api_url: String,
    /// Allow an `http://` SUME_API_URL to another host (`1`/`true`).
    #[arg(long, env = "SUME_API_ALLOW_PLAINTEXT", default_value = "0")]
    pub sume_api_allow_plaintext: String,
    /// API keys as name:key,name:key.
    #[arg(long, env = "SUME_API_KEYS", hide_env_values = true)]
    pub sume_api_keys: Option<String>,
    /// A single API key, named `default` (when SUME_API_KEYS is not set).
    #[arg(long, env = "SUME_API_KEY", hide_env_values = true)]
    pub sume_api_key: Option<String>,
    /// Reads per key for the whole fleet: `100` (a minute) or `100/1m`.
    #[arg(long, env = "SUME_READ_RATE", default_value = "100")]
    pub sume_read_rate: String,
    /// Reads per key and UTC day for the whole fleet.
    #[arg(long, env = "SUME_READ_DAILY", default_value = "9000")]
    pub sume_read_daily: String,
    /// Timeout of one call to Sume.
    #[arg(long, env = "SUME_TIMEOUT", default_value = "10s")]
    pub sume_timeout: String,
}

impl ReconcileArgs {
    fn keys(&self) -> Result<Vec<ApiKey>, ConfigError> {
        let given = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        match (given(&self.sume_api_keys), given(&self.sume_api_key)) {
            (Some(raw), _) => config::parse_api_keys("SUME_API_KEYS", &raw),
            (None, Some(key)) => Ok(vec![ApiKey {
                name: "default".to_owned(),
                key: sume_wire::Secret::new(key.trim()),
            }]),
            (None, None) => Err(ConfigError::new(
                "SUME_API_KEYS",
                "reconcile reads Sume's job list and needs at least one key (or SUME_API_KEY)",
            )),
        }
    }

    /// The run, its settings read and checked (a bad one is a [`ConfigError`], exit 78).
    fn reconcile(&self) -> Result<(Reconcile, std::time::Duration, std::time::Duration), CliError> {
        use config::*;
        let url = parse_api_url("SUME_API_URL", &self.sume_api_url)?;
        check_plaintext(
            &url,
            parse_bool("SUME_API_ALLOW_PLAINTEXT", &self.sume_api_allow_plaintext)?,
        )?;
        let keys = self.keys()?;
        let rate = parse_rate("SUME_READ_RATE", &self.sume_read_rate)?;
        let daily =
            parse_count("SUME_READ_DAILY", &self.sume_read_daily, 1)?.min(i32::MAX as usize) as u32;
        let timeout = parse_duration("SUME_TIMEOUT", &self.sume_timeout)?;
        let since = parse_duration("--since", &self.since)?;
        let max_wait = parse_duration("--max-wait", &self.max_wait)?;
        let database_url = check_database_url(&self.database_url)?;
        let client = sume_wire::StatusClient::new(&url, timeout)
            .map_err(|e| ConfigError::new("SUME_API_URL", e.to_string()))?;
        let mut store = Store::new(database_url.expose(), 2)?;
        if crate::config::parse_pooler(&self.db_pooler)? == crate::config::Pooler::Transaction {
            store = store.behind_pooler(None);
        }
        Ok((
            Reconcile::new(store, client, keys, rate, daily),
            since,
            max_wait,
        ))
    }
}

/// `reconcile`: prints what it did per key; fails (exit 1) when a key's listing stopped early.
pub async fn reconcile(args: ReconcileArgs) -> Result<(), CliError> {
    let (run, since, max_wait) = args.reconcile()?;
    let report = run.run(since, max_wait).await?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serializes")
        );
    } else {
        print!("{}", render(&report));
    }
    if report.complete() {
        Ok(())
    } else {
        Err(CliError::Failed(
            "reconcile stopped before the end of a key's listing (see above); run it again".into(),
        ))
    }
}

/// The report for a terminal.
pub fn render(report: &ReconcileReport) -> String {
    let mut out = format!(
        "reconcile: Sume's jobs created since {}\n",
        report.since.to_rfc3339()
    );
    for k in &report.keys {
        out.push_str(&format!(
            "  key {}: {} page(s), {} job(s) listed, {} terminal: {} closed now, {} already closed, {} disagreement(s), {} not registered here{}\n",
            k.key, k.pages, k.listed, k.terminal, k.closed, k.already_closed, k.disagreements, k.not_registered,
            match &k.stopped {
                Some(why) => format!("; STOPPED EARLY: {why}"),
                None => String::new(),
            }
        ));
    }
    out
}
