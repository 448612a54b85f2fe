//! The figures of a chaos run as Markdown: one table of the fault scenarios (acknowledged,
//! stored, lost, recovery times as medians over rounds), the race's counts and the stalls',
//! headed by the command, the date, the revision and the machine.

use std::fmt::Write as _;
use std::time::Duration;

use super::args::Scenario;
use super::faults::{FaultRun, Unit};
use super::ha::cost::CostResult;
use super::race::{RaceResult, INSTANCES};
use super::stall::StallResult;

/// Everything a run measured.
#[derive(Debug, Clone, Default)]
pub struct ChaosReport {
    /// The command as the reader would type it, the date, the revision, the machine.
    pub heading: Vec<String>,
    /// Every round of every fault scenario.
    pub faults: Vec<FaultRun>,
    /// The three-instance race, when it ran.
    pub race: Option<RaceResult>,
    /// The stalled connections, when they ran.
    pub stall: Option<StallResult>,
    /// What replication costs per event, when it ran.
    pub cost: Option<CostResult>,
    /// Scenarios left out, and why.
    pub skipped: Vec<String>,
}

impl ChaosReport {
    /// Deliveries answered 2xx across the fault scenarios.
    pub fn acked(&self) -> u64 {
        self.faults.iter().map(|f| f.acked).sum()
    }

    /// Of those, missing from the inbox (leaving out the asynchronous failover, whose losses
    /// are its measurement).
    pub fn lost(&self) -> u64 {
        self.faults
            .iter()
            .filter(|f| !f.loss_expected)
            .map(|f| f.lost)
            .sum()
    }

    /// Everything that did not hold; empty when the run passed.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self.faults.iter().flat_map(FaultRun::problems).collect();
        if let Some(r) = &self.race {
            out.extend(r.problems.iter().map(|p| format!("race: {p}")));
        }
        if let Some(s) = &self.stall {
            out.extend(s.problems.iter().map(|p| format!("stall: {p}")));
        }
        out
    }

    /// The report as a Markdown section.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        for line in &self.heading {
            let _ = writeln!(s, "{line}  ");
        }
        s.push('\n');
        self.faults_table(&mut s);
        self.figures(&mut s);
        if let Some(c) = &self.cost {
            cost_table(&mut s, c);
        }
        if let Some(r) = &self.race {
            race_lines(&mut s, r);
        }
        if let Some(st) = &self.stall {
            stall_table(&mut s, st);
        }
        for skipped in &self.skipped {
            let _ = writeln!(s, "\nSkipped: {skipped}.");
        }
        s
    }

    fn faults_table(&self, s: &mut String) {
        if self.faults.is_empty() {
            return;
        }
        s.push_str(
            "| fault | rounds | acknowledged (2xx) | stored | lost | stored, not acknowledged | \
             503 / no answer | fault lasted (median) | 2xx again after the fault ends (median, max) | longest without 2xx (median) | daemon alive and healthy |\n\
             | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --- |\n",
        );
        let mut scenarios: Vec<Scenario> = self.faults.iter().map(|f| f.scenario).collect();
        scenarios.dedup();
        for sc in scenarios {
            let runs: Vec<&FaultRun> = self.faults.iter().filter(|f| f.scenario == sc).collect();
            let sum = |f: fn(&FaultRun) -> u64| runs.iter().map(|r| f(r)).sum::<u64>();
            let recoveries: Vec<Duration> = runs
                .iter()
                .flat_map(|r| r.recoveries.iter().copied())
                .collect();
            let durations: Vec<Duration> = runs
                .iter()
                .flat_map(|r| r.durations.iter().copied())
                .collect();
            let silences: Vec<Duration> = runs
                .iter()
                .flat_map(|r| r.silences.iter().copied())
                .collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} / {} | {} | {}, {} | {} | {} |",
                describe(sc),
                runs.len(),
                thousands(sum(|r| r.acked)),
                thousands(sum(|r| r.stored)),
                sum(|r| r.lost),
                thousands(sum(|r| r.stored_unacked)),
                thousands(sum(|r| r.not_2xx)),
                thousands(sum(|r| r.no_answer)),
                ms(median(&durations)),
                ms(median(&recoveries)),
                ms(recoveries.iter().max().copied()),
                ms(median(&silences)),
                if runs.iter().all(|r| r.survived && r.healthy) {
                    "yes"
                } else {
                    "NO"
                },
            );
        }
        let _ = writeln!(
            s,
            "| **total** | | **{}** | | **{}** | | | | | | |",
            thousands(self.acked()),
            self.lost()
        );
    }
}

impl ChaosReport {
    /// Each scenario's own figures: the median over rounds, and the range when it varied.
    fn figures(&self, s: &mut String) {
        let mut scenarios: Vec<Scenario> = self.faults.iter().map(|f| f.scenario).collect();
        scenarios.dedup();
        for sc in scenarios {
            let runs: Vec<&FaultRun> = self.faults.iter().filter(|f| f.scenario == sc).collect();
            let mut names: Vec<&'static str> = Vec::new();
            for f in runs.iter().flat_map(|r| r.figures.iter()) {
                if !names.contains(&f.name) {
                    names.push(f.name);
                }
            }
            if names.is_empty() {
                continue;
            }
            let _ = writeln!(
                s,
                "
{} ({} rounds):
",
                describe(sc),
                runs.len()
            );
            for name in names {
                let found: Vec<(f64, Unit)> = runs
                    .iter()
                    .flat_map(|r| r.figures.iter())
                    .filter(|f| f.name == name)
                    .map(|f| (f.value, f.unit))
                    .collect();
                let mut values: Vec<f64> = found.iter().map(|f| f.0).collect();
                values.sort_by(f64::total_cmp);
                let show = |v: f64| match found[0].1 {
                    Unit::Ms => ms(Some(Duration::from_secs_f64(v / 1e3))),
                    Unit::Count if v.fract() == 0.0 => thousands(v as u64),
                    Unit::Count => format!("{v:.1}"),
                };
                let mid = show(values[values.len() / 2]);
                let (lo, hi) = (values[0], values[values.len() - 1]);
                let range = if lo == hi {
                    String::new()
                } else {
                    format!(" ({} to {})", show(lo), show(hi))
                };
                let _ = writeln!(s, "- {name}: {mid}{range}");
            }
        }
    }
}

fn cost_table(s: &mut String, c: &CostResult) {
    let _ = writeln!(
        s,
        "\nReplication's cost: {} load connections, {} per mode, {} rounds (medians):\n",
        c.connections,
        humantime::format_duration(c.duration),
        c.rounds
    );
    s.push_str(
        "| commits wait for | 2xx per second | latency p50 | latency p99 | p50 beside no standby |\n\
         | --- | --: | --: | --: | --: |\n",
    );
    let base = c.modes.first().map(|m| m.p50).unwrap_or_default();
    for m in &c.modes {
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} ms | {:.2} ms | {:+.2} ms |",
            m.mode,
            thousands(m.rate.round() as u64),
            m.p50.as_secs_f64() * 1e3,
            m.p99.as_secs_f64() * 1e3,
            (m.p50.as_secs_f64() - base.as_secs_f64()) * 1e3,
        );
    }
}

fn describe(sc: Scenario) -> &'static str {
    match sc {
        Scenario::Kill => "`kill -9` of the daemon, twice a round, restarted at once",
        Scenario::Terminate => "every connection cut (`pg_terminate_backend`)",
        Scenario::Lock => "`sume.events` locked for 2 x `INGEST_TIMEOUT` + 0.5 s",
        Scenario::Crash => "PostgreSQL crash (`pg_ctl stop -m immediate`), then start",
        Scenario::Freeze => {
            "the link to PostgreSQL frozen 2 x `INGEST_TIMEOUT` + 0.5 s, then thawed"
        }
        Scenario::Reset => "every connection to PostgreSQL reset (RST)",
        Scenario::BlackHole => {
            "PostgreSQL's address black-holed until the daemon gave up its connections"
        }
        Scenario::DiskFull => "PostgreSQL's disk full for 2 x `INGEST_TIMEOUT` + 0.5 s",
        Scenario::Failover => {
            "failover to a synchronous standby (primary crashed, standby promoted)"
        }
        Scenario::FailoverSilent => {
            "failover to a synchronous standby, the primary's port gone silent (a partition)"
        }
        Scenario::FailoverAsync => {
            "failover to an asynchronous standby (missing: lost by the failover, then reconcile)"
        }
        Scenario::SplitBrain => "after a failover, the old primary back as a second writable one",
        Scenario::Failback => "failover, then the old primary rebuilt and switched back",
        Scenario::SumeBlackHole => "Sume's address frozen for 3 x `SUME_TIMEOUT` + 1 s",
        Scenario::Race | Scenario::Stall | Scenario::SyncCost => "not a fault",
    }
}

fn race_lines(s: &mut String, r: &RaceResult) {
    let _ = writeln!(
        s,
        "\nRace: {} jobs over {INSTANCES} instances ({} early, {} late, {} at once; {} terminal \
         events delivered 2-3 times, {} `running` events after the terminal one): {} distinct \
         events, {} deliveries answered 2xx ({} per instance), {} attempts retried. \
         **{} of {} jobs closed by their own terminal event exactly once**, {} disagreements; \
         the instances counted {} events stored and {} duplicates. Settled {:.1} s after the \
         first delivery.",
        thousands(r.jobs as u64),
        r.early,
        r.late,
        r.together,
        r.duplicated,
        r.out_of_order,
        thousands(r.events),
        thousands(r.acked),
        r.per_instance
            .iter()
            .map(|n| thousands(*n))
            .collect::<Vec<_>>()
            .join(" / "),
        r.retried,
        thousands(r.closed_once as u64),
        thousands(r.jobs as u64),
        r.disagreements,
        thousands(r.stored_counted),
        thousands(r.duplicates_counted),
        r.settled_in.as_secs_f64(),
    );
}

fn stall_table(s: &mut String, st: &StallResult) {
    let _ = writeln!(
        s,
        "\nStalls: {} connections open at once (the daemon's count; {} opened again after the \
         kernel reset them in the burst); {} of 20 genuine signed deliveries beside them \
         answered 2xx and stored, in {} median, {} max. The daemon's resident memory: {} MiB \
         ready, {} MiB with every stalled connection open, {} MiB at its peak.\n",
        thousands(st.open_seen),
        st.reopened,
        st.genuine_ok,
        ms(Some(st.genuine_median)),
        ms(Some(st.genuine_max)),
        st.rss_kib[0] / 1024,
        st.rss_kib[1] / 1024,
        st.rss_kib[2] / 1024,
    );
    s.push_str(
        "| stalled in | timeout | connections | closed by the server | of them before half the timeout | time to close (median, max) | answered 408 | shed (503) |\n\
         | --- | --: | --: | --: | --: | --: | --: | --: |\n",
    );
    for k in &st.kinds {
        let _ = writeln!(
            s,
            "| {:?} | {} | {} | {} | {} | {}, {} | {} | {} |",
            k.kind,
            humantime::format_duration(k.timeout),
            thousands(k.opened as u64),
            thousands(k.closed as u64),
            k.early,
            ms(Some(k.median)),
            ms(Some(k.max)),
            k.answered_408,
            k.shed,
        );
    }
}

/// The median of some durations (the upper one of an even count).
pub fn median(values: &[Duration]) -> Option<Duration> {
    let mut v = values.to_vec();
    v.sort();
    v.get(v.len() / 2).copied()
}

fn ms(d: Option<Duration>) -> String {
    match d {
        Some(d) if d >= Duration::from_secs(10) => format!("{:.1} s", d.as_secs_f64()),
        Some(d) => format!("{:.0} ms", d.as_secs_f64() * 1e3),
        None => "-".into(),
    }
}

fn thousands(n: u64) -> String {
    crate::report::thousands(n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_durations_read_well() {
        let d = Duration::from_millis;
        assert_eq!(median(&[d(30), d(10), d(20)]), Some(d(20)));
        assert_eq!(median(&[]), None);
        assert_eq!(ms(Some(d(1_234))), "1234 ms");
        assert_eq!(ms(Some(d(12_340))), "12.3 s");
        assert_eq!(thousands(50_123), "50,123");
    }
}
