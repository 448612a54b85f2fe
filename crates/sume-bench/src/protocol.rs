//! `sume-bench protocol`: what `DB_POOLER=transaction` costs per statement. The same daemon
//! statements run on one direct connection, prepared once (the default) and unnamed at every
//! run (behind a transaction pooler), taking turns round after round; each is timed by the wall
//! clock and by the PostgreSQL backend's own CPU time (`/proc/PID/stat`, which the rest of the
//! machine disturbs less than it disturbs the wall clock). The pooler's own hop is not part of
//! it: that is the fleet benchmark's.

use std::time::{Duration, Instant};

use clap::Args;
use sume_inbox::db::{NewEvent, Store};

use crate::stack::cpu_time;

/// The flags of `sume-bench protocol`.
#[derive(Debug, Clone, Args)]
pub struct ProtocolArgs {
    /// The server to measure on (a database is created there and dropped afterwards).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Statements per workload, protocol and round.
    #[arg(long, default_value_t = 5000)]
    pub statements: usize,
    /// Rounds, the protocols taking turns; the median round is reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

/// One workload: a name and one run of it on a store (`i` makes each run's rows new).
type Workload = (&'static str, fn(&Store, usize) -> BoxedRun<'_>);
type BoxedRun<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + 'a>>;

fn event(i: usize, j: usize) -> NewEvent {
    let job_id = format!("job_{i}_{j}");
    NewEvent {
        event_id: format!("{job_id}/job.completed"),
        header_event_id: None,
        job_id,
        event_type: Some("job.completed".into()),
        status: Some("completed".into()),
        result: Some(r#"{"url":"https://cdn.example/x.png"}"#.into()),
        body: bytes::Bytes::from_static(br#"{"event":"job.completed"}"#),
        signed_at: 1_700_000_000,
        signature: "v1=00".into(),
    }
}

fn insert(store: &Store, batch: usize, i: usize) -> BoxedRun<'_> {
    Box::pin(async move {
        let events: Vec<NewEvent> = (0..batch).map(|j| event(i, j)).collect();
        store.write_inbox_batch(&events, &[]).await?;
        Ok(())
    })
}

const WORKLOADS: [Workload; 3] = [
    (
        "catch-up scan, empty inbox (events_attachable_scan)",
        |s, _| {
            Box::pin(async move {
                s.events_attachable_scan(512).await?;
                Ok(())
            })
        },
    ),
    ("ingest, 1 event (events_insert)", |s, i| insert(s, 1, i)),
    ("ingest, 32 events (events_insert)", |s, i| insert(s, 32, i)),
];

/// Wall time and backend CPU time per statement, in microseconds.
#[derive(Debug, Clone, Copy, Default)]
struct PerStatement {
    wall_us: f64,
    server_cpu_us: f64,
}

async fn measure(
    store: &Store,
    work: &Workload,
    n: usize,
    offset: usize,
) -> anyhow::Result<PerStatement> {
    let pid: i32 = store
        .pool()
        .get()
        .await?
        .query_one("select pg_backend_pid()", &[])
        .await?
        .get(0);
    for i in 0..n / 20 {
        (work.1)(store, offset + i).await?; // warm-up: caches, the first prepare
    }
    let cpu = || cpu_time(pid as u32, false).unwrap_or_default();
    let (cpu0, t0) = (cpu(), Instant::now());
    for i in 0..n {
        (work.1)(store, offset + n + i).await?;
    }
    let (wall, server) = (t0.elapsed(), cpu().saturating_sub(cpu0));
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    Ok(PerStatement {
        wall_us: per(wall),
        server_cpu_us: per(server),
    })
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Runs every workload under both protocols and prints the table (markdown).
pub async fn run(args: ProtocolArgs) -> anyhow::Result<()> {
    let name = format!("protocol_bench_{}", std::process::id());
    let (admin, conn) = tokio_postgres::connect(&args.database_url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    admin
        .batch_execute(&format!("create database {name}"))
        .await?;
    let url = with_dbname(&args.database_url, &name);
    let result = measure_all(&url, &args).await;
    admin
        .batch_execute(&format!("drop database {name}"))
        .await?;
    let rows = result?;
    println!("| statement | prepared: wall µs | unnamed: wall µs | prepared: server CPU µs | unnamed: server CPU µs |");
    println!("|---|---:|---:|---:|---:|");
    for (name, prepared, unnamed) in rows {
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} |",
            prepared.wall_us, unnamed.wall_us, prepared.server_cpu_us, unnamed.server_cpu_us
        );
    }
    println!(
        "\n{} statements per workload, protocol and round; median of {} rounds, one connection.",
        args.statements, args.rounds
    );
    Ok(())
}

type Row = (&'static str, PerStatement, PerStatement);

async fn measure_all(url: &str, args: &ProtocolArgs) -> anyhow::Result<Vec<Row>> {
    sume_inbox::db::migrate::migrate(&mut sume_inbox::db::connect(url).await?).await?;
    let mut rows = Vec::new();
    let n = args.statements.max(20);
    for (w, work) in WORKLOADS.iter().enumerate() {
        let mut runs: [Vec<PerStatement>; 2] = [Vec::new(), Vec::new()];
        for round in 0..args.rounds.max(1) {
            for (p, runs) in runs.iter_mut().enumerate() {
                let store = Store::new(url, 1)?;
                let store = if p == 1 {
                    store.behind_pooler(None)
                } else {
                    store
                };
                let offset = ((w * 10 + round) * 2 + p) * 2 * n;
                runs.push(measure(&store, work, n, offset).await?);
            }
        }
        let pick = |runs: &[PerStatement]| PerStatement {
            wall_us: median(runs.iter().map(|r| r.wall_us).collect()),
            server_cpu_us: median(runs.iter().map(|r| r.server_cpu_us).collect()),
        };
        rows.push((work.0, pick(&runs[0]), pick(&runs[1])));
    }
    Ok(rows)
}

/// Replaces the database name in a URL.
fn with_dbname(url: &str, name: &str) -> String {
    let (base, query) = match url.find('?') {
        Some(i) => (&url[..i], &url[i..]),
        None => (url, ""),
    };
    let head = match base.rfind('/') {
        Some(i) if i > base.find("://").map_or(0, |j| j + 2) => &base[..i],
        _ => base,
    };
    format!("{head}/{name}{query}")
}
