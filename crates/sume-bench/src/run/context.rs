//! Where and how a run happened, for the section's heading lines: the command as the reader
//! would type it, the date, the machine (CPUs, memory, kernel), PostgreSQL's version, the git
//! revision, the daemon's settings, the variants, the timing and the note.

use crate::cli::RunArgs;
use crate::report::Context;
use crate::sql;
use crate::stack;

pub(super) async fn context(args: &RunArgs, db: &tokio_postgres::Client) -> Context {
    let m = Machine::read(db).await;
    Context {
        command: command_line(),
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        cpus: m.cpus,
        cpu_model: m.cpu_model,
        memory: m.memory,
        kernel: m.kernel,
        postgres: m.postgres,
        revision: revision(),
        settings: stack::daemon_settings(),
        rounds: args.rounds,
        variants: variants(args),
        warmup: args.warmup,
        duration: args.duration,
        note: args.note.clone(),
    }
}

/// The machine and the PostgreSQL a run measured on.
struct Machine {
    cpus: usize,
    cpu_model: String,
    /// `N GiB RAM`.
    memory: String,
    /// `Linux <release>`.
    kernel: String,
    /// `PostgreSQL <version>`.
    postgres: String,
}

impl Machine {
    async fn read(db: &tokio_postgres::Client) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Machine {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: first_line_with(&cpuinfo, "model name")
                .unwrap_or_else(|| "unknown CPU".into()),
            memory: first_line_with(&meminfo, "MemTotal")
                .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
                .map(|kib| format!("{:.0} GiB RAM", kib / 1024.0 / 1024.0))
                .unwrap_or_else(|| "RAM unknown".into()),
            kernel: format!(
                "Linux {}",
                std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .unwrap_or_default()
                    .trim()
            ),
            postgres: match db.query_one(sql::SERVER_VERSION.sql(), &[]).await {
                Ok(row) => format!("PostgreSQL {}", row.get::<_, String>(0)),
                Err(_) => "PostgreSQL (version unknown)".into(),
            },
        }
    }
}

fn first_line_with(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

fn command_line() -> String {
    command_line_of("bench", "BENCH_ARGS")
}

/// The command as the reader would type it: `make TARGET VAR="..."` when `make` ran this
/// subcommand, else the command line itself.
pub(crate) fn command_line_of(target: &str, var: &str) -> String {
    let args: Vec<String> = std::env::args().skip(2).collect();
    // `make` exports MAKELEVEL to the commands it runs: show what the reader would type.
    if std::env::var_os("MAKELEVEL").is_some() {
        // The Makefile names its target when one subcommand serves several (`bench-fleet`).
        let named = std::env::var("MAKE_TARGET").ok().filter(|t| !t.is_empty());
        let target = named.as_deref().unwrap_or(target);
        if args.is_empty() {
            format!("make {target}")
        } else {
            format!("make {target} {var}=\"{}\"", args.join(" "))
        }
    } else {
        std::env::args().collect::<Vec<_>>().join(" ")
    }
}

/// `N CPUs (model), N GiB RAM, Linux ...; PostgreSQL ...; revision ...`: the machine line of
/// the fleet's and the soak's sections.
pub(crate) async fn machine(db: &tokio_postgres::Client) -> String {
    let m = Machine::read(db).await;
    format!(
        "{} CPUs ({}), {}, {}; {}; revision {}",
        m.cpus,
        m.cpu_model,
        m.memory,
        m.kernel,
        m.postgres,
        revision()
    )
}

/// The short commit, marked when the work tree differs from it.
pub(crate) fn revision() -> String {
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(rev) if git(&["diff", "--quiet", "HEAD"]).is_none() => {
            format!("{rev} + uncommitted changes")
        }
        Some(rev) => rev,
        None => "unknown".into(),
    }
}

fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `[label]: what differs` of each variant.
fn variants(args: &RunArgs) -> Vec<String> {
    args.variants
        .iter()
        .map(|v| {
            let mut what: Vec<String> = v.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            if let Some(bin) = &v.bin {
                what.insert(0, format!("binary {}", bin.display()));
            }
            format!("[{}]: {}", v.label, what.join(", "))
        })
        .collect()
}
