//! One configuration of the fleet benchmark: its instances started, loaded together while
//! PostgreSQL's backends are sampled, checked, and stopped.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context as _};
use tokio::sync::watch;

use super::bouncer::{self, server_connections};
use super::report::{FleetRow, Samples};
use super::{Fleet, Route};
use crate::check::stored_matches_acked;
use crate::load::{self, Mode, Step};
use crate::run::setup::connect;
use crate::sql;
use crate::stack::{self, Proc};

/// CPU time so far of the instances (summed), PostgreSQL, PgBouncer and this process.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    daemons: Duration,
    postgres: Duration,
    bouncer: Duration,
    load: Duration,
}

impl Fleet {
    /// One step: `n` instances on `route`, from an empty inbox to the data check.
    pub(super) async fn step(&mut self, route: Route, n: usize) -> anyhow::Result<FleetRow> {
        let label = format!("{} x{n}", route.label());
        self.db.batch_execute(sql::EVENTS_TRUNCATE.sql()).await?;
        self.db.batch_execute(sql::SERVER_CHECKPOINT.sql()).await?;
        // Directly, the instances' backends are those opened from now on; through PgBouncer,
        // its server connections, whenever it opened them.
        let since: String = match route {
            Route::Direct => self.db.query_one(sql::SERVER_NOW.sql(), &[]).await?.get(0),
            Route::Bouncer => "-infinity".to_owned(),
        };
        let mut daemons = self.start_instances(route, n).await?;
        eprint!(
            "sume-bench: fleet {label}, {} conns ... ",
            self.args.connections
        );
        let addrs: Vec<SocketAddr> = daemons.iter().map(|(_, a)| *a).collect();
        let step = Step {
            addr: addrs[0],
            connections: self.args.connections,
            mode: Mode::Closed,
            warmup: self.args.warmup,
            duration: self.args.duration,
        };
        let (stop_sampling, stopped) = watch::channel(false);
        let sampler = tokio::spawn(sample(
            self.pg_url.clone(),
            since,
            self.bouncer_admin(route).await?,
            self.args.warmup,
            self.args.sample_every,
            stopped,
        ));
        let analyze = analyze_after(self.pg_url.clone(), self.args.warmup);
        let before = self.cpu(&daemons);
        let tally = load::run_spread(&step, &addrs, self.generator.clone()).await?;
        let after = self.cpu(&daemons);
        let _ = stop_sampling.send(true);
        let samples = sampler.await??;
        analyze.await??;
        for (proc, _) in &mut daemons {
            proc.alive()?;
        }
        for (proc, _) in &mut daemons {
            proc.stop(Duration::from_secs(20));
        }
        let stored: i64 = self
            .db
            .query_one(sql::EVENTS_COUNT.sql(), &[])
            .await?
            .get(0);
        let row = FleetRow::new(
            route,
            n,
            self.args.duration,
            tally,
            samples,
            cpu_per_event(before, after),
        );
        eprintln!("{}", row.progress(stored as u64));
        stored_matches_acked(&label, row.tally.acked_total, stored as u64)?;
        Ok(row)
    }

    /// Starts `n` instances on `route`, each on its own ports, and waits until all are ready.
    async fn start_instances(
        &self,
        route: Route,
        n: usize,
    ) -> anyhow::Result<Vec<(Proc, SocketAddr)>> {
        let (url, overrides) = match (route, &self.bouncer) {
            (Route::Direct, _) => (self.pg_url.clone(), Vec::new()),
            (Route::Bouncer, Some(b)) => (
                b.url.clone(),
                vec![("DB_POOLER".to_owned(), "transaction".to_owned())],
            ),
            (Route::Bouncer, None) => bail!("no PgBouncer in this run"),
        };
        let mut daemons = Vec::with_capacity(n);
        for i in 0..n {
            let listen = stack::free_port()?;
            let admin = stack::free_port()?;
            let log = self
                .work_dir
                .join(format!("daemon-{}-{i}.log", route.label().to_lowercase()));
            let proc = stack::spawn_daemon(
                &self.daemon_bin,
                &url,
                &self.secret,
                listen,
                admin,
                &overrides,
                &log,
            )?;
            daemons.push((proc, listen));
        }
        for (i, (proc, listen)) in daemons.iter_mut().enumerate() {
            if !load::wait_ready(*listen, "/readyz", Duration::from_secs(60)).await {
                proc.alive()?;
                bail!(
                    "instance {i} is not ready after 60 s; see its log in {}",
                    self.work_dir.display()
                );
            }
        }
        Ok(daemons)
    }

    async fn bouncer_admin(&self, route: Route) -> anyhow::Result<Option<tokio_postgres::Client>> {
        match (route, &self.bouncer) {
            (Route::Bouncer, Some(b)) => Ok(Some(b.admin().await?)),
            _ => Ok(None),
        }
    }

    fn cpu(&self, daemons: &[(Proc, SocketAddr)]) -> Option<Cpu> {
        let mut sum = Duration::ZERO;
        for (proc, _) in daemons {
            sum += stack::cpu_time(proc.pid(), false)?;
        }
        Some(Cpu {
            daemons: sum,
            postgres: stack::cluster_cpu_time(self.postmaster?)?,
            bouncer: match self.bouncer.as_ref().and_then(bouncer::Bouncer::pid) {
                Some(pid) => stack::cpu_time(pid, false).unwrap_or_default(),
                None => Duration::ZERO,
            },
            load: stack::cpu_time(std::process::id(), false)?,
        })
    }
}

/// CPU time per acknowledged event between two readings, in microseconds: instances (summed),
/// PostgreSQL, PgBouncer, load generator. Filled in by [`FleetRow::new`] once events are known.
type CpuDelta = Option<[Duration; 4]>;

fn cpu_per_event(before: Option<Cpu>, after: Option<Cpu>) -> CpuDelta {
    let (b, a) = (before?, after?);
    Some([
        a.daemons.saturating_sub(b.daemons),
        a.postgres.saturating_sub(b.postgres),
        a.bouncer.saturating_sub(b.bouncer),
        a.load.saturating_sub(b.load),
    ])
}

/// `ANALYZE sume.events` once the warm-up has filled it, as `sume-bench run` does.
fn analyze_after(url: String, warmup: Duration) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    tokio::spawn(async move {
        tokio::time::sleep(warmup).await;
        let db = connect(&url).await?;
        db.batch_execute(sql::EVENTS_ANALYZE.sql())
            .await
            .context("analyze sume.events after the warm-up")?;
        anyhow::Ok(())
    })
}

/// Samples PostgreSQL's client backends (and PgBouncer's server connections) every `every`
/// from the end of the warm-up until told to stop.
async fn sample(
    url: String,
    since: String,
    bouncer_admin: Option<tokio_postgres::Client>,
    warmup: Duration,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Samples> {
    let db = connect(&url).await?;
    db.batch_execute(sql::SERVER_MARK_OWN_CONNECTION.sql())
        .await?;
    let mut samples = Samples::default();
    tokio::select! {
        _ = tokio::time::sleep(warmup) => {}
        _ = stop.changed() => return Ok(samples),
    }
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.changed() => return Ok(samples),
        }
        let row = db.query_one(sql::SERVER_BACKENDS.sql(), &[&since]).await?;
        let servers = match &bouncer_admin {
            Some(admin) => Some(server_connections(admin).await?),
            None => None,
        };
        samples.push(
            row.get::<_, i64>(0) as u64,
            row.get::<_, i64>(1) as u64,
            servers,
        );
    }
}
