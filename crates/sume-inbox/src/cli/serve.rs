//! `sume-inbox serve` (the daemon) and `sume-inbox migrate`. Their settings are the declared
//! ones of their scope ([`crate::config::declared::SERVE`], [`crate::config::declared::MIGRATE`]).

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::CliError;
use crate::config::clap_args::{scopes, SettingArgs};
use crate::config::declared::{DATABASE_URL, MIGRATE_DATABASE_URL, SUME_API_KEY, SUME_READ_RATE};
use crate::config::{self, Config, ConfigError, Pooler};
use crate::{db, run, Listeners};

/// `serve`'s settings: every declared setting of the daemon, as flags and variables.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The settings.
    #[command(flatten)]
    pub settings: SettingArgs<scopes::Serve>,
}

impl ServeArgs {
    /// Reads and validates every setting; the first bad one is reported by name.
    pub fn into_config(self) -> Result<Config, ConfigError> {
        Config::read(self.settings.values())
    }
}

/// `migrate`'s settings.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The settings.
    #[command(flatten)]
    pub settings: SettingArgs<scopes::Migrate>,
}

/// `serve`: binds both listeners, then runs the daemon until SIGTERM or SIGINT.
pub async fn serve(args: ServeArgs) -> Result<(), CliError> {
    warn_of_near_misses();
    if let Some(read) = args
        .settings
        .values()
        .text(&SUME_READ_RATE)
        .and_then(config::month_window)
    {
        tracing::warn!(setting = SUME_READ_RATE.name, "SUME_READ_RATE: {read}");
    }
    for doubt in config::api_key_doubts(args.settings.values()) {
        tracing::warn!(setting = SUME_API_KEY.name, "{doubt}");
    }
    for doubt in config::month_doubts(args.settings.values()) {
        tracing::warn!("{doubt}");
    }
    for doubt in config::rate_doubts(args.settings.values()) {
        tracing::warn!("{doubt}");
    }
    let config = args.into_config()?;
    crate::process::memory_limit::check(crate::process::memory_limit::needed(
        config.port.max_connections + config.max_admin_connections,
        config.port.max_body_memory,
        config.max_body_bytes,
    ));
    let bind = |setting: &'static str, addr: std::net::SocketAddr| async move {
        crate::process::sockets::bind(addr).map_err(|source| CliError::Bind {
            setting,
            addr,
            source,
        })
    };
    let listeners = Listeners {
        webhook: bind("LISTEN_ADDR", config.listen_addr).await?,
        admin: bind("ADMIN_ADDR", config.admin_addr).await?,
    };
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            crate::process::signal::terminated().await;
            crate::process::systemd::stopping();
            shutdown.cancel();
        }
    });
    run(config, listeners, shutdown).await?;
    Ok(())
}

/// Warns of each variable in the environment that is a typo of a setting (first: a missing
/// setting's refusal may be its consequence).
fn warn_of_near_misses() {
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect();
    for (name, meant) in config::near_misses::near_misses(names.iter().map(String::as_str)) {
        tracing::warn!(
            variable = name,
            setting = meant,
            "{name} is not a setting and is ignored: did you mean {meant}?"
        );
    }
    for (name, setting) in
        config::near_misses::files_of_plain_settings(names.iter().map(String::as_str))
    {
        tracing::warn!(
            variable = name,
            setting,
            "{name} is ignored: only secrets are read from a file (`_FILE`); set {setting} itself"
        );
    }
}

/// `migrate`: applies the embedded migrations and says where the schema stands. It runs on
/// MIGRATE_DATABASE_URL when set, else DATABASE_URL; with DB_POOLER=transaction neither may be
/// the pooler (the migrations hold a session advisory lock), as `serve` checks.
pub async fn migrate(args: MigrateArgs) -> Result<(), CliError> {
    let v = args.settings.values();
    let pooler = config::pooler(v)?;
    let (setting, url) = match v.optional_postgres_url(&MIGRATE_DATABASE_URL)? {
        Some(url) => {
            // The rule `serve` applies: not the pooler itself (DATABASE_URL as it is read).
            if let Some(database_url) = v.text(&DATABASE_URL) {
                pooler.check_direct(
                    MIGRATE_DATABASE_URL.name,
                    url.expose(),
                    database_url.trim(),
                )?;
            }
            (&MIGRATE_DATABASE_URL, url)
        }
        None if pooler == Pooler::Transaction => {
            return Err(ConfigError::new(
                MIGRATE_DATABASE_URL.name,
                "is required with DB_POOLER=transaction: migrations need a direct connection",
            )
            .into())
        }
        None => (&DATABASE_URL, v.postgres_url(&DATABASE_URL)?),
    };
    // A database not up yet (a migration job started beside it) is waited for as `serve`
    // waits, STARTUP_PATIENCE; a refusal retrying cannot fix ends it at once; so does SIGTERM.
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    let signals = tokio::spawn(async move {
        crate::process::signal::terminated().await;
        on_signal.cancel();
    });
    let starting = crate::http::starting::Starting::default();
    let applied =
        crate::app::migrate_with_retry(setting.name, url.expose(), &stop, &starting).await;
    signals.abort();
    let applied = applied?;
    // The schema's own version: a later release may have taken it past this binary's.
    let found = db::Store::new(url.expose(), 1)?
        .schema_migrations_version()
        .await?;
    let latest = db::migrate::latest();
    if found > latest {
        super::print(&format!(
            "schema at version {found}, newer than this binary's {latest} (a later release \
             migrated it): nothing applied, and this binary runs on it\n"
        ))
    } else {
        super::print(&format!(
            "schema at version {found} (applied now: {applied:?})\n"
        ))
    }
}
