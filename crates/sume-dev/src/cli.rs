//! The command line of `sume-dev`: one subcommand per tool.

use clap::{Parser, Subcommand};
use sume_inbox::config::clap_args::{scopes, SettingArgs};

/// The parsed command line; `main` sets up logging from it and runs [`Cli::command`].
#[derive(Debug, Parser)]
#[command(
    name = "sume-dev",
    version,
    about = "Development tools for sume-inbox: the Sume simulator, the demo and signed test webhooks"
)]
pub struct Cli {
    /// LOG_FORMAT, as sume-inbox declares it (filter with RUST_LOG).
    #[command(flatten)]
    pub global: SettingArgs<scopes::Global>,
    /// The tool to run.
    #[command(subcommand)]
    pub command: Command,
}

/// One tool of `sume-dev`, with its own flags.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start
pub enum Command {
    /// Run the Sume simulator: jobs, rate limits, signed webhooks, injectable faults.
    Sim(sume_sim::SimConfig),
    /// The whole story in a minute: simulator, daemons and an application racing them.
    Demo(crate::demo::DemoArgs),
    /// Print the headers (or a curl command) of a correctly signed test webhook.
    Sign(crate::sign::SignArgs),
}
