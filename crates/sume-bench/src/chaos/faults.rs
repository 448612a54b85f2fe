//! The fault scenarios: signed load on one daemon process while something breaks, then the
//! count that decides them: every delivery answered 2xx must be in the inbox.
//!
//! Each round of a scenario has a database of its own and a daemon of its own. The load runs
//! until a third of `--size` deliveries are acknowledged, the fault happens, the scenario
//! waits for a 2xx of a delivery sent after the fault ended, and the load runs on until
//! `--size` are acknowledged. Then the answers are compared with the rows.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rand::Rng;
use sume_wire::Secret;

use crate::sql;
use crate::webhook::Generator;

use super::args::{ChaosArgs, Scenario};
use super::ground::Ground;
use super::traffic::{Answers, Traffic};
use super::world::{self, Daemon, World};

/// What one round of a fault scenario showed.
#[derive(Debug, Clone)]
pub struct FaultRun {
    /// Which fault.
    pub scenario: Scenario,
    /// The round, from 1.
    pub round: u32,
    /// Deliveries answered 2xx.
    pub acked: u64,
    /// Of those, how many are in the inbox.
    pub stored: u64,
    /// Acknowledged but not in the inbox: must be 0.
    pub lost: u64,
    /// Deliveries in the inbox that were never answered 2xx (committed, then the answer was
    /// lost to the fault or came as a 503 after a commit that outlived `INGEST_TIMEOUT`).
    pub stored_unacked: u64,
    /// Attempts answered other than 2xx (503 during the fault).
    pub not_2xx: u64,
    /// Attempts with no answer (refused, reset).
    pub no_answer: u64,
    /// From the end of each fault (the kill, the cut, the lock's release, the database's
    /// return) to the first 2xx of a delivery sent after it.
    pub recoveries: Vec<Duration>,
    /// How long each fault lasted: from the kill, cut or lock to the restart, the cut's
    /// return, the lock's release or the database's return.
    pub durations: Vec<Duration>,
    /// The longest stretch without any 2xx around each fault.
    pub silences: Vec<Duration>,
    /// Connections the cut ended (terminate only).
    pub cut: i64,
    /// The daemon process still ran at the end (after a kill: the restarted one).
    pub survived: bool,
    /// Its `/healthz` answered 200 at the end: none of its tasks had died.
    pub healthy: bool,
    /// What this scenario measures beside the counts (medians over rounds in the report).
    pub figures: Vec<Figure>,
    /// What this scenario found wrong beside a loss (empty when it held).
    pub checks: Vec<String>,
    /// Whether acknowledged deliveries may be missing by design (a failover to an
    /// asynchronous standby): then `lost` is a figure, not a failure.
    pub loss_expected: bool,
}

/// One measurement of a round, by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// What it is, as the report prints it.
    pub name: &'static str,
    /// Its value, in `unit`.
    pub value: f64,
    /// Milliseconds or a count.
    pub unit: Unit,
}

/// The unit of a [`Figure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A duration in milliseconds.
    Ms,
    /// A count, or a rate.
    Count,
}

impl Figure {
    /// A duration.
    pub fn ms(name: &'static str, d: Duration) -> Figure {
        Figure {
            name,
            value: d.as_secs_f64() * 1e3,
            unit: Unit::Ms,
        }
    }

    /// A count.
    pub fn count(name: &'static str, n: f64) -> Figure {
        Figure {
            name,
            value: n,
            unit: Unit::Count,
        }
    }
}

impl FaultRun {
    /// What is wrong with this round, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let name = format!("{} round {}", self.scenario.name(), self.round);
        if self.lost > 0 && !self.loss_expected {
            out.push(format!(
                "{name}: {} of {} deliveries answered 2xx are not in the inbox",
                self.lost, self.acked
            ));
        }
        if !self.survived {
            out.push(format!("{name}: the daemon process exited"));
        }
        if !self.healthy {
            out.push(format!("{name}: /healthz is not 200 after the fault"));
        }
        out.extend(self.checks.iter().map(|c| format!("{name}: {c}")));
        out
    }
}

/// Where one fault started and ended, on the traffic's clock.
pub(super) struct Mark {
    pub(super) fault_us: u64,
    pub(super) back_us: u64,
}

/// One round of a fault scenario.
pub(super) async fn run(
    world: &World,
    args: &ChaosArgs,
    scenario: Scenario,
    round: u32,
) -> anyhow::Result<FaultRun> {
    let db_name = format!(
        "chaos_{}_{}",
        scenario.name().replace('-', "_"),
        round_letter(round)
    );
    let mut ground = Ground::prepare(world, args, scenario, &db_name).await?;
    let url = ground.read_url.clone();
    let settings = [(
        "INGEST_TIMEOUT",
        humantime::format_duration(args.ingest_timeout).to_string(),
    )];
    let mut daemon = world.daemon(&ground.daemon_url, &db_name, &settings)?;
    daemon.wait_ready(args.patience).await?;
    eprint!("sume-bench chaos: {} round {round} ... ", scenario.name());
    let run_id = format!("{:06x}", rand::thread_rng().gen::<u32>() & 0xff_ffff);
    let generator = Arc::new(Generator::new(Secret::new(world.secret.clone()), run_id));
    let traffic = Traffic::start(daemon.listen, generator, args.connections);
    traffic.wait_acked(args.size / 3, args.patience).await?;
    let (marks, cut) = fault(world, args, scenario, &mut daemon, &traffic, &mut ground).await?;
    traffic.wait_acked(args.size, args.patience).await?;
    let answers = traffic.finish().await;
    let survived = daemon.alive().is_ok();
    let healthy = daemon.healthy().await;
    daemon.stop();
    let stored_ids = received_ids(&url).await?;
    let mut outcome = count(Ended {
        scenario,
        round,
        answers: &answers,
        stored_ids: &stored_ids,
        marks: &marks,
        cut,
        survived,
        healthy,
    });
    outcome.figures = std::mem::take(&mut ground.figures);
    if let Some(slowest) = slowest_refusal(&answers, &marks) {
        outcome.figures.push(Figure::ms(
            "slowest answer other than 2xx during the fault",
            slowest,
        ));
    }
    drop(ground);
    eprintln!(
        "{} acked, {} lost, recovery {}",
        outcome.acked,
        outcome.lost,
        outcome
            .recoveries
            .iter()
            .map(|d| format!("{:.0} ms", d.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(outcome)
}

/// Does the fault (twice for a kill), waiting after each for 2xx to resume.
async fn fault(
    world: &World,
    args: &ChaosArgs,
    scenario: Scenario,
    daemon: &mut Daemon,
    traffic: &Traffic,
    ground: &mut Ground,
) -> anyhow::Result<(Vec<Mark>, i64)> {
    let url = ground.read_url.clone();
    let mut marks = Vec::new();
    let mut cut = 0;
    let times = if scenario == Scenario::Kill { 2 } else { 1 };
    for i in 0..times {
        if i > 0 {
            // Load between the two kills, from the restarted process.
            let more = traffic.acked() + args.size / 6;
            traffic.wait_acked(more, args.patience).await?;
        }
        let fault_us = traffic.now_us();
        match scenario {
            Scenario::Kill => daemon.kill_and_restart()?,
            Scenario::Terminate => {
                cut =
                    world::terminate_backends(&world.server_url, world::database_name(&url)).await?
            }
            Scenario::Lock => {
                let hold = args.ingest_timeout * 2 + Duration::from_millis(500);
                world::lock_inbox(&url, hold).await?
            }
            Scenario::Crash => {
                world.crash().await?;
                tokio::time::sleep(args.pg_down).await;
                world.recover().await?;
            }
            other => ground.fault(args, other).await?,
        }
        let back_us = traffic.now_us();
        traffic
            .wait_ok_sent_after(back_us, args.patience)
            .await
            .with_context(|| {
                format!(
                    "after the {} (see {})",
                    scenario.name(),
                    daemon.log().display()
                )
            })?;
        marks.push(Mark { fault_us, back_us });
    }
    Ok((marks, cut))
}

/// What a fault round ended with, to be counted.
pub(super) struct Ended<'a> {
    pub scenario: Scenario,
    pub round: u32,
    pub answers: &'a Answers,
    pub stored_ids: &'a HashSet<String>,
    pub marks: &'a [Mark],
    /// Connections cut by the fault.
    pub cut: i64,
    /// The daemon was still running at the end.
    pub survived: bool,
    /// The daemon answered `/readyz` at the end.
    pub healthy: bool,
}

/// Counts what a round acknowledged, stored and lost, and how soon 2xx came back.
pub(super) fn count(ended: Ended<'_>) -> FaultRun {
    let Ended {
        scenario,
        round,
        answers,
        stored_ids,
        marks,
        cut,
        survived,
        healthy,
    } = ended;
    let acked: Vec<&str> = answers.acked_ids().collect();
    let stored = acked.iter().filter(|id| stored_ids.contains(**id)).count() as u64;
    let acked_set: HashSet<&str> = acked.iter().copied().collect();
    let stored_unacked = stored_ids
        .iter()
        .filter(|id| !acked_set.contains(id.as_str()))
        .count() as u64;
    let (not_2xx, no_answer) = answers.failures();
    FaultRun {
        scenario,
        round,
        acked: acked.len() as u64,
        stored,
        lost: acked.len() as u64 - stored,
        stored_unacked,
        not_2xx,
        no_answer,
        recoveries: marks
            .iter()
            .filter_map(|m| answers.recovery(m.back_us))
            .collect(),
        durations: marks
            .iter()
            .map(|m| Duration::from_micros(m.back_us - m.fault_us))
            .collect(),
        silences: marks
            .iter()
            .filter_map(|m| answers.silence(m.fault_us, m.back_us))
            .collect(),
        cut,
        survived,
        healthy,
        figures: Vec::new(),
        checks: Vec::new(),
        loss_expected: false,
    }
}

/// The longest time an attempt sent during a fault took to be answered other than 2xx: the
/// daemon's own bound on a fault it cannot see past (`INGEST_TIMEOUT`).
pub(super) fn slowest_refusal(answers: &Answers, marks: &[Mark]) -> Option<Duration> {
    answers
        .0
        .iter()
        .filter(|a| a.status.is_some() && !a.ok())
        .filter(|a| {
            marks
                .iter()
                .any(|m| a.sent_us >= m.fault_us && a.sent_us < m.back_us)
        })
        .map(|a| Duration::from_micros(a.answered_us - a.sent_us))
        .max()
}

/// Every delivery id the inbox holds (events and dead letters).
pub(super) async fn received_ids(url: &str) -> anyhow::Result<HashSet<String>> {
    let db = crate::stages::client(url).await?;
    let rows = db
        .query(sql::EVENTS_RECEIVED_IDS.sql(), &[])
        .await
        .context("reading the inbox")?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Database names take letters only: round 1 is `a`.
pub(super) fn round_letter(round: u32) -> char {
    (b'a' + (round.saturating_sub(1) % 26) as u8) as char
}
