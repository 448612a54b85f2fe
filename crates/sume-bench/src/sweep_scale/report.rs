//! The section of docs/benchmarks.md that `sume-bench sweep` appends: how it ran, one row per
//! shape and daemon with the medians of the rounds, and the targets' verdicts.

use std::fmt::Write as _;

use super::judge::{median, worst};
use super::shape::Shape;
use super::trial::Trial;
use crate::report::thousands;

/// Key checks a day per instance (one every 5 minutes, `RECHECK_EVERY`): real time, which the
/// compressed runs leave out, so they are added to the reads a day.
pub const KEY_CHECKS_A_DAY: f64 = 288.0;
/// The shipped shape's target: reads a day per key for the fleet (SUME_READ_DAILY).
pub const READS_A_DAY_TARGET: f64 = 9_000.0;
/// The issue shape's target: walks read at most this share of what reading each job by
/// itself (`LIST_WALKS=off`, the same jobs) reads. The shape runs with the day's allowance out
/// of the way, so its walks come at every pass that finds a job's poll due: what it spends
/// follows SWEEP_INTERVAL, and only the cut against one read a job says what walking saves.
pub const READS_SHARE_TARGET: f64 = 0.2;

/// Everything the section says.
pub struct SweepReport {
    /// `### DATE: ...`.
    pub date: String,
    /// The command as the reader would type it.
    pub command: String,
    /// CPUs, memory, kernel, PostgreSQL, revision.
    pub machine: String,
    /// Rounds run.
    pub rounds: usize,
    /// The shapes run.
    pub shapes: Vec<Shape>,
    /// Every trial of every round.
    pub trials: Vec<Trial>,
    /// A remark recorded with the results.
    pub note: Option<String>,
}

/// The reads of a trial per job, over the whole trial.
pub fn reads_per_job(t: &Trial) -> f64 {
    (t.job_reads + t.list_reads) as f64 / t.judged.jobs.max(1) as f64
}

/// Jobs a day and reads a day of a trial's steady part, at its shape's compression (key checks
/// added); `None` for a shape not scaled to a day.
pub fn per_day(t: &Trial, shape: &Shape) -> Option<(f64, f64)> {
    let w = &t.window;
    if shape.compression <= 1.0 || w.secs <= 0.0 {
        return None;
    }
    let day = 86_400.0 / (w.secs * shape.compression);
    let reads = (w.job_reads + w.list_reads) as f64 * day + KEY_CHECKS_A_DAY;
    Some((w.jobs as f64 * day, reads))
}

/// One line about a trial, for the terminal as it ends.
pub fn trial_line(t: &Trial) -> String {
    format!(
        "{}: {} jobs, {} job reads + {} list reads = {:.3} a job; {} not closed as Sume ended them; lost webhooks' close {:.1} s median, {:.1} s worst (in {:.0} s)",
        t.variant.label(),
        t.judged.jobs,
        t.job_reads,
        t.list_reads,
        reads_per_job(t),
        t.judged.wrong_count(),
        median(&t.judged.lost_delays),
        worst(&t.judged.lost_delays),
        t.took.as_secs_f64(),
    )
}

/// The trials of one shape and daemon.
struct Group<'a> {
    shape: &'a Shape,
    label: String,
    trials: Vec<&'a Trial>,
}

impl Group<'_> {
    fn med(&self, f: impl Fn(&Trial) -> f64) -> f64 {
        median(&self.trials.iter().map(|t| f(t)).collect::<Vec<_>>())
    }

    fn wrong(&self) -> usize {
        self.trials.iter().map(|t| t.judged.wrong_count()).sum()
    }

    fn worst_of_all(&self) -> f64 {
        self.trials
            .iter()
            .map(|t| worst(&t.judged.lost_delays))
            .fold(0.0, f64::max)
    }

    fn day(&self) -> Option<(f64, f64)> {
        let days: Vec<(f64, f64)> = self
            .trials
            .iter()
            .filter_map(|t| per_day(t, self.shape))
            .collect();
        (!days.is_empty()).then(|| {
            (
                median(&days.iter().map(|d| d.0).collect::<Vec<_>>()),
                median(&days.iter().map(|d| d.1).collect::<Vec<_>>()),
            )
        })
    }

    fn row(&self) -> String {
        let day = self.day();
        let closed: usize = self.trials.iter().map(|t| t.judged.right).sum();
        let all: usize = self.trials.iter().map(|t| t.judged.jobs).sum();
        format!(
            "| {} | {} | {} | {} ({}) | {} | {} | **{:.3}** | {} of {} | {:.1} | {:.1} | {:.1} | {} | {} |",
            self.shape.name,
            self.label,
            self.trials.len(),
            thousands(self.med(|t| t.judged.jobs as f64)),
            thousands(self.med(|t| t.judged.lost as f64)),
            thousands(self.med(|t| t.job_reads as f64)),
            thousands(self.med(|t| t.list_reads as f64)),
            self.med(reads_per_job),
            thousands(closed as f64),
            thousands(all as f64),
            self.med(|t| median(&t.judged.lost_delays)),
            self.med(|t| worst(&t.judged.lost_delays)),
            self.worst_of_all(),
            day.map_or("-".into(), |d| thousands(d.0)),
            day.map_or("-".into(), |d| thousands(d.1)),
        )
    }
}

impl SweepReport {
    fn groups(&self) -> Vec<Group<'_>> {
        let mut groups: Vec<Group<'_>> = Vec::new();
        for t in &self.trials {
            let label = t.variant.label();
            match groups
                .iter_mut()
                .find(|g| g.shape.name == t.shape && g.label == label)
            {
                Some(g) => g.trials.push(t),
                None => {
                    if let Some(shape) = self.shapes.iter().find(|s| s.name == t.shape) {
                        groups.push(Group {
                            shape,
                            label,
                            trials: vec![t],
                        });
                    }
                }
            }
        }
        groups
    }

    /// The table: a row per shape and daemon.
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| shape | daemon | rounds | jobs (lost webhooks) | job reads | list reads | reads per job | closed as Sume ended them | lost webhook's close after Sume's end, s: median | worst (median of rounds) | worst of all rounds | jobs a day | reads a day |\n\
             |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        );
        for g in self.groups() {
            let _ = writeln!(s, "{}", g.row());
        }
        s
    }

    /// Each target with its verdict: `(met, line)`.
    pub fn verdicts(&self) -> Vec<(bool, String)> {
        let mut v = Vec::new();
        let groups = self.groups();
        for g in &groups {
            let wrong = g.wrong();
            v.push((
                wrong == 0,
                format!(
                    "{}, {}: every job closed as Sume ended it ({wrong} not)",
                    g.shape.name, g.label
                ),
            ));
            if g.label != "LIST_WALKS=auto" {
                continue;
            }
            let pmi = g.shape.poll_max_interval().as_secs_f64();
            let w = g.worst_of_all();
            v.push((w <= pmi, format!("{}, {}: a lost webhook's job closed within POLL_MAX_INTERVAL ({pmi:.0} s) of Sume's end: worst of all rounds {w:.1} s", g.shape.name, g.label)));
            if g.shape.compression <= 1.0 {
                let off = groups
                    .iter()
                    .find(|o| o.shape.name == g.shape.name && o.label == "LIST_WALKS=off");
                if let Some(off) = off {
                    let (r, one) = (g.med(reads_per_job), off.med(reads_per_job));
                    v.push((
                        r <= READS_SHARE_TARGET * one,
                        format!(
                            "{}, {}: at most {:.0}% of the reads of one read a job (LIST_WALKS=off: {one:.3} a job): {r:.3} a job, {:.0}%",
                            g.shape.name,
                            g.label,
                            READS_SHARE_TARGET * 100.0,
                            100.0 * r / one.max(f64::MIN_POSITIVE)
                        ),
                    ));
                }
            } else if let Some((jobs, reads)) = g.day() {
                v.push((
                    reads <= READS_A_DAY_TARGET && jobs >= 99_500.0,
                    format!(
                        "{}, {}: {} jobs a day in at most {} reads a day: {}",
                        g.shape.name,
                        g.label,
                        thousands(jobs),
                        thousands(READS_A_DAY_TARGET),
                        thousands(reads)
                    ),
                ));
            }
        }
        v
    }

    /// The targets missed.
    pub fn missed(&self) -> Vec<String> {
        self.verdicts()
            .into_iter()
            .filter(|(met, _)| !met)
            .map(|(_, line)| line)
            .collect()
    }

    /// The whole section.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "### {}: the sweep at Sume's scale (`sume-bench sweep`)\n\nCommand: `{}`\n\nMachine: {}.\n\n",
            self.date, self.command, self.machine
        );
        s.push_str(&self.how());
        if let Some(note) = &self.note {
            let _ = writeln!(s, "Note: {note}\n");
        }
        s.push_str(&self.table());
        s.push_str("\nTargets:\n\n");
        for (met, line) in self.verdicts() {
            let _ = writeln!(s, "- {} {line}", if met { "met:" } else { "MISSED:" });
        }
        s.push('\n');
        s
    }

    fn how(&self) -> String {
        let mut s = format!(
            "Each of {} rounds runs, per shape and side by side, one daemon with `LIST_WALKS=auto` and one with `LIST_WALKS=off` (every job read by itself: the before), each with its own database, its own simulator (Sume's 120 reads a minute compressed to a second, counting every read of the key) and the same jobs; the first round adds `LIST_WALKS=auto` against a list served oldest first. Every job is created at the simulator and registered in `sume.jobs` as soon as its create answers; its webhook comes when it ends unless it was lost; one job in twenty fails. Medians of the rounds; a lost webhook's delay is from Sume's end (the simulator's truth) to `sume.jobs.closed_at`.\n\n",
            self.rounds
        );
        for shape in &self.shapes {
            let settings: Vec<String> = shape
                .settings
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let long = shape.long.map_or(String::new(), |l| {
                format!(
                    " (but one after every {} of them, which runs {}-{} s)",
                    l.every,
                    l.duration_ms.0 / 1000,
                    l.duration_ms.1 / 1000
                )
            });
            let daily = match shape.reads_a_day {
                Some(a_day) => {
                    let a_day = thousands(f64::from(a_day));
                    format!(
                        ", SUME_READ_DAILY={a_day} for each day {}x faster left to UTC midnight at the trial's start (the pace of {a_day} a day)",
                        shape.compression
                    )
                }
                None => ", SUME_READ_DAILY=2000000000".to_owned(),
            };
            let _ = writeln!(
                s,
                "- {}: {} jobs created evenly over {}, each ending {}-{} s after its creation{long}, {}% of webhooks lost; {}{daily}{}.",
                shape.name,
                thousands(shape.jobs as f64),
                humantime::format_duration(shape.creating),
                shape.duration_ms.0 / 1000,
                shape.duration_ms.1 / 1000,
                shape.lost * 100.0,
                settings.join(", "),
                if shape.compression > 1.0 {
                    format!(" (the shipped settings {}x faster; jobs and reads a day extrapolated from the reads between {} s and the last create, times {:.0} for a day, plus {KEY_CHECKS_A_DAY:.0} key checks a day, which are not compressed)", shape.compression, shape.warmup.as_secs(), 86_400.0 / shape.compression)
                } else {
                    String::new()
                }
            );
        }
        s.push('\n');
        s
    }
}
