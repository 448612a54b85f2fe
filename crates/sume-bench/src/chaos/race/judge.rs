//! The race's verdict, once everything has settled: each job against its plan (closed by its
//! own terminal event, once, in the state and with the status it was sent), the disagreements,
//! and what the instances counted as stored (every event once across the fleet).

use std::sync::atomic::Ordering;

use crate::sql;

use super::super::world::Daemon;
use super::{event, Plan, RaceResult, Racer, Timing};

pub(super) async fn judge(
    db: &tokio_postgres::Client,
    plans: &[Plan],
    racer: &Racer,
    daemons: &[Daemon],
) -> anyhow::Result<RaceResult> {
    let rows = db.query(sql::JOBS_RACE_ROWS.sql(), &[]).await?;
    let by_job: std::collections::HashMap<String, &tokio_postgres::Row> =
        rows.iter().map(|r| (r.get::<_, String>(0), r)).collect();
    let mut r = RaceResult {
        jobs: plans.len(),
        ..RaceResult::default()
    };
    for p in plans {
        match p.timing {
            Timing::Early => r.early += 1,
            Timing::Late => r.late += 1,
            Timing::Together => r.together += 1,
        }
        r.duplicated += usize::from(p.copies > 1);
        r.out_of_order += usize::from(p.running_after);
        let events = 1 + i64::from(p.running_before || p.running_after);
        r.events += events as u64;
        match by_job.get(&p.job) {
            None => r.problems.push(format!("{}: no row", p.job)),
            Some(row) => match check_job(p, row, events) {
                Ok(()) => r.closed_once += 1,
                Err(why) => r.problems.push(why),
            },
        }
    }
    r.disagreements = db
        .query_one(sql::DISAGREEMENTS_COUNT.sql(), &[])
        .await?
        .get(0);
    if r.disagreements != 0 {
        r.problems
            .push(format!("{} unexpected disagreements", r.disagreements));
    }
    r.per_instance = racer
        .per_instance
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect();
    r.acked = r.per_instance.iter().sum();
    r.retried = racer.retried.load(Ordering::Relaxed);
    for d in daemons {
        r.stored_counted += d
            .metric("sume_inbox_webhooks_total{outcome=\"stored\"}")
            .await as u64;
        r.duplicates_counted += d
            .metric("sume_inbox_webhooks_total{outcome=\"duplicate\"}")
            .await as u64;
    }
    if r.stored_counted != r.events {
        r.problems.push(format!(
            "the instances stored {} events, {} distinct were sent: an event was stored twice or not at all",
            r.stored_counted, r.events
        ));
    }
    r.problems.truncate(20);
    Ok(r)
}

/// One job against its plan: closed by its terminal event, once, as it said.
fn check_job(p: &Plan, row: &tokio_postgres::Row, events: i64) -> Result<(), String> {
    let state: String = row.get(1);
    let sume_status: Option<String> = row.get(2);
    let closed_by: Option<String> = row.get(3);
    let closed_event: Option<String> = row.get(4);
    let closes: i64 = row.get(5);
    let stored: i64 = row.get(6);
    let want_state = match sume_wire::Status::parse(p.status) {
        sume_wire::Status::Terminal(s) => s.as_str(),
        sume_wire::Status::InFlight => unreachable!("terminal statuses only"),
    };
    let want_event = event(&p.job, p.status).0;
    if state != want_state
        || sume_status.as_deref() != Some(p.status)
        || closed_by.as_deref() != Some("webhook")
        || closed_event.as_deref() != Some(want_event.as_str())
        || closes != 1
        || stored != events
    {
        return Err(format!(
            "{}: state {state}, sume_status {sume_status:?}, closed_by {closed_by:?}, \
             closed_event_id {closed_event:?}, {closes} closing events, {stored} events; \
             sent {} ({want_event}), {events} events",
            p.job, p.status
        ));
    }
    Ok(())
}
