//! Each trial's jobs against Sume's truth (the simulator's): every job closed, in the state
//! Sume ended it in; and, for the jobs whose webhook was lost, the delay from Sume's end to the
//! daemon's close (`sume.jobs.closed_at`; both clocks are this machine's).

use std::collections::HashMap;

use sume_sim::JobsAnswer;

/// A job as the daemon left it.
#[derive(Debug, Clone)]
pub struct Row {
    /// `open`, or the state it was closed in.
    pub state: String,
    /// The status Sume reported, as stored.
    pub sume_status: Option<String>,
    /// `webhook`, `poll` or `give_up`.
    pub closed_by: Option<String>,
    /// When it closed, in seconds since the epoch.
    pub closed_epoch: Option<f64>,
}

/// The rows of `jobs_sweep_rows`, by job id.
pub fn rows(rows: Vec<tokio_postgres::Row>) -> HashMap<String, Row> {
    rows.into_iter()
        .map(|r| {
            let row = Row {
                state: r.get("state"),
                sume_status: r.get("sume_status"),
                closed_by: r.get("closed_by"),
                closed_epoch: r.get("closed_epoch"),
            };
            (r.get("job_id"), row)
        })
        .collect()
}

/// What a trial's jobs show.
#[derive(Debug, Clone, Default)]
pub struct Judged {
    /// Jobs Sume made for the key.
    pub jobs: usize,
    /// Of them, those whose webhook was lost.
    pub lost: usize,
    /// Jobs closed in the state and with the status Sume ended them in.
    pub right: usize,
    /// Jobs still open, or closed otherwise than Sume ended them (a few ids, with why).
    pub wrong: Vec<String>,
    /// Jobs the daemon closed by a poll or a walk (`closed_by = poll`).
    pub by_poll: usize,
    /// For each lost webhook's job, seconds from Sume's end to the daemon's close.
    pub lost_delays: Vec<f64>,
}

impl Judged {
    /// Jobs not closed as Sume ended them.
    pub fn wrong_count(&self) -> usize {
        self.jobs - self.right
    }
}

/// Judges every job of `truth` by its row.
pub fn judge(truth: &JobsAnswer, rows: &HashMap<String, Row>) -> Judged {
    let mut j = Judged {
        jobs: truth.jobs.len(),
        ..Judged::default()
    };
    for t in &truth.jobs {
        let lost = t.faults.drop;
        j.lost += usize::from(lost);
        let Some(row) = rows.get(&t.id) else {
            j.wrong.push(format!("{}: no row", t.id));
            continue;
        };
        j.by_poll += usize::from(row.closed_by.as_deref() == Some("poll"));
        let right = row.state == t.final_status
            && row.sume_status.as_deref() == Some(t.final_status.as_str());
        if !right {
            j.wrong.push(format!(
                "{}: {} ({:?}), Sume ended it {}",
                t.id, row.state, row.sume_status, t.final_status
            ));
            continue;
        }
        j.right += 1;
        let ended = chrono::DateTime::parse_from_rfc3339(&t.ended_at).ok();
        if let (true, Some(ended), Some(closed)) = (lost, ended, row.closed_epoch) {
            j.lost_delays
                .push(closed - ended.timestamp_millis() as f64 / 1000.0);
        }
    }
    j.wrong.truncate(5);
    j
}

/// The median of `v` (0 when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The largest of `v` (0 when empty).
pub fn worst(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_worsts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(worst(&[1.0, 7.5, 2.0]), 7.5);
    }
}
