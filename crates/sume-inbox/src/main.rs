//! The `sume-inbox` binary: parses the command line and hands over to the library.

use anyhow::Context;
use clap::Parser;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use sume_inbox::cli::{
    Cli, Command, DeadLettersCommand, HealthcheckArgs, InboxCommand, JobsCommand,
};
use sume_inbox::config::ConfigError;
use sume_inbox::{config, db, ops, run, telemetry, Listeners};

/// A server's allocation pattern (many small, short-lived buffers per request, across threads)
/// is where glibc's allocator spends most: mimalloc halves that cost (see docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// sysexits.h: a configuration error.
const EX_CONFIG: u8 = 78;

fn main() -> std::process::ExitCode {
    // Before anything else runs: this sets environment variables.
    if let Err(e) = sume_inbox::secrets_from_files::load() {
        eprintln!("sume-inbox: {e}");
        return std::process::ExitCode::from(EX_CONFIG);
    }
    let cli = Cli::parse();
    if let Err(e) = telemetry::init(&cli.log_format) {
        eprintln!("sume-inbox: {e}");
        return std::process::ExitCode::from(EX_CONFIG);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sume-inbox: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sume-inbox: {e:#}");
            // A bad setting will not fix itself: a distinct status lets a supervisor stop
            // restarting (systemd's RestartPreventExitStatus=).
            if e.downcast_ref::<ConfigError>().is_some() {
                std::process::ExitCode::from(EX_CONFIG)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => {
            let config = args.into_config()?;
            let listeners = Listeners {
                webhook: TcpListener::bind(config.listen_addr)
                    .await
                    .with_context(|| format!("LISTEN_ADDR {}", config.listen_addr))?,
                admin: TcpListener::bind(config.admin_addr)
                    .await
                    .with_context(|| format!("ADMIN_ADDR {}", config.admin_addr))?,
            };
            let shutdown = CancellationToken::new();
            tokio::spawn(on_signal(shutdown.clone()));
            run(config, listeners, shutdown).await?;
            Ok(())
        }
        Command::Migrate(args) => {
            let mut client = db::connect(&args.database_url).await?;
            let applied = db::migrate::migrate(&mut client).await?;
            println!(
                "schema at version {} (applied now: {:?})",
                db::migrate::latest(),
                applied
            );
            Ok(())
        }
        Command::Jobs {
            command: JobsCommand::Show { job_id, admin },
        } => {
            let store = open_store(&admin.database_url).await?;
            let (out, known) = ops::jobs_show(&store, &job_id, admin.json).await?;
            print!("{out}");
            anyhow::ensure!(known, "no job and no event for {job_id}");
            Ok(())
        }
        Command::Inbox {
            command:
                InboxCommand::Ls {
                    older_than,
                    limit,
                    admin,
                },
        } => {
            let older_than = config::parse_duration("--older-than", &older_than)?;
            let store = open_store(&admin.database_url).await?;
            print!(
                "{}",
                ops::inbox_ls(&store, older_than, limit, admin.json).await?
            );
            Ok(())
        }
        Command::DeadLetters {
            command: DeadLettersCommand::Ls { limit, admin },
        } => {
            let store = open_store(&admin.database_url).await?;
            print!("{}", ops::dead_letters_ls(&store, limit, admin.json).await?);
            Ok(())
        }
        Command::Replay(args) => {
            let secrets = config::parse_secrets("SUME_WEBHOOK_SECRET", &args.webhook_secret)?;
            let store = open_store(&args.admin.database_url).await?;
            let items = match &args.event_id {
                Some(id) => vec![ops::replay_event(&store, &secrets, id).await?],
                None => ops::replay_dead_letters(&store, &secrets, args.limit).await?,
            };
            print!("{}", ops::render_replayed(&items, args.admin.json));
            let refused = items
                .iter()
                .filter(|r| !r.ok && r.result.contains("does not verify"))
                .count();
            anyhow::ensure!(
                args.event_id.is_none() || items.iter().all(|r| r.ok),
                "replay failed"
            );
            anyhow::ensure!(
                refused == 0,
                "{refused} deliveries do not verify with the current secrets"
            );
            Ok(())
        }
        Command::Stats(admin) => {
            let store = open_store(&admin.database_url).await?;
            print!("{}", ops::stats(&store, admin.json).await?);
            Ok(())
        }
        Command::Healthcheck(args) => healthcheck(args).await,
    }
}

async fn healthcheck(args: HealthcheckArgs) -> anyhow::Result<()> {
    let mut addr = config::parse_addr("LISTEN_ADDR", &args.listen_addr)?;
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    let path = if args.ready { "readyz" } else { "healthz" };
    let response = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .build()?
        .get(format!("http://{addr}/{path}"))
        .send()
        .await
        .with_context(|| format!("GET http://{addr}/{path}"))?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    anyhow::ensure!(status.is_success(), "{path}: {status} {body}");
    println!("{path}: {body}");
    Ok(())
}

/// A small pool for an admin command, once the schema is known to be there.
async fn open_store(url: &str) -> anyhow::Result<db::Store> {
    let store = db::Store::new(url, 2)?;
    match store.schema_migrations_version().await {
        Ok(v) if v >= 1 => Ok(store),
        Ok(_) => anyhow::bail!("the database has no sume schema yet: run `sume-inbox migrate`"),
        Err(e) if e.is_missing_schema() => {
            anyhow::bail!("the database has no sume schema yet: run `sume-inbox migrate`")
        }
        Err(e) => Err(e.into()),
    }
}

/// Cancels `shutdown` on SIGTERM or SIGINT, telling systemd first.
async fn on_signal(shutdown: CancellationToken) {
    sume_inbox::signal::terminated().await;
    sume_inbox::notify::stopping();
    shutdown.cancel();
}
