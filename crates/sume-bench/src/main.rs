//! The `sume-bench` binary: parses the command line and hands over to the library.

use clap::Parser;
use sume_bench::cli::{Cli, Command};
use sume_wire::Secret;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sume-bench: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => sume_bench::run::run(args).await,
            Command::Fleet(args) => sume_bench::fleet::run(args).await,
            Command::Soak(args) => sume_bench::soak::run(args).await,
            Command::Sweep(args) => sume_bench::sweep_scale::run(args).await,
            Command::Protocol(args) => sume_bench::protocol::run(args).await,
            Command::Chaos(args) => sume_bench::chaos::main(args).await,
            Command::BaselineServer(args) => {
                sume_bench::baseline::serve(
                    &args.database_url,
                    Secret::new(args.secret),
                    args.pool_size,
                    args.listen,
                )
                .await
            }
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sume-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
