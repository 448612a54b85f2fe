//! `sume-bench run`: one complete, self-contained benchmark.
//!
//! Starts a throwaway PostgreSQL (durable defaults: fsync, synchronous_commit=on), the daemon
//! (`sume-inbox serve`, the release build, as a child process) and the per-request baseline
//! (also a child), then for each connection count loads the daemon and the baseline as fast as
//! they answer, loads both at a fixed rate, and measures the PostgreSQL ceiling. Each step
//! starts from an empty `sume.events` and ends with the data check: rows stored must equal 2xx
//! answers, or the run fails without a result.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use rand::Rng;
use sume_wire::Secret;

use crate::ceiling;
use crate::check::stored_matches_acked;
use crate::cli::RunArgs;
use crate::load::{self, Mode, Step};
use crate::report::{self, Context, CpuCost, Report, Row, Server};
use crate::sql;
use crate::stack::{self, Postgres, Proc};
use crate::stages;
use crate::webhook::Generator;

/// A server under load.
struct Target {
    server: Server,
    label: String,
    proc: Proc,
    addr: SocketAddr,
    /// The daemon's admin address (its `/metrics`).
    admin: Option<SocketAddr>,
}

/// Starts a daemon (the main one, or a labelled variant) and waits until it is ready.
async fn start_daemon(
    bin: &Path,
    url: &str,
    secret: &str,
    variant: Option<&str>,
    overrides: &[(String, String)],
    work_dir: &Path,
) -> anyhow::Result<Target> {
    let listen = stack::free_port()?;
    let admin = stack::free_port()?;
    let log = work_dir.join(match variant {
        Some(v) => format!("daemon-{v}.log"),
        None => "daemon.log".to_owned(),
    });
    eprintln!("sume-bench: starting {}", bin.display());
    let proc = stack::spawn_daemon(bin, url, secret, listen, admin, overrides, &log)?;
    let mut target = Target {
        server: if variant.is_some() {
            Server::Variant
        } else {
            Server::Daemon
        },
        label: match variant {
            Some(v) => format!("sume-inbox [{v}]"),
            None => "sume-inbox".to_owned(),
        },
        proc,
        addr: listen,
        admin: Some(admin),
    };
    if !load::wait_ready(listen, "/readyz", Duration::from_secs(60)).await {
        target.proc.alive()?;
        bail!("the daemon is not ready after 60 s; see {}", log.display());
    }
    Ok(target)
}

struct Bench {
    args: RunArgs,
    url: String,
    db: tokio_postgres::Client,
    generator: Arc<Generator>,
    /// For PostgreSQL's CPU time; unknown for a database that is not local.
    postmaster: Option<u32>,
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let began = Instant::now();
    let most = args
        .connections
        .iter()
        .copied()
        .chain([args.rate_connections])
        .max()
        .unwrap_or(1) as u64;
    // Our sockets, the server's, PostgreSQL's, and slack for files and reconnects.
    let limit = stack::ensure_fd_limit(2 * most + 1024)?;
    eprintln!("sume-bench: open-file limit {limit}");
    std::fs::create_dir_all(&args.work_dir)
        .with_context(|| format!("creating {}", args.work_dir.display()))?;
    let work_dir = std::fs::canonicalize(&args.work_dir)?;

    let (_pg, url) = match &args.database_url {
        Some(url) => (None, url.clone()),
        None => {
            eprintln!("sume-bench: starting a throwaway PostgreSQL");
            let pg = Postgres::start(&args.devpg, &work_dir.join("pg"), args.keep_pg)?;
            let url = pg.url.clone();
            (Some(pg), url)
        }
    };
    let mut db = connect(&url).await?;
    sume_inbox::db::migrate::migrate(&mut db).await?;
    let sync: String = db
        .query_one(sql::SERVER_SYNCHRONOUS_COMMIT.sql(), &[])
        .await?
        .get(0);
    let fsync: String = db.query_one(sql::SERVER_FSYNC.sql(), &[]).await?.get(0);
    if sync != "on" || fsync != "on" {
        bail!("PostgreSQL runs with synchronous_commit={sync}, fsync={fsync}: a durable benchmark needs both on");
    }

    let (secret, run_id) = {
        let mut rng = rand::thread_rng();
        (
            format!("whsec_bench_{:016x}", rng.gen::<u64>()),
            format!("{:06x}", rng.gen::<u32>() & 0xff_ffff),
        )
    };
    let generator = Arc::new(Generator::new(Secret::new(secret.clone()), run_id));

    let daemon_bin = match &args.daemon_bin {
        Some(p) => p.clone(),
        None => sibling("sume-inbox")?,
    };
    let mut daemon = start_daemon(&daemon_bin, &url, &secret, None, &[], &work_dir).await?;
    let mut variants = Vec::new();
    for v in &args.variants {
        let bin = v.bin.clone().unwrap_or_else(|| daemon_bin.clone());
        variants.push(start_daemon(&bin, &url, &secret, Some(&v.label), &v.env, &work_dir).await?);
    }
    let mut baseline = if args.no_baseline {
        None
    } else {
        let log = work_dir.join("baseline.log");
        let (proc, addr) = stack::spawn_baseline(&url, &secret, args.baseline_pool, &log)?;
        if !load::wait_ready(addr, "/healthz", Duration::from_secs(30)).await {
            bail!(
                "the baseline is not ready after 30 s; see {}",
                log.display()
            );
        }
        Some(Target {
            server: Server::Baseline,
            label: Server::Baseline.label().to_owned(),
            proc,
            addr,
            admin: None,
        })
    };

    let context = context(&args, &db).await;
    let postmaster = stack::postmaster_pid(&db).await;
    let mut bench = Bench {
        args: args.clone(),
        url: url.clone(),
        db,
        generator,
        postmaster,
    };
    let mut rows = Vec::new();
    // Servers take turns step by step (and round by round), so that a burst of noise on a
    // shared machine does not land on one of them only.
    let outcome = async {
        for round in 1..=args.rounds {
            if args.rounds > 1 {
                eprintln!("sume-bench: round {round} of {}", args.rounds);
            }
            for &n in &args.connections {
                rows.push(bench.step(&mut daemon, n, Mode::Closed).await?);
                for v in variants.iter_mut() {
                    rows.push(bench.step(v, n, Mode::Closed).await?);
                }
                if let Some(b) = baseline.as_mut() {
                    rows.push(bench.step(b, n, Mode::Closed).await?);
                }
            }
            if args.rate > 0.0 {
                let mode = Mode::Rate(args.rate);
                rows.push(bench.step(&mut daemon, args.rate_connections, mode).await?);
                for v in variants.iter_mut() {
                    rows.push(bench.step(v, args.rate_connections, mode).await?);
                }
                if let Some(b) = baseline.as_mut() {
                    rows.push(bench.step(b, args.rate_connections, mode).await?);
                }
            }
        }
        anyhow::Ok(())
    }
    .await;
    let rows = report::median_rows(rows);
    if let Err(e) = outcome {
        eprintln!("\nsteps measured before the failure (not a result):\n");
        let partial = Report {
            context,
            rows,
            ceiling: None,
            attach: None,
            sweep: None,
        };
        eprintln!("{}", partial.table());
        return Err(e);
    }
    // The servers are done; the ceiling gets the machine to itself.
    daemon.proc.stop(Duration::from_secs(20));
    for mut v in variants {
        v.proc.stop(Duration::from_secs(20));
    }
    if let Some(mut b) = baseline.take() {
        b.proc.stop(Duration::from_secs(5));
    }
    let ceiling = if args.ceiling_duration.is_zero() {
        None
    } else {
        Some(bench.ceiling().await?)
    };

    let attach = if args.attach_jobs == 0 {
        None
    } else {
        eprint!(
            "sume-bench: attach, {} jobs registered on {} connections ... ",
            args.attach_jobs, args.attach_connections
        );
        let db_url = stages::fresh_database(&url, "bench_attach").await?;
        let a = stages::attach(&db_url, args.attach_jobs, args.attach_connections).await?;
        eprintln!("all closed in {:.2} s", a.total.as_secs_f64());
        Some(a)
    };
    let sweep = if args.sweep_due == 0 {
        None
    } else {
        eprint!(
            "sume-bench: sweep, a pass over {} due jobs beside {} closed ones vs none ... ",
            args.sweep_due, args.sweep_closed
        );
        let sw = stages::sweep(&url, args.sweep_due, args.sweep_closed).await?;
        eprintln!("ratio {:.2}", sw.ratio());
        Some(sw)
    };
    let report = Report {
        context,
        rows,
        ceiling,
        attach,
        sweep,
    };
    println!("\n{}", report.markdown());
    if !args.no_append {
        append(&args.out, &report.markdown())?;
        eprintln!("sume-bench: appended to {}", args.out.display());
    }
    eprintln!("sume-bench: done in {:.0} s", began.elapsed().as_secs_f64());
    Ok(())
}

impl Bench {
    async fn count_events(&self) -> anyhow::Result<u64> {
        let n: i64 = self
            .db
            .query_one(sql::EVENTS_COUNT.sql(), &[])
            .await?
            .get(0);
        Ok(n as u64)
    }

    async fn empty_inbox(&self) -> anyhow::Result<()> {
        self.db
            .batch_execute(sql::EVENTS_TRUNCATE.sql())
            .await
            .context("emptying the inbox before a step")?;
        self.db
            .batch_execute(sql::SERVER_CHECKPOINT.sql())
            .await
            .context("a checkpoint before a step")?;
        Ok(())
    }

    /// One step against one server: empty inbox, warm-up + measured window, data check.
    async fn step(
        &mut self,
        target: &mut Target,
        connections: usize,
        mode: Mode,
    ) -> anyhow::Result<Row> {
        let label = match mode {
            Mode::Closed => format!("{} max, {connections} conns", target.label),
            Mode::Rate(r) => format!(
                "{} {}/s, {connections} conns",
                target.label,
                report::thousands(r)
            ),
        };
        self.empty_inbox().await?;
        eprint!("sume-bench: {label} ... ");
        let step = Step {
            addr: target.addr,
            connections,
            mode,
            warmup: self.args.warmup,
            duration: self.args.duration,
        };
        // What autovacuum does to a live inbox: fresh planner statistics. A step is shorter
        // than autovacuum's one-minute nap, so it is done here, once the warm-up has filled
        // the table (statistics survive the truncate before the next step).
        let analyze = {
            let url = self.url.clone();
            let warmup = self.args.warmup;
            tokio::spawn(async move {
                tokio::time::sleep(warmup).await;
                let db = connect(&url).await?;
                db.batch_execute(sql::EVENTS_ANALYZE.sql()).await?;
                anyhow::Ok(())
            })
        };
        let batches_before = self.batches(target).await;
        let cpu_before = self.cpu(target);
        let tally = load::run(&step, self.generator.clone()).await?;
        let cpu_after = self.cpu(target);
        let batches_after = self.batches(target).await;
        analyze
            .await?
            .context("analyze sume.events after the warm-up")?;
        target.proc.alive()?;
        let stored = self.count_events().await?;
        let memory = stack::memory(target.proc.pid()).ok();
        let row = Row {
            server: target.server,
            label: target.label.clone(),
            mode,
            connections,
            window: self.args.duration,
            cpu: match (cpu_before, cpu_after) {
                (Some(before), Some(after)) => CpuCost::per_event(
                    after.0 - before.0,
                    after.1 - before.1,
                    after.2 - before.2,
                    tally.acked_total,
                ),
                _ => None,
            },
            per_commit: match (target.server, batches_before, batches_after) {
                (Server::Baseline, _, _) => Some(1.0),
                (_, Some((s0, n0)), Some((s1, n1))) if n1 > n0 => Some((s1 - s0) / (n1 - n0)),
                _ => None,
            },
            tally,
            memory,
        };
        let l = &row.tally.latency;
        eprintln!(
            "{}/s, p50 {} ms, p99 {} ms, p99.9 {} ms, {} not 2xx; stored {} of {} acked",
            report::thousands(row.per_sec()),
            report::ms(l.quantile(0.5)),
            report::ms(l.quantile(0.99)),
            report::ms(l.quantile(0.999)),
            row.tally.not_2xx + row.tally.errors,
            stored,
            row.tally.acked_total
        );
        stored_matches_acked(&label, row.tally.acked_total, stored)?;
        Ok(row)
    }

    /// The daemon's batch-size totals, from its metrics on the admin address.
    async fn batches(&self, target: &Target) -> Option<(f64, f64)> {
        let admin = target.admin?;
        report::batch_totals(&load::get_text(admin, "/metrics").await?)
    }

    /// CPU time used so far by the server, by PostgreSQL and by this process.
    fn cpu(&self, target: &Target) -> Option<(Duration, Duration, Duration)> {
        Some((
            stack::cpu_time(target.proc.pid(), false)?,
            stack::cluster_cpu_time(self.postmaster?)?,
            stack::cpu_time(std::process::id(), false)?,
        ))
    }

    async fn ceiling(&mut self) -> anyhow::Result<ceiling::Ceiling> {
        self.empty_inbox().await?;
        eprint!(
            "sume-bench: PostgreSQL ceiling, {}-row transactions on {} connections ... ",
            self.args.ceiling_batch, self.args.ceiling_connections
        );
        let now = chrono::Utc::now().timestamp();
        let template = ceiling::template(&self.generator, self.args.ceiling_batch, now);
        let c = ceiling::measure(
            &self.url,
            template,
            self.args.ceiling_connections,
            self.args.ceiling_duration,
        )
        .await?;
        let stored = self.count_events().await?;
        eprintln!("{} rows/s", report::thousands(c.rows_per_sec()));
        stored_matches_acked("PostgreSQL ceiling", c.rows, stored)?;
        Ok(c)
    }
}

async fn connect(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, driver) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting to PostgreSQL")?;
    tokio::spawn(driver);
    Ok(client)
}

/// A binary built beside this one (same profile, same target directory).
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let path = me.with_file_name(name);
    if !path.exists() {
        bail!(
            "{} not found: build it (`cargo build --release -p sume-inbox`) or pass --daemon-bin",
            path.display()
        );
    }
    Ok(path)
}

fn append(path: &std::path::Path, section: &str) -> anyhow::Result<()> {
    use std::io::Write;
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

fn first_line_with(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(2).collect();
    // `make` exports MAKELEVEL to the commands it runs: show what the reader would type.
    if std::env::var_os("MAKELEVEL").is_some() {
        if args.is_empty() {
            "make bench".to_owned()
        } else {
            format!("make bench BENCH_ARGS=\"{}\"", args.join(" "))
        }
    } else {
        std::env::args().collect::<Vec<_>>().join(" ")
    }
}

fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

async fn context(args: &RunArgs, db: &tokio_postgres::Client) -> Context {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = first_line_with(&meminfo, "MemTotal")
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kib| format!("{:.0} GiB RAM", kib / 1024.0 / 1024.0))
        .unwrap_or_else(|| "RAM unknown".into());
    let postgres = match db.query_one(sql::SERVER_VERSION.sql(), &[]).await {
        Ok(row) => format!("PostgreSQL {}", row.get::<_, String>(0)),
        Err(_) => "PostgreSQL (version unknown)".into(),
    };
    let revision = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(rev) if git(&["diff", "--quiet", "HEAD"]).is_none() => {
            format!("{rev} + uncommitted changes")
        }
        Some(rev) => rev,
        None => "unknown".into(),
    };
    Context {
        command: command_line(),
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model: first_line_with(&cpuinfo, "model name").unwrap_or_else(|| "unknown CPU".into()),
        memory: mem_gib,
        kernel: format!(
            "Linux {}",
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
        ),
        postgres,
        revision,
        settings: stack::daemon_settings(),
        rounds: args.rounds,
        variants: args
            .variants
            .iter()
            .map(|v| {
                let mut what: Vec<String> = v.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
                if let Some(bin) = &v.bin {
                    what.insert(0, format!("binary {}", bin.display()));
                }
                format!("[{}]: {}", v.label, what.join(", "))
            })
            .collect(),
        warmup: args.warmup,
        duration: args.duration,
        note: args.note.clone(),
    }
}
