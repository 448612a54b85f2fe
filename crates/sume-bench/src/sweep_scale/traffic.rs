//! The application of a trial: jobs created at the simulator on an even schedule, each
//! registered in `sume.jobs` as soon as its create answers (its own statement, as a submit
//! path commits it), with the duration and the lost webhook its plan drew.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::time::Instant;

use super::shape::{Shape, KEY_NAME, KEY_SECRET};
use crate::sql;

/// One job's plan.
#[derive(Debug, Clone)]
pub struct Planned {
    /// From creation to Sume's end.
    pub duration_ms: u64,
    /// Its webhook is never sent.
    pub lost: bool,
    /// It ends `failed` instead of `completed`.
    pub failed: bool,
}

/// The jobs of a shape, the same for every trial of a round (`seed`): durations uniform over
/// the shape's range, and over the long jobs' range for one job after every `every` when the
/// shape mixes them in; lost webhooks spread evenly (exactly the shape's share), one job in
/// twenty failed.
pub fn plan(shape: &Shape, seed: u64) -> Vec<Planned> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..shape.jobs)
        .map(|i| {
            let share = |k: usize| (k as f64 * shape.lost).floor();
            let (lo, hi) = match shape.long {
                Some(long) if (i + 1) % (long.every + 1) == 0 => long.duration_ms,
                _ => shape.duration_ms,
            };
            Planned {
                duration_ms: rng.gen_range(lo..=hi),
                lost: share(i + 1) > share(i),
                failed: i % 20 == 7,
            }
        })
        .collect()
}

/// The ids of the jobs created, in the plan's order, and whether each webhook is lost.
#[derive(Debug, Default)]
pub struct Created {
    /// `(job id, lost)`, one per planned job.
    pub jobs: Vec<(String, bool)>,
}

/// Connections registering jobs: each takes the next created job off a queue, so that a slow
/// moment of the database delays registrations instead of failing them.
const REGISTRARS: usize = 4;

/// Creates and registers every planned job, job `i` created at `start + i * creating / jobs`.
pub async fn create_all(
    shape: &Shape,
    plan: &[Planned],
    api_url: &str,
    db_url: &str,
    start: Instant,
) -> anyhow::Result<Created> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let url = Arc::new(format!("{api_url}/videos/generations"));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let mut registrars = Vec::new();
    for _ in 0..REGISTRARS {
        let (db, rx) = (crate::run::setup::connect(db_url).await?, rx.clone());
        registrars.push(tokio::spawn(async move {
            loop {
                let Some(id) = rx.lock().await.recv().await else {
                    break;
                };
                db.execute(sql::JOBS_REGISTER_KEYED.sql(), &[&id, &KEY_NAME])
                    .await
                    .context("registering a job")?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    let gap = shape.creating.as_secs_f64() / plan.len().max(1) as f64;
    let mut tasks = Vec::with_capacity(plan.len());
    for (i, p) in plan.iter().enumerate() {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 * gap)).await;
        let (http, url, tx, p) = (http.clone(), url.clone(), tx.clone(), p.clone());
        tasks.push(tokio::spawn(async move {
            let id = create_one(&http, &url, &p).await?;
            tx.send(id.clone())?;
            Ok::<_, anyhow::Error>((id, p.lost))
        }));
    }
    drop(tx);
    let mut created = Created::default();
    for t in tasks {
        created.jobs.push(t.await??);
    }
    for r in registrars {
        r.await??;
    }
    Ok(created)
}

async fn create_one(http: &reqwest::Client, url: &str, p: &Planned) -> anyhow::Result<String> {
    let outcome = if p.failed { "failed" } else { "completed" };
    let body = json!({
        "prompt": "sweep bench",
        "sim": {"duration_ms": p.duration_ms, "drop": p.lost, "outcome": outcome, "early": false},
    });
    let answer: serde_json::Value = http
        .post(url)
        .bearer_auth(KEY_SECRET)
        .json(&body)
        .send()
        .await
        .context("creating a job at the simulator")?
        .error_for_status()?
        .json()
        .await?;
    answer["job_id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("the create answered no job_id: {answer}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_loses_exactly_its_share_and_is_the_same_for_a_seed() {
        let shape = super::super::shape::issue();
        let a = plan(&shape, 7);
        assert_eq!(a.len(), 600);
        assert_eq!(a.iter().filter(|p| p.lost).count(), 18);
        assert!(a.iter().all(|p| (3_000..=12_000).contains(&p.duration_ms)));
        let b = plan(&shape, 7);
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| x.duration_ms == y.duration_ms));
    }

    #[test]
    fn the_shipped_plan_mixes_in_one_job_of_hours_after_every_200() {
        let shape = super::super::shape::shipped(std::time::Duration::from_secs(120));
        let p = plan(&shape, 1);
        let long = p.iter().filter(|j| j.duration_ms >= 60_000).count();
        assert_eq!((p.len(), long), (8_374, 41));
        assert!(p[200].duration_ms >= 60_000 && p[199].duration_ms <= 10_000);
    }
}
