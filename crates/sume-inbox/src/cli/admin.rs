//! The operator's commands over the database: `jobs show`, `inbox ls`, `dead-letters ls`,
//! `replay`, `stats`. They need DATABASE_URL, not a running daemon; [`crate::ops`] renders
//! their answers.

use clap::{ArgGroup, Args, Subcommand};

use super::CliError;
use crate::config;
use crate::db::Store;
use crate::ops;

/// What every admin command takes.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// `transaction` when DATABASE_URL is a transaction pooler (unnamed statements only).
    #[arg(long, env = "DB_POOLER", default_value = "none")]
    pub db_pooler: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `jobs ...`
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// A job, every event of it, its disagreements and inbox check.
    Show {
        /// The job id (Sume's).
        job_id: String,
        /// The database and the output format.
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// `inbox ...`
#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// Events not applied and not set aside, oldest first.
    Ls {
        /// Only events at least this old, e.g. 10m.
        #[arg(long, default_value = "0s")]
        older_than: String,
        /// The most events to list.
        #[arg(long, default_value_t = 100)]
        limit: i64,
        /// The database and the output format.
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// `dead-letters ...`
#[derive(Debug, Subcommand)]
pub enum DeadLettersCommand {
    /// Removes dead letters nobody wants replayed (by id, as `ls` shows them).
    Drop {
        /// The dead letters' ids.
        #[arg(required = true)]
        ids: Vec<String>,
        /// The database and the output format.
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Newest first.
    Ls {
        /// The most dead letters to list.
        #[arg(long, default_value_t = 100)]
        limit: i64,
        /// The database and the output format.
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// `replay`'s settings.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("what").required(true).args(["event_id", "dead_letters"])))]
pub struct ReplayArgs {
    /// The event to replay.
    pub event_id: Option<String>,
    /// Replay every dead letter not replayed yet.
    #[arg(long)]
    pub dead_letters: bool,
    /// The most dead letters to replay in one run.
    #[arg(long, default_value_t = 1000)]
    pub limit: i64,
    /// The secrets to verify with (comma separated).
    #[arg(long, env = "SUME_WEBHOOK_SECRET", hide_env_values = true)]
    pub webhook_secret: String,
    /// The database and the output format.
    #[command(flatten)]
    pub admin: AdminArgs,
}

/// A small pool for an admin command, once the schema is known to be there.
async fn open_store(admin: &AdminArgs) -> Result<Store, CliError> {
    let no_schema =
        || CliError::Failed("the database has no sume schema yet: run `sume-inbox migrate`".into());
    let mut store = Store::new(&admin.database_url, 2)?;
    if config::parse_pooler(&admin.db_pooler)? == config::Pooler::Transaction {
        store = store.behind_pooler(None);
    }
    match store.schema_migrations_version().await {
        Ok(v) if v >= 1 => Ok(store),
        Ok(_) => Err(no_schema()),
        Err(e) if e.is_missing_schema() => Err(no_schema()),
        Err(e) => Err(e.into()),
    }
}

/// `jobs show ID`: fails when nothing at all is known about the id.
pub async fn jobs_show(job_id: &str, admin: &AdminArgs) -> Result<(), CliError> {
    let store = open_store(admin).await?;
    let (out, known) = ops::jobs_show(&store, job_id, admin.json).await?;
    print!("{out}");
    if !known {
        return Err(CliError::Failed(format!(
            "no job and no event for {job_id}"
        )));
    }
    Ok(())
}

/// `inbox ls`.
pub async fn inbox_ls(older_than: &str, limit: i64, admin: &AdminArgs) -> Result<(), CliError> {
    let older_than = config::parse_duration("--older-than", older_than)?;
    let store = open_store(admin).await?;
    print!(
        "{}",
        ops::inbox_ls(&store, older_than, limit, admin.json).await?
    );
    Ok(())
}

/// `dead-letters ls`.
pub async fn dead_letters_ls(limit: i64, admin: &AdminArgs) -> Result<(), CliError> {
    let store = open_store(admin).await?;
    print!("{}", ops::dead_letters_ls(&store, limit, admin.json).await?);
    Ok(())
}

/// `dead-letters drop ID...`: fails when an id names no dead letter (the others are dropped).
pub async fn dead_letters_drop(ids: &[String], admin: &AdminArgs) -> Result<(), CliError> {
    let store = open_store(admin).await?;
    let dropped = store.dead_letters_drop(ids).await?;
    let missing: Vec<&String> = ids.iter().filter(|id| !dropped.contains(id)).collect();
    print!("{}", ops::render_dropped(&dropped, &missing, admin.json));
    if !missing.is_empty() {
        return Err(CliError::Failed(format!(
            "{} of {} ids name no dead letter",
            missing.len(),
            ids.len()
        )));
    }
    Ok(())
}

/// `replay`: fails when the one event asked for could not be replayed, or when any delivery
/// does not verify with the current secrets.
pub async fn replay(args: ReplayArgs) -> Result<(), CliError> {
    let secrets = config::parse_secrets("SUME_WEBHOOK_SECRET", &args.webhook_secret)?;
    let store = open_store(&args.admin).await?;
    let items = match &args.event_id {
        Some(id) => vec![ops::replay_event(&store, &secrets, id).await?],
        None => ops::replay_dead_letters(&store, &secrets, args.limit).await?,
    };
    print!("{}", ops::render_replayed(&items, args.admin.json));
    if args.event_id.is_some() && !items.iter().all(|r| r.ok) {
        return Err(CliError::Failed("replay failed".into()));
    }
    let refused = items.iter().filter(|r| r.not_verified).count();
    if refused > 0 {
        return Err(CliError::Failed(format!(
            "{refused} deliveries do not verify with the current secrets"
        )));
    }
    Ok(())
}

/// `stats`.
pub async fn stats(admin: &AdminArgs) -> Result<(), CliError> {
    let store = open_store(admin).await?;
    print!("{}", ops::stats(&store, admin.json).await?);
    Ok(())
}
