//! The command line: one binary, `sume-inbox`, with subcommands, each in a file of its own:
//! [`serve`] (the daemon, and `migrate`), [`admin`] (the operator's commands over the
//! database), [`reconcile`] (Sume's job list against the database), [`healthcheck`]. Every
//! `serve` setting is an environment variable first (that is how daemons are configured) and a
//! flag second.
//!
//! Every setting's flag comes from its declaration ([`crate::config::declared`]); values are
//! taken as text and read by [`crate::config`], so an error names the variable a user actually
//! set, not a flag they never typed, and a missing one exits 78 like a malformed one. [`dispatch`] runs a parsed command and
//! answers a [`CliError`], whose [`CliError::exit_code`] the binary exits with.

pub mod admin;
mod denied;
pub mod healthcheck;
pub mod reconcile;
pub mod render;
pub mod serve;
pub mod source;

use clap::{Parser, Subcommand};
use thiserror::Error;

use crate::config::clap_args::{scopes, SettingArgs};

pub use admin::{
    AdminArgs, AuditCommand, DeadLettersCommand, InboxCommand, JobsCommand, ReplayArgs,
};
pub use healthcheck::HealthcheckArgs;
pub use reconcile::ReconcileArgs;
pub use serve::{MigrateArgs, ServeArgs};

use crate::app::RunError;
use crate::config::ConfigError;
use crate::db::DbError;

/// `sume-inbox`: what the binary parses.
#[derive(Debug, Parser)]
#[command(
    name = "sume-inbox",
    version,
    about = "Receives Sume's signed webhooks into a PostgreSQL inbox and applies them to jobs once their rows commit"
)]
pub struct Cli {
    /// LOG_FORMAT, which every command takes.
    #[command(flatten)]
    pub global: SettingArgs<scopes::Global>,
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start
pub enum Command {
    /// Run the daemon: webhook ingest, attach, admin API.
    Serve(ServeArgs),
    /// Apply the embedded migrations to DATABASE_URL and exit.
    Migrate(MigrateArgs),
    /// Jobs: `jobs show ID` prints a job, every event of it, and how it was closed.
    Jobs {
        /// What to do with jobs.
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// The inbox: `inbox ls` lists events waiting for their job.
    Inbox {
        /// What to do with the inbox.
        #[command(subcommand)]
        command: InboxCommand,
    },
    /// Dead letters (verified deliveries that named no job): `ls` lists them, `drop ID...`
    /// removes those nobody wants replayed.
    #[command(name = "dead-letters")]
    DeadLetters {
        /// What to do with dead letters.
        #[command(subcommand)]
        command: DeadLettersCommand,
    },
    /// Re-verify stored deliveries with the current secrets and run them through the normal
    /// path again (idempotent): one event by id, or every dead letter not yet replayed.
    Replay(ReplayArgs),
    /// What operators did: every replay and drop, through the CLI or the admin API.
    Audit {
        /// What to do with it.
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// The numbers an operator checks first.
    Stats(AdminArgs),
    /// After a database restore or a failover: read Sume's job list (within the fleet's read
    /// budget) and close every registered job Sume reports terminal, through the normal fold.
    Reconcile(ReconcileArgs),
    /// Exit 0 when the local daemon answers /healthz (or /readyz with --ready): for container
    /// health checks in images that have no HTTP client.
    Healthcheck(HealthcheckArgs),
}

/// Why a command failed. Each kind has its exit status, so a supervisor or a script can tell
/// a setting to fix from a failure that may pass.
#[derive(Debug, Error)]
pub enum CliError {
    /// A setting is missing or malformed (exit 78, sysexits' EX_CONFIG: restarting will not
    /// help; systemd's `RestartPreventExitStatus=78`). So is a database that refuses who we
    /// are or what we asked for (a wrong password, role, database or host name).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The database failed or refused.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The daemon stopped on an error.
    #[error(transparent)]
    Run(#[from] RunError),
    /// A listener could not be bound: the setting names the address.
    #[error("{setting} {addr}: {source}")]
    Bind {
        /// `LISTEN_ADDR` or `ADMIN_ADDR`.
        setting: &'static str,
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why the bind failed.
        source: std::io::Error,
    },
    /// The command ran and its answer is a failure (an unknown job, a refused replay, an
    /// unhealthy daemon); the message says which.
    #[error("{0}")]
    Failed(String),
    /// An argument this command cannot take as given (exit 2, as clap's refusals): the message
    /// says why and what to do instead.
    #[error("{0}")]
    Usage(String),
    /// Standard output could not be written (see [`print()`]).
    #[error("cannot write to standard output: {0}")]
    Stdout(std::io::Error),
}

impl CliError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            _ if self.reader_gone() => 0,
            CliError::Usage(_) => 2,
            CliError::Config(_) => 78,
            CliError::Run(RunError::Config(_)) => 78,
            CliError::Db(e) | CliError::Run(RunError::Db(e)) if e.is_permanent() => 78,
            _ => 1,
        }
    }

    /// Standard output is a pipe whose reader went away (`| head`): it took what it wanted, so
    /// the command ends there, quietly and with 0, as `grep` or `rg` do.
    pub fn reader_gone(&self) -> bool {
        matches!(self, CliError::Stdout(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// A command's duration option (`--older-than`, `--since`, `--max-wait`): one that does not
/// read, is negative, or is past ten years, is refused as any flag is (exit 2), before anything
/// is asked. Its flag takes a value that starts with `-` (`--older-than -5m`), so that the value
/// is refused saying why rather than clap's "unexpected argument"; a flag taken for its value
/// (`--older-than --json`) is said to be one.
pub fn duration_flag(flag: &'static str, raw: &str) -> Result<std::time::Duration, CliError> {
    use crate::config::setting::{longest_text, DURATION_FORM, MAX_DURATION};
    if raw.trim().starts_with('-') {
        let why = match crate::config::is_negative_duration(raw) {
            true => format!(
                "{flag}: {raw:?} is negative: write {DURATION_FORM}, from 0s to {}",
                longest_text(MAX_DURATION)
            ),
            false => format!(
                "{flag}: {raw:?} is no duration (a flag where its value should be?): write a \
                 duration after {flag}, such as {flag} 10m"
            ),
        };
        return Err(CliError::Usage(why));
    }
    crate::config::parse_bounded_duration(flag, raw).map_err(|e| CliError::Usage(e.to_string()))
}

/// How an id's length is counted: a job's in characters, as the admin API and the check on
/// `sume.jobs.job_id` count them; an event's or a dead letter's in bytes, as they are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// UTF-8 bytes.
    Bytes,
    /// Characters (Unicode code points).
    Characters,
}

impl Counted {
    fn len(self, id: &str) -> usize {
        match self {
            Counted::Bytes => id.len(),
            Counted::Characters => id.chars().count(),
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Counted::Bytes => "bytes",
            Counted::Characters => "characters",
        }
    }
}

/// An id longer than any job's, event's or dead letter's (`max`, counted as `counted` says,
/// the admin API's bound) is refused before anything is asked (exit 2): it names nothing, a URL
/// could not carry it, and an audit entry would keep it whole. `what` is the id's kind (`a job
/// id`).
pub fn check_id(what: &str, id: &str, max: usize, counted: Counted) -> Result<(), CliError> {
    let len = counted.len(id);
    if (1..=max).contains(&len) {
        return Ok(());
    }
    let shown: String = id.chars().take(64).collect();
    let cut = if shown.len() < id.len() { "..." } else { "" };
    let unit = counted.unit();
    Err(CliError::Usage(format!(
        "{shown:?}{cut} ({len} {unit}) names nothing: {what} is 1 to {max} {unit}"
    )))
}

/// Every command's output goes through here: written whole and flushed, and a write that fails
/// is an error, never a panic (`print!` panics): [`CliError::reader_gone`] for a reader that
/// went away, else exit 1 saying why (a full disk).
pub fn print(text: &str) -> Result<(), CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(CliError::Stdout)
}

/// Runs a parsed command.
pub async fn dispatch(command: Command) -> Result<(), CliError> {
    match command {
        Command::Serve(args) => serve::serve(args).await,
        Command::Migrate(args) => serve::migrate(args).await,
        Command::Jobs {
            command: JobsCommand::Show { job_id, admin },
        } => admin::jobs_show(&job_id, &admin).await,
        Command::Inbox {
            command:
                InboxCommand::Ls {
                    older_than,
                    limit,
                    admin,
                },
        } => admin::inbox_ls(&older_than, limit, &admin).await,
        Command::DeadLetters {
            command: DeadLettersCommand::Ls { limit, admin },
        } => admin::dead_letters_ls(limit, &admin).await,
        Command::DeadLetters {
            command: DeadLettersCommand::Drop { ids, admin },
        } => admin::dead_letters_drop(&ids, &admin).await,
        Command::Replay(args) => admin::replay(args).await,
        Command::Audit {
            command: AuditCommand::Ls { limit, admin },
        } => admin::audit_ls(limit, &admin).await,
        Command::Stats(admin) => admin::stats(&admin).await,
        Command::Reconcile(args) => reconcile::reconcile(args).await,
        Command::Healthcheck(args) => healthcheck::healthcheck(args).await,
    }
}
