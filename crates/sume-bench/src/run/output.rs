//! Where a run's results go: the section printed on stdout and appended to --out
//! (docs/benchmarks.md, created with its headings when missing) unless --no-append, or, after
//! a failure, the table of the steps measured so far on stderr, marked as no result.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

use crate::cli::RunArgs;
use crate::report::{Context, Report, Row};

/// Prints the section and appends it to --out unless --no-append.
pub(super) fn publish(report: &Report, args: &RunArgs) -> anyhow::Result<()> {
    print_and_append(&report.markdown(), &args.out, args.no_append)
}

/// Prints `section` on stdout and, unless `no_append`, appends it to `out`: what every
/// subcommand that records results does with its section.
pub(crate) fn print_and_append(section: &str, out: &Path, no_append: bool) -> anyhow::Result<()> {
    println!("\n{section}");
    if !no_append {
        append(out, section)?;
        eprintln!("sume-bench: appended to {}", out.display());
    }
    Ok(())
}

/// Prints the table of the steps measured before a failure.
pub(super) fn print_partial(context: Context, rows: Vec<Row>) {
    eprintln!("\nsteps measured before the failure (not a result):\n");
    let partial = Report {
        context,
        rows,
        ceiling: None,
        attach: Vec::new(),
        sweep: None,
    };
    eprintln!("{}", partial.table());
}

/// Appends `section` to `path` (created with its headings when missing).
pub(crate) fn append(path: &Path, section: &str) -> anyhow::Result<()> {
    let fresh = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    if fresh {
        writeln!(f, "# Benchmarks\n\n## Results\n")?;
    }
    f.write_all(section.as_bytes())?;
    Ok(())
}
