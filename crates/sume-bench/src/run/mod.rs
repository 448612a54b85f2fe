//! `sume-bench run`: one complete, self-contained benchmark.
//!
//! Starts a throwaway PostgreSQL (durable defaults: fsync, synchronous_commit=on), the daemon
//! (`sume-inbox serve`, the release build, as a child process) and the per-request baseline
//! (also a child), then for each connection count loads the daemon and the baseline as fast as
//! they answer, loads both at a fixed rate, and measures the PostgreSQL ceiling. Each step
//! starts from an empty `sume.events` and ends with the data check: rows stored must equal 2xx
//! answers, or the run fails without a result.
//!
//! This file is the sequence. `setup.rs` prepares the machine and the database, `servers.rs`
//! starts and stops the servers, `steps.rs` runs the ingest steps, `stages.rs` the ceiling,
//! attach and sweep, `context.rs` describes the machine and `output.rs` writes the results.

pub(crate) mod context;
pub(crate) mod output;
mod servers;
pub(crate) mod setup;
mod stages;
mod steps;

use std::sync::Arc;
use std::time::Instant;

use crate::cli::RunArgs;
use crate::report::{self, Report};
use crate::stack;
use crate::webhook::Generator;

use servers::Servers;

/// What every step and the ceiling share.
struct Bench {
    args: RunArgs,
    url: String,
    db: tokio_postgres::Client,
    generator: Arc<Generator>,
    /// For PostgreSQL's CPU time; unknown for a database that is not local.
    postmaster: Option<u32>,
    /// Steps run so far: with `--from-empty` each is a window of its own in the report.
    windows: usize,
}

/// `sume-bench run`: the whole benchmark, from starting PostgreSQL to the appended section.
/// Fails, with no result, when a server stores other than what it acknowledged or anything
/// else goes wrong; after a failed step the steps measured before it are printed on stderr.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let began = Instant::now();
    let work_dir = setup::prepare(&args)?;
    let (_pg, url) = setup::database(&args, &work_dir)?;
    let db = setup::open_durable(&url).await?;
    let (secret, generator) = setup::secret_and_generator(args.other_header_ids, args.mixed_shapes);
    let mut servers = Servers::start(&args, &url, &secret, &work_dir).await?;

    let context = context::context(&args, &db).await;
    let postmaster = stack::postmaster_pid(&db).await;
    let mut bench = Bench {
        args: args.clone(),
        url: url.clone(),
        db,
        generator,
        postmaster,
        windows: 0,
    };
    let mut rows = Vec::new();
    let outcome = bench.rounds(&mut servers, &mut rows).await;
    let rows = report::median_rows(rows);
    if let Err(e) = outcome {
        output::print_partial(context, rows);
        return Err(e);
    }
    // The servers are done; the ceiling gets the machine to itself.
    servers.stop();
    let ceiling = bench.ceiling().await?;
    let attach = stages::attach(&args, &url).await?;
    let sweep = stages::sweep(&args, &url).await?;

    let report = Report {
        context,
        rows,
        ceiling,
        attach,
        sweep,
    };
    output::publish(&report, &args)?;
    eprintln!("sume-bench: done in {:.0} s", began.elapsed().as_secs_f64());
    Ok(())
}
