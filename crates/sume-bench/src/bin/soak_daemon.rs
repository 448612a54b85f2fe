//! `sume-soak-daemon`: the daemon of `sume-bench soak`. It is `sume-inbox serve` (the same
//! settings, read and checked the same way, the same allocator and runtime), with one
//! difference: after the configuration has been checked, `SOAK_RETENTION` replaces `RETENTION`
//! and `JOB_RETENTION`.
//!
//! Why: the configuration refuses a `RETENTION` under one hour (applied events are what makes a
//! redelivery a duplicate) and a `JOB_RETENTION` under it, so in a ten-minute soak the
//! daemon's retention would delete nothing and every table would only grow. With a retention
//! of a minute, rows are deleted as fast as they arrive, which is the steady state a soak must
//! show. Not for production: a redelivery older than `SOAK_RETENTION` would be stored again.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use sume_inbox::cli::ServeArgs;
use sume_inbox::process::sockets as listen;
use sume_inbox::{run, Listeners};
use tokio_util::sync::CancellationToken;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `serve`'s settings, and the soak's retention.
#[derive(Debug, Parser)]
#[command(name = "sume-soak-daemon")]
struct Cli {
    /// `serve`, as `sume-inbox` is started (the only command there is here).
    #[arg(value_parser = ["serve"], hide = true)]
    command: Option<String>,
    /// Replaces RETENTION and JOB_RETENTION once the configuration has been checked.
    #[arg(long, env = "SOAK_RETENTION", value_parser = retention)]
    soak_retention: Duration,
    #[command(flatten)]
    serve: ServeArgs,
}

fn retention(raw: &str) -> Result<Duration, String> {
    humantime::parse_duration(raw.trim()).map_err(|e| format!("{raw:?}: {e}"))
}

fn main() -> ExitCode {
    sume_inbox::process::tune_allocator();
    let cli = Cli::parse();
    if let Err(e) = sume_inbox::process::logging::init("json") {
        eprintln!("sume-soak-daemon: {e}");
        return ExitCode::from(78);
    }
    let mut config = match cli.serve.into_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sume-soak-daemon: {e}");
            return ExitCode::from(78);
        }
    };
    config.sweep.retention = cli.soak_retention;
    config.sweep.job_retention = Some(cli.soak_retention);
    let runtime = match sume_inbox::process::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sume-soak-daemon: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let served = runtime.block_on(async move {
        let listeners = Listeners {
            webhook: listen::bind(config.listen_addr)?,
            admin: listen::bind(config.admin_addr)?,
        };
        let shutdown = CancellationToken::new();
        tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                sume_inbox::process::signal::terminated().await;
                shutdown.cancel();
            }
        });
        run(config, listeners, shutdown).await?;
        anyhow::Ok(())
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sume-soak-daemon: {e:#}");
            ExitCode::FAILURE
        }
    }
}
