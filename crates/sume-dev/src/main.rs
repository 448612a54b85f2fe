//! The `sume-dev` binary: parses the command line and runs one tool.

use anyhow::Context;
use clap::Parser;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use sume_dev::cli::{Cli, Command};

fn main() -> std::process::ExitCode {
    // Before anything else runs: this sets environment variables. `sign` reads
    // SUME_WEBHOOK_SECRET_FILE the way the daemon does.
    if let Err(e) = sume_inbox::config::secret_files::load() {
        eprintln!("sume-dev: {e}");
        return std::process::ExitCode::FAILURE;
    }
    // The simulator's SIM_WEBHOOK_SECRET_FILE likewise: a setting that cannot work exits 78.
    if let Err(e) = sume_sim::secret_files::load() {
        eprintln!("sume-dev: {e}");
        return std::process::ExitCode::from(78);
    }
    let cli = Cli::parse();
    let format = cli
        .global
        .values()
        .choice(&sume_inbox::config::declared::LOG_FORMAT);
    if let Err(e) = format.and_then(sume_inbox::process::logging::init) {
        eprintln!("sume-dev: {e}");
        return std::process::ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sume-dev: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sume-dev: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
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
            let report = sume_dev::demo::run_demo(args).await?;
            println!("{report}");
            anyhow::ensure!(
                report.all_match(),
                "some jobs do not match the simulator's truth"
            );
            Ok(())
        }
        Command::Sign(args) => {
            println!(
                "{}",
                sume_dev::sign::render(&args).map_err(anyhow::Error::msg)?
            );
            Ok(())
        }
    }
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
async fn on_signal(shutdown: CancellationToken) {
    sume_inbox::process::signal::terminated().await;
    shutdown.cancel();
}
