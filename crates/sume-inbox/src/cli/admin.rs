//! The operator's commands: `jobs show`, `inbox ls`, `dead-letters ls`, `dead-letters drop`,
//! `replay`, `stats`, `audit ls`. They read the database (DATABASE_URL, no daemon needed) or,
//! with `--admin-url`, a daemon's admin API ([`super::source`]); [`super::render`] renders their
//! answers.

use clap::builder::{NonEmptyStringValueParser, RangedI64ValueParser};
use clap::{ArgGroup, Args, Subcommand};

use super::render;
use super::source::{Remote, Source};
use super::{CliError, Counted};
use crate::config::clap_args::{scopes, SettingArgs};
use crate::config::declared::{
    DATABASE_URL, SUME_INBOX_ADMIN_TOKEN, SUME_INBOX_ADMIN_URL, SUME_WEBHOOK_SECRET,
};
use crate::config::{self, ConfigError, Values};
use crate::db::{reach, DbError, Store, PAGE_LIMIT_MAX};
use crate::operations::replay::REPLAY_LIMIT_MAX;
use sume_wire::event::{MAX_EVENT_ID_LEN, MAX_ID_LEN};

/// `--limit` of a listing: what one page of the admin API answers. Its flag takes a negative
/// number as its value (`--limit -1`), so that the value is refused saying the range, rather
/// than clap's "unexpected argument"; a following flag (`--limit --json`) is still one.
fn page_limit() -> RangedI64ValueParser<i64> {
    clap::value_parser!(i64).range(1..=PAGE_LIMIT_MAX)
}

/// What every admin command takes: the database, or a daemon's admin API.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// DATABASE_URL and DB_POOLER, or SUME_INBOX_ADMIN_URL and its token.
    #[command(flatten)]
    pub settings: SettingArgs<scopes::Admin>,
}

/// `jobs ...`
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// A job, every event of it, its disagreements and inbox check.
    Show {
        /// The job id (Sume's).
        #[arg(value_parser = NonEmptyStringValueParser::new())]
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
        #[arg(long, default_value = "0s", allow_hyphen_values = true)]
        older_than: String,
        /// The most events to list, 1 to 1000.
        #[arg(long, default_value_t = 100, value_parser = page_limit(), allow_negative_numbers = true)]
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
        #[arg(required = true, value_parser = NonEmptyStringValueParser::new())]
        ids: Vec<String>,
        /// The database and the output format.
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Newest first.
    Ls {
        /// The most dead letters to list, 1 to 1000.
        #[arg(long, default_value_t = 100, value_parser = page_limit(), allow_negative_numbers = true)]
        limit: i64,
        /// The database and the output format.
        #[command(flatten)]
        admin: AdminArgs,
    },
}

/// `audit ...`
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// What operators did (replay, drop), newest first.
    Ls {
        /// The most entries to list, 1 to 1000.
        #[arg(long, default_value_t = 100, value_parser = page_limit(), allow_negative_numbers = true)]
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
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub event_id: Option<String>,
    /// Replay every dead letter not replayed yet.
    #[arg(long)]
    pub dead_letters: bool,
    /// The most dead letters to replay in one run, 1 to 10000; those that still cannot be
    /// replayed are reported and passed over.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..=REPLAY_LIMIT_MAX), allow_negative_numbers = true)]
    pub limit: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The database or the admin API, and the secrets to verify with (through the admin API,
    /// the daemon's own).
    #[command(flatten)]
    pub settings: SettingArgs<scopes::Replay>,
}

/// A small pool for an admin command, once the schema is known to be there. A server that
/// cannot be reached or refuses us is said as `serve` says it: the setting, the target without
/// its password, the server's words, and exit 78 when waiting cannot help.
pub(super) async fn open_store(
    database_url: &str,
    pooler: config::Pooler,
) -> Result<Store, CliError> {
    let no_schema =
        || CliError::Failed("the database has no sume schema yet: run `sume-inbox migrate`".into());
    let mut store = Store::new(database_url, 2)?;
    if pooler == config::Pooler::Transaction {
        store = store.behind_pooler(None);
    }
    match store.schema_migrations_version().await {
        Ok(v) if v >= 1 => {}
        Ok(_) => return Err(no_schema()),
        Err(e) if e.is_missing_schema() => return Err(no_schema()),
        Err(e) => {
            return Err(reach::every_host(DATABASE_URL.name, database_url, e)
                .await
                .into())
        }
    }
    // A schema an older release left: this binary's statements would fail on what is missing.
    let missing = store
        .schema_migrations_missing()
        .await
        .map_err(|e| reaching(database_url, e))?;
    if !missing.is_empty() {
        return Err(CliError::Failed(format!(
            "the schema lacks this version's migrations {missing:?}: run `sume-inbox migrate` \
             of this version first"
        )));
    }
    Ok(store)
}

/// A failure to reach the server behind DATABASE_URL as [`DbError::Unreachable`] (the setting,
/// the target, the server's words, whether waiting can help); any other failure as it is.
pub(super) fn reaching(database_url: &str, e: DbError) -> DbError {
    reach::unreachable_from(DATABASE_URL.name, database_url, &e).unwrap_or(e)
}

/// The admin API when `--admin-url` is given, else the database.
async fn open(v: &Values) -> Result<Source, CliError> {
    if let Some(url) = v.optional_http_url(&SUME_INBOX_ADMIN_URL)? {
        let token = v.secret(&SUME_INBOX_ADMIN_TOKEN)?;
        return Ok(Source::Api(Remote::new(&url, token)?));
    }
    if v.text(&DATABASE_URL).is_none() {
        return Err(ConfigError::new(
            DATABASE_URL.name,
            "is required: set DATABASE_URL (or DATABASE_URL_FILE), or SUME_INBOX_ADMIN_URL (--admin-url) with the operator's token (SUME_INBOX_ADMIN_TOKEN)",
        )
        .into());
    }
    let url = v.postgres_url(&DATABASE_URL)?;
    Ok(Source::Db(
        open_store(url.expose(), config::pooler(v)?).await?,
    ))
}

/// Runs `work` on the command's source ([`open`]); on the database, a refusal for want of a
/// privilege names the role refused ([`super::denied::naming_role`]).
async fn with_source<T, Fut>(v: &Values, work: impl FnOnce(Source) -> Fut) -> Result<T, CliError>
where
    Fut: std::future::Future<Output = Result<T, CliError>>,
{
    let done = match open(v).await {
        Ok(source) => work(source).await,
        Err(e) => Err(e),
    };
    match done {
        Err(e @ CliError::Db(_)) if v.text(&SUME_INBOX_ADMIN_URL).is_none() => {
            let url = v.postgres_url(&DATABASE_URL)?;
            Err(super::denied::naming_role(url.expose(), e).await)
        }
        done => done,
    }
}

/// `jobs show ID`: fails when nothing at all is known about the id.
pub async fn jobs_show(job_id: &str, admin: &AdminArgs) -> Result<(), CliError> {
    super::check_id("a job id", job_id, MAX_ID_LEN, Counted::Characters)?;
    let detail = with_source(admin.settings.values(), |source| async move {
        source.job_detail(job_id).await
    })
    .await?;
    let (out, known) = render::render_job_detail(&detail, admin.json);
    // Nothing known: the text would repeat the error line; the JSON still says it to a script.
    if known || admin.json {
        super::print(&out)?;
    }
    if !known {
        return Err(CliError::Failed(format!(
            "no job and no event for {job_id:?}"
        )));
    }
    Ok(())
}

/// `inbox ls`.
pub async fn inbox_ls(older_than: &str, limit: i64, admin: &AdminArgs) -> Result<(), CliError> {
    let older_than = super::duration_flag("--older-than", older_than)?;
    let mut rows = with_source(admin.settings.values(), |source| async move {
        source.inbox(older_than, one_more(limit)).await
    })
    .await?;
    let cut = cut_at(&mut rows, limit);
    super::print(&render::render_inbox(&rows, admin.json))?;
    say_cut(cut, limit, "or raise --older-than to list fewer");
    Ok(())
}

/// `dead-letters ls`.
pub async fn dead_letters_ls(limit: i64, admin: &AdminArgs) -> Result<(), CliError> {
    let mut rows = with_source(admin.settings.values(), |source| async move {
        source.dead_letters(one_more(limit)).await
    })
    .await?;
    let cut = cut_at(&mut rows, limit);
    super::print(&render::render_dead_letters(&rows, admin.json))?;
    say_cut(cut, limit, "or drop those handled");
    Ok(())
}

/// `dead-letters drop ID...`: fails when an id names no dead letter (the others are dropped).
pub async fn dead_letters_drop(ids: &[String], admin: &AdminArgs) -> Result<(), CliError> {
    for id in ids {
        super::check_id("a dead letter's id", id, MAX_EVENT_ID_LEN, Counted::Bytes)?;
    }
    // An id named twice is dropped, said and counted once.
    let mut seen = std::collections::HashSet::new();
    let ids: Vec<String> = ids.iter().filter(|i| seen.insert(*i)).cloned().collect();
    let asked = &ids;
    let dropped = with_source(admin.settings.values(), |source| async move {
        source.drop_dead_letters(asked).await
    })
    .await?;
    let missing: Vec<&String> = ids.iter().filter(|id| !dropped.contains(id)).collect();
    super::print(&render::render_dropped(&dropped, &missing, admin.json))?;
    if !missing.is_empty() {
        return Err(CliError::Failed(format!(
            "{} of {} ids name no dead letter",
            missing.len(),
            ids.len()
        )));
    }
    Ok(())
}

/// `replay`: fails when the one event asked for could not be replayed, or when any dead letter
/// of `--dead-letters` was not (it still names no job, no longer verifies, or its event id
/// holds another event), saying how many.
pub async fn replay(args: ReplayArgs) -> Result<(), CliError> {
    if let Some(id) = &args.event_id {
        super::check_id("an event id", id, MAX_EVENT_ID_LEN, Counted::Bytes)?;
    }
    let v = args.settings.values();
    let (event_id, limit) = (args.event_id.as_deref(), args.limit);
    let items = with_source(v, |source| async move {
        let secrets = match (&source, v.text(&SUME_WEBHOOK_SECRET)) {
            (Source::Api(_), _) => Vec::new(),
            (Source::Db(_), Some(_)) => v.secrets(&SUME_WEBHOOK_SECRET)?,
            (Source::Db(_), None) => {
                return Err(ConfigError::new(
                    SUME_WEBHOOK_SECRET.name,
                    "is required to replay from the database: set SUME_WEBHOOK_SECRET (or its _FILE), or use --admin-url",
                )
                .into())
            }
        };
        source.replay(event_id, limit, &secrets).await
    })
    .await?;
    super::print(&render::render_replayed(&items, args.json))?;
    if args.event_id.is_some() && !items.iter().all(|r| r.ok) {
        return Err(CliError::Failed("replay failed".into()));
    }
    let refused = items.iter().filter(|r| r.not_verified).count();
    let failed = items.iter().filter(|r| !r.ok).count();
    if failed > 0 {
        // Some or all of a run's letters: a script learns it from the status, as `reconcile`
        // stopped early or `dead-letters drop` with an id naming none.
        let unverified = match refused {
            0 => String::new(),
            n => format!(", {n} of them do not verify with the current secrets"),
        };
        return Err(CliError::Failed(format!(
            "{failed} of {} dead letters were not replayed (left as they are{unverified}; \
             each says why above)",
            items.len()
        )));
    }
    Ok(())
}

/// `stats`.
pub async fn stats(admin: &AdminArgs) -> Result<(), CliError> {
    let st = with_source(admin.settings.values(), |source| async move {
        source.stats().await
    })
    .await?;
    super::print(&render::render_stats(&st, admin.json))?;
    Ok(())
}

/// `audit ls`.
pub async fn audit_ls(limit: i64, admin: &AdminArgs) -> Result<(), CliError> {
    let mut entries = with_source(admin.settings.values(), |source| async move {
        source.audit(one_more(limit)).await
    })
    .await?;
    let cut = cut_at(&mut entries, limit);
    super::print(&render::render_audit(&entries, admin.json))?;
    say_cut(cut, limit, "they are listed newest first");
    Ok(())
}

/// The rows a listing asks for to learn whether `limit` cut it: one more, within a page.
fn one_more(limit: i64) -> i64 {
    (limit + 1).min(PAGE_LIMIT_MAX)
}

/// Keeps the first `limit` of `rows`; whether the listing stopped there with more left (or, at
/// the page's most, may have).
fn cut_at<T>(rows: &mut Vec<T>, limit: i64) -> bool {
    let at_most = limit == PAGE_LIMIT_MAX;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let cut = rows.len() > limit || (at_most && rows.len() == limit);
    rows.truncate(limit);
    cut
}

/// Says on stderr, when the listing stopped at `--limit` with more left, that it did and how
/// to see more, so that standard output (the rows, or `--json`'s array) stays as it was.
fn say_cut(cut: bool, limit: i64, narrower: &str) {
    if !cut {
        return;
    }
    let more = match limit < PAGE_LIMIT_MAX {
        true => "there are more",
        false => "there may be more",
    };
    eprintln!(
        "sume-inbox: the listing stopped at --limit {limit}; {more}: raise --limit (up to \
         {PAGE_LIMIT_MAX}; {narrower})"
    );
}
