//! The `sume-inbox` binary: parses the command line and hands over to the library.

use anyhow::Context;
use clap::Parser;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use sume_inbox::cli::{Cli, Command};
use sume_inbox::{db, run, sign, telemetry, Listeners};

fn main() -> std::process::ExitCode {
    // Before anything else runs: this sets environment variables.
    if let Err(e) = sume_inbox::secrets_from_files::load() {
        eprintln!("sume-inbox: {e}");
        return std::process::ExitCode::from(2);
    }
    let cli = Cli::parse();
    if let Err(e) = telemetry::init(&cli.log_format) {
        eprintln!("sume-inbox: {e}");
        return std::process::ExitCode::from(2);
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
            std::process::ExitCode::FAILURE
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
        Command::Sim(config) => {
            let listener = TcpListener::bind(config.listen)
                .await
                .with_context(|| format!("--listen {}", config.listen))?;
            tracing::info!(listen = %listener.local_addr()?, "Sume simulator serving");
            let shutdown = CancellationToken::new();
            tokio::spawn(on_signal(shutdown.clone()));
            sume_sim::run(config, listener, shutdown).await
        }
        Command::Demo(args) => {
            let report = sume_inbox::demo::run_demo(args).await?;
            println!("{report}");
            anyhow::ensure!(
                report.all_match(),
                "some jobs do not match the simulator's truth"
            );
            Ok(())
        }
        Command::Sign(args) => {
            println!("{}", sign::render(&args).map_err(anyhow::Error::msg)?);
            Ok(())
        }
    }
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
async fn on_signal(shutdown: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "cannot watch SIGTERM");
                    let _ = ctrl_c.await;
                    shutdown.cancel();
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
    sume_inbox::notify::notify("STOPPING=1");
    shutdown.cancel();
}
