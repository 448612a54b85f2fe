//! The chaos suite's small run, inside `make test`: the same code as `make chaos`
//! (`sume-bench chaos`), with a few hundred deliveries, jobs and stalled connections, a
//! PostgreSQL cluster of its own (it is crashed), the debug daemon as a child process, the link
//! to PostgreSQL frozen and black-holed (where nftables may drop packets), and a failover to a
//! synchronous standby started by the suite.
//!
//! Only generous bounds are asserted: every delivery answered 2xx is stored, 2xx resumes after
//! each fault within the run's patience (60 s), the daemon survives, every raced job closes
//! once, every stalled connection is closed, a frozen database is answered 503 within
//! `INGEST_TIMEOUT` and a bit, the daemon gives up connections into a black hole, and after
//! the failover attach and the sweep close jobs on the new primary in Sume's state. The times
//! are measured by `make chaos` and written in docs/reliability.md.

use std::path::PathBuf;
use std::time::Duration;

use sume_bench::chaos::{self, ChaosArgs, FaultRun, Scenario};

/// A figure of a round by name (panics when the scenario did not measure it).
fn figure(run: &FaultRun, name: &str) -> f64 {
    run.figures
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no figure {name:?} in {run:?}"))
        .value
}

/// The daemon binary of this build: `cargo test --workspace` (what `make test` runs) builds it
/// beside the test binaries' `deps/` folder.
fn daemon_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let bin = profile_dir.join("sume-inbox");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p sume-inbox` (`make test` does)",
        bin.display()
    );
    bin
}

#[tokio::test(flavor = "multi_thread")]
async fn the_promise_holds_through_kills_cuts_locks_crashes_freezes_failovers_races_and_stalls() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("chaos-{}", std::process::id()));
    let args = ChaosArgs::small(root.join("scripts/devpg"), work.clone(), daemon_bin());
    let report = chaos::run(&args)
        .await
        .expect("every scenario ran to its end");
    println!("{}", report.markdown());
    let problems = report.problems();
    assert!(problems.is_empty(), "the chaos suite found:\n{problems:#?}");

    every_fault_lost_nothing(&report, &args);
    the_faults_did_bite(&report, &args);
    the_race_and_the_stalls_held(&report, &args);
    let _ = std::fs::remove_dir_all(&work);
}

/// Every fault ran, lost nothing acknowledged and was followed by 2xx again.
fn every_fault_lost_nothing(report: &chaos::ChaosReport, args: &ChaosArgs) {
    let black_hole_ran = !report.skipped.iter().any(|s| s.starts_with("black-hole"));
    for scenario in [
        Scenario::Kill,
        Scenario::Terminate,
        Scenario::Lock,
        Scenario::Crash,
        Scenario::Freeze,
        Scenario::BlackHole,
        Scenario::Failover,
    ] {
        if scenario == Scenario::BlackHole && !black_hole_ran {
            println!("black-hole skipped: {:?}", report.skipped);
            continue;
        }
        let run = report
            .faults
            .iter()
            .find(|f| f.scenario == scenario)
            .unwrap_or_else(|| panic!("{scenario:?} did not run"));
        assert!(run.acked >= args.size, "{run:?}");
        assert_eq!((run.lost, run.stored), (0, run.acked), "{run:?}");
        let faults = if scenario == Scenario::Kill { 2 } else { 1 };
        assert_eq!(run.recoveries.len(), faults, "{run:?}");
        assert!(
            run.recoveries.iter().all(|r| *r < Duration::from_secs(60)),
            "{run:?}"
        );
        assert!(run.survived && run.healthy, "{run:?}");
    }
}

/// The faults did bite: the lock and the crash were answered 503 meanwhile, the kills left
/// deliveries without an answer, a freeze and a black hole were noticed and outlived.
fn the_faults_did_bite(report: &chaos::ChaosReport, args: &ChaosArgs) {
    let black_hole_ran = !report.skipped.iter().any(|s| s.starts_with("black-hole"));
    let by = |s: Scenario| report.faults.iter().find(|f| f.scenario == s).unwrap();
    assert!(by(Scenario::Lock).not_2xx > 0 && by(Scenario::Crash).not_2xx > 0);
    assert!(by(Scenario::Kill).no_answer > 0);
    // A frozen database is answered 503, each within INGEST_TIMEOUT and a generous margin.
    let freeze = by(Scenario::Freeze);
    assert!(freeze.not_2xx > 0, "{freeze:?}");
    let slowest = figure(freeze, "slowest answer other than 2xx during the fault");
    assert!(
        slowest < (args.ingest_timeout + Duration::from_secs(5)).as_secs_f64() * 1e3,
        "{freeze:?}"
    );
    if black_hole_ran {
        let hole = by(Scenario::BlackHole);
        assert!(
            figure(
                hole,
                "connections the daemon held when the black hole began"
            ) > 0.0,
            "{hole:?}"
        );
        assert!(
            figure(hole, "until the daemon had given up every one of them") < 60_000.0,
            "{hole:?}"
        );
    }
    // After the failover, the sweep and attach worked on the new primary (checked by the
    // scenario: every job Sume ended is closed there in Sume's state, some by a poll).
    let failover = by(Scenario::Failover);
    assert!(failover.checks.is_empty(), "{failover:?}");
    assert!(
        figure(failover, "jobs of the application on the primary") > 0.0,
        "{failover:?}"
    );
}

fn the_race_and_the_stalls_held(report: &chaos::ChaosReport, args: &ChaosArgs) {
    let race = report.race.as_ref().expect("the race ran");
    assert_eq!(race.closed_once, args.race_jobs, "{race:?}");
    assert_eq!(race.disagreements, 0);
    assert_eq!(race.stored_counted, race.events, "{race:?}");
    assert!(race.per_instance.iter().all(|&n| n > 0), "{race:?}");

    let stall = report.stall.as_ref().expect("the stalls ran");
    assert_eq!(stall.genuine_ok, 20, "{stall:?}");
    let shed: usize = stall.kinds.iter().map(|k| k.shed).sum();
    assert!(
        shed > 0,
        "more bodies stalled than MAX_IN_FLIGHT, yet none shed: {stall:?}"
    );
    assert!(
        stall.open_seen + shed as u64 >= args.stalls as u64,
        "{stall:?}"
    );
    for kind in &stall.kinds {
        assert_eq!(kind.closed, kind.opened, "{kind:?}");
    }
    assert!(
        stall
            .kinds
            .iter()
            .any(|k| k.kind == chaos::Stall::Upload && k.opened > 0),
        "{stall:?}"
    );
    assert!(stall.rss_kib.iter().all(|&kib| kib > 0), "{stall:?}");
}
