//! A black hole between the daemon and Sume: the daemon's `SUME_API_URL` goes through a
//! [`Proxy`] before the simulator, and the proxy freezes (connections accepted, nothing ever
//! answered) for three `SUME_TIMEOUT`s and a second, while signed load goes on and the
//! application keeps registering jobs whose webhooks the simulator drops (only the sweep's
//! poll closes them).
//!
//! Every status call begun and ended meanwhile must be a timeout at `SUME_TIMEOUT` (its
//! recorded answer and time in `sume.job_polls`: no verdict from silence), every call must have
//! been taken from the read budget (`sume.rate_buckets`), ingest must not stop, and the sweep
//! must close jobs again after the thaw. Jobs closed meanwhile are counted, not judged: a
//! pass commits closes from answers it read before the freeze.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use sume_wire::Secret;
use tokio::time::Instant;

use crate::sql;
use crate::webhook::Generator;

use super::app::{self, App, KEY_NAME};
use crate::chaos::args::{ChaosArgs, Scenario};
use crate::chaos::faults::{self, FaultRun, Figure, Mark};
use crate::chaos::ground::with_params;
use crate::chaos::proxy::Proxy;
use crate::chaos::traffic::Traffic;
use crate::chaos::world::World;

/// One round.
pub(in crate::chaos) async fn run(
    world: &World,
    args: &ChaosArgs,
    round: u32,
) -> anyhow::Result<FaultRun> {
    let name = format!("chaos_sume_black_hole_{}", faults::round_letter(round));
    let url = world.database(&name).await?;
    let sim = app::start_sim(&world.secret).await?;
    let proxy = Proxy::start(sim.addr).await?;
    let settings = settings(args, &sim, &proxy);
    let mut daemon = world.daemon(&with_params(&url, &args.db_url_params), &name, &settings)?;
    daemon.wait_ready(args.patience).await?;
    eprint!("sume-bench chaos: sume-black-hole round {round} ... ");
    let run_id = format!("{:06x}", rand::thread_rng().gen::<u32>() & 0xff_ffff);
    let generator = Arc::new(Generator::new(Secret::new(world.secret.clone()), run_id));
    let traffic = Traffic::start(daemon.listen, generator, args.connections);
    let every = Duration::from_millis(50);
    let app = App::start(sim.api_url(), daemon.listen, url.clone(), every, Some(1));
    traffic.wait_acked(args.size / 3, args.patience).await?;
    let db = crate::stages::client(&url).await?;
    wait_polled_closes(&db, args.patience, 1).await?;

    let used_before = day_used(&db).await?;
    let from = now(&db).await?;
    let fault_us = traffic.now_us();
    proxy.freeze();
    tokio::time::sleep(args.sume_timeout * 3 + Duration::from_secs(1)).await;
    let to = now(&db).await?;
    let used_during = day_used(&db).await? - used_before;
    proxy.thaw();
    let back_us = traffic.now_us();
    let mut figures = Vec::new();
    let thawed = Instant::now();
    let closed_before = polled_closes(&db).await?;
    let closed_again = wait_polled_closes(&db, args.patience, closed_before + 1).await;
    if closed_again.is_ok() {
        figures.push(Figure::ms(
            "from the thaw to the next job closed by a poll",
            thawed.elapsed(),
        ));
    }
    let window = (from.as_str(), to.as_str(), args.sume_timeout);
    let mut checks = during(&db, window, used_during, &mut figures).await?;
    if let Err(e) = closed_again {
        checks.push(format!("the sweep closed nothing after the thaw: {e:#}"));
    }
    traffic.wait_ok_sent_after(back_us, args.patience).await?;
    traffic.wait_acked(args.size, args.patience).await?;
    let answers = traffic.finish().await;
    let _ = app.finish().await;
    let survived = daemon.alive().is_ok();
    let healthy = daemon.healthy().await;
    daemon.stop();
    let stored = faults::received_ids(&url).await?;
    let marks = [Mark { fault_us, back_us }];
    let mut outcome = faults::count(faults::Ended {
        scenario: Scenario::SumeBlackHole,
        round,
        answers: &answers,
        stored_ids: &stored,
        marks: &marks,
        cut: 0,
        survived,
        healthy,
    });
    outcome.figures = figures;
    outcome.checks = checks;
    eprintln!("{} acked, {} lost", outcome.acked, outcome.lost);
    Ok(outcome)
}

/// The daemon's settings: the simulator's, its API reached through the proxy.
fn settings(
    args: &ChaosArgs,
    sim: &sume_sim::RunningSim,
    proxy: &Proxy,
) -> Vec<(&'static str, String)> {
    let mut settings = vec![(
        "INGEST_TIMEOUT",
        humantime::format_duration(args.ingest_timeout).to_string(),
    )];
    for (k, v) in app::sume_settings(sim, args.sume_timeout, true) {
        let v = if k == "SUME_API_URL" {
            proxy.url_for(&v)
        } else {
            v
        };
        settings.push((k, v));
    }
    settings
}

/// The status calls the sweep wrote from `from` + `timeout` to `to` (server clock), waiting up
/// to a minute for them: a pass writes its calls once it is over, which may be a while after
/// the thaw.
async fn calls_written(
    db: &tokio_postgres::Client,
    (from, timeout): (&str, Duration),
    to: &str,
) -> anyhow::Result<Vec<tokio_postgres::Row>> {
    let began: String = db
        .query_one(
            sql::SERVER_PLUS_SECONDS.sql(),
            &[&from, &timeout.as_secs_f64()],
        )
        .await?
        .get(0);
    let mut rows = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while rows.is_empty() && Instant::now() < deadline {
        rows = db
            .query(sql::JOB_POLLS_BETWEEN.sql(), &[&began, &to])
            .await?;
        if rows.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(rows)
}

/// What the sweep did while Sume was silent (`from` to `to`, server clock): every call that
/// ended from `from` + `SUME_TIMEOUT` to `to` (so began in the freeze) a timeout of about
/// `SUME_TIMEOUT`, nothing closed, every call taken from the budget. Answers the checks that
/// failed.
async fn during(
    db: &tokio_postgres::Client,
    (from, to, timeout): (&str, &str, Duration),
    used: i64,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<Vec<String>> {
    let mut checks = Vec::new();
    let (mut calls, mut timeouts, mut listed) = (0i64, 0i64, 0i64);
    let (mut shortest, mut longest) = (i64::MAX, 0i64);
    let rows = calls_written(db, (from, timeout), to).await?;
    for row in rows {
        let (answer, n, min, max): (String, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        if answer.ends_with("(list)") {
            // A status applied from a page of the key's list read before the freeze.
            listed += n;
            continue;
        }
        calls += n;
        if answer == "timeout" {
            timeouts += n;
            shortest = shortest.min(min);
            longest = longest.max(max);
        } else {
            checks.push(format!(
                "{n} status calls during the black hole answered {answer:?}"
            ));
        }
    }
    let closed: i64 = db
        .query_one(sql::JOBS_CLOSED_BETWEEN.sql(), &[&from, &to])
        .await?
        .get(0);
    figures.extend([
        Figure::count(
            "status calls begun and ended in the black hole",
            calls as f64,
        ),
        Figure::count("of them ended as timeouts", timeouts as f64),
        Figure::count("reads taken from the budget meanwhile", used as f64),
        Figure::count("jobs closed meanwhile", closed as f64),
        Figure::count(
            "of them from a page of the key's list read before the freeze",
            listed as f64,
        ),
    ]);
    if timeouts > 0 {
        figures.push(Figure::count("shortest timeout (ms)", shortest as f64));
        figures.push(Figure::count("longest timeout (ms)", longest as f64));
    }
    let bound = (timeout.as_millis() + 1_000) as i64;
    if timeouts > 0 && (longest > bound || shortest < timeout.as_millis() as i64) {
        checks.push(format!(
            "timed-out calls took {shortest}-{longest} ms, not SUME_TIMEOUT ({} ms)",
            timeout.as_millis()
        ));
    }
    if used < calls {
        checks.push(format!(
            "{calls} calls but only {used} reads taken from the budget"
        ));
    }
    Ok(checks)
}

async fn now(db: &tokio_postgres::Client) -> anyhow::Result<String> {
    Ok(db.query_one(sql::SERVER_NOW.sql(), &[]).await?.get(0))
}

async fn day_used(db: &tokio_postgres::Client) -> anyhow::Result<i64> {
    Ok(db
        .query_one(sql::RATE_BUCKETS_DAY_USED.sql(), &[&KEY_NAME])
        .await?
        .get(0))
}

async fn polled_closes(db: &tokio_postgres::Client) -> anyhow::Result<usize> {
    let rows = db.query(sql::JOBS_OF_KEY.sql(), &[&KEY_NAME]).await?;
    Ok(rows
        .iter()
        .filter(|r| r.get::<_, Option<String>>(3).as_deref() == Some("poll"))
        .count())
}

async fn wait_polled_closes(
    db: &tokio_postgres::Client,
    patience: Duration,
    n: usize,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + patience;
    while polled_closes(db).await? < n {
        if Instant::now() > deadline {
            anyhow::bail!("fewer than {n} jobs closed by a poll after {patience:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
