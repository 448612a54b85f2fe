//! The database's own faults as an HA setup meets them: a primary and a hot standby
//! ([`pair`]), the daemon on a multi-host URL with `target_session_attrs=read-write`, signed
//! load, and the simulator with an application creating and registering jobs ([`app`]).
//!
//! - `failover`: synchronous replication; the primary crashes (`pg_ctl stop -m immediate`)
//!   and the standby is promoted at once: nothing acknowledged may be missing on the new
//!   primary, and attach and the sweep must close jobs there (every job Sume ended, closed in
//!   Sume's state);
//! - `failover-silent`: the same, but the primary's port goes silent (every packet dropped,
//!   the server still running) instead of crashing: connections end by `tcp_user_timeout` and
//!   keepalives, new ones by `connect_timeout` on the first host of the URL;
//! - `failover-async`: asynchronous replication, the standby's link frozen `--replica-lag`
//!   before the crash: what is missing is counted, then `sume-inbox reconcile` runs as README
//!   says and every job Sume ended must be closed in Sume's state;
//! - `split-brain`: after a failover the old primary comes back writable (nothing fences it)
//!   and the daemon's connections are cut once: where the writes go is counted;
//! - `failback`: after a failover the old primary is rebuilt as the new one's synchronous
//!   standby, and the roles are switched back (clean stop, promotion) under the same load.
//!
//! `sume_hole` is the black hole between the daemon and Sume, `cost` what synchronous
//! replication costs per event.

mod app;
pub(super) mod cost;
mod pair;
mod reconcile;
mod settle;
pub(super) mod sume_hole;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use sume_wire::Secret;
use tokio::time::Instant;

use crate::sql;
use crate::webhook::Generator;

use super::args::{ChaosArgs, Scenario};
use super::faults::{self, FaultRun, Figure, Mark};
use super::ground::with_params;
use super::proxy::{Nft, Proxy};
use super::traffic::Traffic;
use super::world::{self, World};
use app::App;
use pair::{Pair, DATABASE};

/// What a failover round holds while it runs.
struct Round<'a> {
    world: &'a World,
    args: &'a ChaosArgs,
    scenario: Scenario,
    pair: Pair,
    /// The silent primary's black hole (failover-silent), lifted when the round ends.
    silence: Option<Nft>,
    figures: Vec<Figure>,
    checks: Vec<String>,
}

/// One round of `failover`, `failover-async`, `split-brain` or `failback`.
pub(super) async fn run(
    world: &World,
    args: &ChaosArgs,
    scenario: Scenario,
    round: u32,
) -> anyhow::Result<FaultRun> {
    // A split brain needs an old primary that takes writes on its own: one that waited for a
    // synchronous standby would hold every commit instead (see docs/reliability.md).
    let sync = !matches!(scenario, Scenario::FailoverAsync | Scenario::SplitBrain);
    let name = format!("{}-{}", scenario.name(), faults::round_letter(round));
    let pair = Pair::start(&args.devpg, &world.work_dir, &name, sync, args.patience).await?;
    let sim = app::start_sim(&world.secret).await?;
    // The sweep closes jobs whose webhook never comes, except where reconcile is what is
    // measured.
    let poll = scenario != Scenario::FailoverAsync;
    let mut settings = vec![(
        "INGEST_TIMEOUT",
        humantime::format_duration(args.ingest_timeout).to_string(),
    )];
    settings.extend(app::sume_settings(&sim, args.sume_timeout, poll));
    let url = with_params(&pair.url(), &args.db_url_params);
    let mut daemon = world.daemon(&url, &name, &settings)?;
    daemon.wait_ready(args.patience).await?;
    eprint!("sume-bench chaos: {name} ... ");
    let run_id = format!("{:06x}", rand::thread_rng().gen::<u32>() & 0xff_ffff);
    let generator = Arc::new(Generator::new(Secret::new(world.secret.clone()), run_id));
    let traffic = Traffic::start(daemon.listen, generator, args.connections);
    let every = Duration::from_millis(20);
    let app = App::start(
        sim.api_url(),
        daemon.listen,
        pair.url(),
        every,
        poll.then_some(4),
    );
    traffic.wait_acked(args.size / 3, args.patience).await?;
    let mut r = Round {
        world,
        args,
        scenario,
        pair,
        silence: None,
        figures: Vec::new(),
        checks: Vec::new(),
    };
    let (marks, promoted_at) = r.faults(&traffic).await?;
    traffic.wait_acked(args.size, args.patience).await?;
    let answers = traffic.finish().await;
    let (_, registered) = app.finish().await;
    let survived = daemon.alive().is_ok();
    let healthy = daemon.healthy().await;
    if scenario == Scenario::SplitBrain {
        // The fenced old primary is started once more, the daemon gone, to read what it holds.
        daemon.stop();
        r.pair.start_node(r.pair.standby()).await?;
    }
    let stored = r.stored(&answers).await?;
    match scenario {
        Scenario::FailoverAsync => r.reconciled(&sim, &registered).await?,
        Scenario::SplitBrain => {}
        _ => r.settled(&sim, &promoted_at).await?,
    }
    daemon.stop();
    let mut outcome = faults::count(faults::Ended {
        scenario,
        round,
        answers: &answers,
        stored_ids: &stored,
        marks: &marks,
        cut: 0,
        survived,
        healthy,
    });
    outcome.figures = r.figures;
    outcome.checks = r.checks;
    outcome.loss_expected = scenario == Scenario::FailoverAsync;
    eprintln!("{} acked, {} missing", outcome.acked, outcome.lost);
    Ok(outcome)
}

impl Round<'_> {
    /// The failover, and for split-brain and failback what follows it; answers the marks and
    /// the new primary's clock at the promotion.
    async fn faults(&mut self, traffic: &Traffic) -> anyhow::Result<(Vec<Mark>, String)> {
        let mut marks = vec![self.fail_over(traffic).await?];
        let promoted_at = self.server_now().await?;
        match self.scenario {
            Scenario::SplitBrain => marks.extend(self.split_brain(traffic).await?),
            Scenario::Failback => marks.push(self.fail_back(traffic).await?),
            _ => {}
        }
        Ok((marks, promoted_at))
    }

    /// Crashes the primary (after freezing the standby's link for `--replica-lag`, when
    /// asynchronous) and promotes the standby; returns once a 2xx follows.
    async fn fail_over(&mut self, traffic: &Traffic) -> anyhow::Result<Mark> {
        let lag = self.lag_link().await?;
        let fault_us = traffic.now_us();
        let crashed = Instant::now();
        if self.scenario == Scenario::FailoverSilent {
            self.silence = Some(Nft::drop_port(self.pair.ports[self.pair.primary])?);
        } else {
            self.pair.crash(self.pair.primary).await?;
        }
        self.pair.promote().await?;
        self.figures.push(Figure::ms(
            "from the crash (or the silence) to the standby promoted",
            crashed.elapsed(),
        ));
        let back_us = traffic.now_us();
        traffic
            .wait_ok_sent_after(back_us, self.args.patience)
            .await?;
        drop(lag);
        Ok(Mark { fault_us, back_us })
    }

    /// For `failover-async` with a lag: the standby replicates through a proxy, frozen
    /// `--replica-lag` before the crash.
    async fn lag_link(&mut self) -> anyhow::Result<Option<Proxy>> {
        if self.scenario != Scenario::FailoverAsync || self.args.replica_lag.is_zero() {
            return Ok(None);
        }
        let primary = ([127, 0, 0, 1], self.pair.ports[self.pair.primary]).into();
        let proxy = Proxy::start(primary).await?;
        let (host, port) = (proxy.addr.ip().to_string(), proxy.addr.port());
        self.pair.replicate_through(&host, port).await?;
        self.pair
            .wait_receiving_from(port, self.args.patience)
            .await?;
        // Caught up through the proxy before it freezes.
        tokio::time::sleep(Duration::from_millis(200)).await;
        proxy.freeze();
        tokio::time::sleep(self.args.replica_lag).await;
        Ok(Some(proxy))
    }

    /// The old primary started again as it was (a second writable primary), and the daemon's
    /// connections to the new one cut once (as a network blip would): new connections go to
    /// the first writable host of the URL. Then the old primary is fenced (stopped at once), as
    /// the HA layer should have done, and the writes come back to the new one.
    async fn split_brain(&mut self, traffic: &Traffic) -> anyhow::Result<Vec<Mark>> {
        let old = self.pair.standby();
        let fault_us = traffic.now_us();
        self.pair.start_node(old).await?;
        let new_server = self.pair.node_url(self.pair.primary, "postgres");
        world::terminate_backends(&new_server, DATABASE).await?;
        let back_us = traffic.now_us();
        traffic
            .wait_ok_sent_after(back_us, self.args.patience)
            .await?;
        let split = Mark { fault_us, back_us };
        traffic
            .wait_acked(traffic.acked() + self.args.size / 6, self.args.patience)
            .await?;
        let fault_us = traffic.now_us();
        self.pair.crash(old).await?;
        let back_us = traffic.now_us();
        traffic
            .wait_ok_sent_after(back_us, self.args.patience)
            .await?;
        Ok(vec![split, Mark { fault_us, back_us }])
    }

    /// The old primary rebuilt as a synchronous standby of the new one, then the roles
    /// switched back: a clean stop of the new primary (its WAL reaches the standby), and the
    /// standby promoted.
    async fn fail_back(&mut self, traffic: &Traffic) -> anyhow::Result<Mark> {
        let rebuilt = Instant::now();
        self.pair.rebuild_as_standby(self.pair.standby()).await?;
        self.pair.set_sync(true).await?;
        self.pair.wait_standby(true, self.args.patience).await?;
        self.figures.push(Figure::ms(
            "to rebuild the old primary as a synchronous standby (base backup under load)",
            rebuilt.elapsed(),
        ));
        let fault_us = traffic.now_us();
        self.pair.stop(self.pair.primary).await?;
        self.pair.promote().await?;
        let back_us = traffic.now_us();
        traffic
            .wait_ok_sent_after(back_us, self.args.patience)
            .await?;
        Ok(Mark { fault_us, back_us })
    }

    async fn server_now(&self) -> anyhow::Result<String> {
        let db = crate::stages::client(&self.pair.node_url(self.pair.primary, DATABASE)).await?;
        Ok(db.query_one(sql::SERVER_NOW.sql(), &[]).await?.get(0))
    }

    /// The delivery ids stored where the writes went: the primary, or for split-brain both
    /// nodes (with where the acknowledged ones are as figures).
    async fn stored(
        &mut self,
        answers: &super::traffic::Answers,
    ) -> anyhow::Result<HashSet<String>> {
        let read = |node: usize| {
            let url = self.pair.node_url(node, DATABASE);
            async move { faults::received_ids(&url).await }
        };
        let primary = read(self.pair.primary).await?;
        if self.scenario != Scenario::SplitBrain {
            return Ok(primary);
        }
        let old = read(self.pair.standby()).await?;
        let acked: Vec<&str> = answers.acked_ids().collect();
        let only = |a: &HashSet<String>, b: &HashSet<String>| {
            acked
                .iter()
                .filter(|id| a.contains(**id) && !b.contains(**id))
                .count() as f64
        };
        self.figures.extend([
            Figure::count(
                "acknowledged, on the old primary only",
                only(&old, &primary),
            ),
            Figure::count(
                "acknowledged, on the new primary only",
                only(&primary, &old),
            ),
        ]);
        Ok(primary.union(&old).cloned().collect())
    }
}
