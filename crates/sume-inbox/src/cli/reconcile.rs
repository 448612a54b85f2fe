//! `sume-inbox reconcile --since 6h`: closes, through the normal fold, every registered job
//! that Sume's job list reports terminal (see [`crate::operations::reconciliation`]). Run it after a database
//! restore or a failover to an asynchronous replica; it needs DATABASE_URL and the API keys,
//! not a running daemon, and spends the same read budget as the fleet.

use std::time::Duration;

use clap::Args;

use super::CliError;
use crate::config::clap_args::{scopes, SettingArgs};
use crate::config::declared::{
    DATABASE_URL, SUME_API_ALLOW_PLAINTEXT, SUME_API_KEYS, SUME_API_URL, SUME_READ_DAILY,
    SUME_READ_RATE, SUME_TIMEOUT,
};
use crate::config::{self, ConfigError};
use crate::db::Store;
use crate::operations::list_walk::{MAX_PAGES_DEFAULT, MAX_PAGES_LIMIT};
use crate::operations::reconciliation::{KeyReport, Reconcile, ReconcileReport};

/// `--max-pages`: at most a key's documented reads for a day.
fn max_pages() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=i64::from(MAX_PAGES_LIMIT))
}

/// `reconcile`'s settings: the database, Sume's API and its budget, as `serve` reads them.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// How far back to look: jobs Sume created within this (e.g. 6h; cover the time since the
    /// restore point, plus your longest job).
    #[arg(long, default_value = "6h", allow_hyphen_values = true)]
    pub since: String,
    /// The longest the run waits for the read budget, in all (it shares the fleet's).
    #[arg(long, default_value = "10m", allow_hyphen_values = true)]
    pub max_wait: String,
    /// The most pages of Sume's job list read per key, 1 to 10000 (a hundred jobs a page): a
    /// key whose listing reaches it before --since stops there, and the run exits 1.
    #[arg(long, default_value_t = MAX_PAGES_DEFAULT, value_parser = max_pages(), allow_negative_numbers = true)]
    pub max_pages: u32,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The settings shared with `serve`.
    #[command(flatten)]
    pub settings: SettingArgs<scopes::Reconcile>,
}

impl ReconcileArgs {
    /// The run, its flags and settings read and checked (a bad flag exits 2, a bad setting is a
    /// [`ConfigError`], exit 78).
    fn reconcile(&self) -> Result<(Reconcile, Duration, Duration), CliError> {
        let since = super::duration_flag("--since", &self.since)?;
        if since.is_zero() {
            return Err(CliError::Usage(format!(
                "--since: {:?} looks back over no time, so nothing would be reconciled: write \
                 how far back to list Sume's jobs, such as 6h (the time since the restore point, \
                 plus your longest job)",
                self.since
            )));
        }
        let max_wait = super::duration_flag("--max-wait", &self.max_wait)?;
        let v = self.settings.values();
        let url = v.http_url(&SUME_API_URL)?;
        config::check_plaintext(&url, v.switch(&SUME_API_ALLOW_PLAINTEXT)?)?;
        let keys = config::api_keys(v)?;
        if keys.is_empty() {
            return Err(ConfigError::new(
                SUME_API_KEYS.name,
                "is required: reconcile reads Sume's job list and needs at least one key (SUME_API_KEYS, SUME_API_KEY, or their _FILE)",
            )
            .into());
        }
        let rate = v.rate(&SUME_READ_RATE)?;
        let daily = v.count(&SUME_READ_DAILY)? as u32;
        let timeout = v.duration(&SUME_TIMEOUT)?;
        let database_url = v.postgres_url(&DATABASE_URL)?;
        let client = sume_wire::StatusClient::new(&url, timeout)
            .map_err(|e| ConfigError::new(SUME_API_URL.name, e.to_string()))?;
        let mut store = Store::new(database_url.expose(), 2)?;
        if config::pooler(v)? == config::Pooler::Transaction {
            store = store.behind_pooler(None);
        }
        Ok((
            Reconcile::new(store, client, keys, rate, daily).with_max_pages(self.max_pages),
            since,
            max_wait,
        ))
    }
}

/// `reconcile`: prints what it did per key; fails (exit 1) when a key's listing stopped early.
pub async fn reconcile(args: ReconcileArgs) -> Result<(), CliError> {
    for doubt in config::rate_doubts(args.settings.values()) {
        tracing::warn!("{doubt}");
    }
    let (run, since, max_wait) = args.reconcile()?;
    let database_url = args.settings.values().postgres_url(&DATABASE_URL)?;
    // The schema there, and this version's: said as the other admin commands say it.
    let pooler = config::pooler(args.settings.values())?;
    let url = database_url.expose();
    let done = match super::admin::open_store(url, pooler).await {
        Ok(_) => (run.run(since, max_wait).await)
            .map_err(|e| CliError::from(super::admin::reaching(url, e))),
        Err(e) => Err(e),
    };
    let report = match done {
        Ok(report) => report,
        Err(e) => return Err(super::denied::naming_role(url, e).await),
    };
    let out = if args.json {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::Failed(format!("the report does not serialize: {e}")))?;
        format!("{json}\n")
    } else {
        render(&report)
    };
    super::print(&out)?;
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
            "  key {}: {} page(s), {} job(s) listed{}{}, {} terminal: {} closed now, {} already closed, {} disagreement(s), {} not registered here{}{}\n",
            super::render::shown(&k.key), k.pages, k.listed, undated(k), unread(k), k.terminal, k.closed, k.already_closed, k.disagreements, k.not_registered,
            match &k.out_of_order {
                // A stop at --max-pages says it already.
                Some(order) if !k.stopped.as_deref().unwrap_or("").contains(order.as_str()) => {
                    format!("; the list is not newest first ({order}): read past --since")
                }
                _ => String::new(),
            },
            match &k.stopped {
                Some(why) => format!("; STOPPED EARLY: {}", super::render::shown(why)),
                None => String::new(),
            }
        ));
    }
    out
}

/// The entries of a key's listing that did not read as a job, when there are any.
fn unread(k: &KeyReport) -> String {
    match &k.unread_example {
        Some(example) if k.unread > 0 => format!(
            " ({} entr{} not read as a job, such as {}: left out, the rest of the page read)",
            k.unread,
            if k.unread == 1 { "y" } else { "ies" },
            super::render::shown(example)
        ),
        _ => String::new(),
    }
}

/// The jobs of a key's listing whose `created_at` did not read as a time, when there are any.
fn undated(k: &KeyReport) -> String {
    match &k.undated_example {
        Some(example) if k.undated > 0 => format!(
            " ({} with a created_at not read as a time, such as {}: looked at all the same)",
            k.undated,
            super::render::shown(example)
        ),
        _ => String::new(),
    }
}
