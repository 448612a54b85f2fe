//! The demo's application: the example submit path ([`crate::submit`]) with the demo
//! workspace's key, one client per daemon instance so webhooks alternate between them, and a
//! client of another workspace whose jobs' webhooks are (mis)directed to this daemon.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use sume_sim::RunningSim;
use sume_wire::Secret;

use sume_inbox::db::Store;

use super::{DemoArgs, APP_KEY, APP_KEY_NAME, OTHER_KEY};
use crate::submit::{Submission, SubmitClient, SubmitConfig, SubmitError};

pub(super) struct App {
    /// One per daemon instance, each naming that instance's webhook URL.
    ours: Vec<Arc<SubmitClient>>,
    /// The other workspace's key; its jobs have no rows here.
    other: SubmitClient,
}

impl App {
    /// Clients writing through `store`'s pool, creating jobs at `sim` with webhooks to `hooks`.
    pub(super) fn new(
        args: &DemoArgs,
        sim: &RunningSim,
        hooks: &[String],
        store: &Store,
    ) -> Result<App, SubmitError> {
        let slow = Duration::ZERO..=Duration::from_millis(args.slow_work_ms);
        let ours = hooks
            .iter()
            .map(|hook| {
                let config = SubmitConfig::new(sim.api_url(), APP_KEY_NAME, Secret::new(APP_KEY))
                    .with_webhook_url(hook.clone())
                    .with_slow_work(slow.clone());
                SubmitClient::new(config, store.pool().clone()).map(Arc::new)
            })
            .collect::<Result<_, _>>()?;
        let other = SubmitClient::new(
            SubmitConfig::new(sim.api_url(), "other", Secret::new(OTHER_KEY))
                .with_webhook_url(hooks[0].clone()),
            store.pool().clone(),
        )?;
        Ok(App { ours, other })
    }

    /// Submits `jobs` orders, `concurrency` at a time, spread over the clients; answers each
    /// job id with the moment its order committed.
    pub(super) async fn submit_ours(
        &self,
        run_id: &str,
        jobs: usize,
        concurrency: usize,
    ) -> anyhow::Result<HashMap<String, DateTime<Utc>>> {
        futures_util::stream::iter(0..jobs)
            .map(|i| {
                let client = self.ours[i % self.ours.len()].clone();
                let order = format!("order-{run_id}-{i:04}");
                async move {
                    let submitted = client
                        .submit(&Submission::new(order, "a fox at dawn"))
                        .await?;
                    Ok::<_, anyhow::Error>((submitted.job_id, Utc::now()))
                }
            })
            .buffer_unordered(concurrency.max(1))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    /// Creates `jobs` jobs of the other workspace, one after another; answers their ids.
    pub(super) async fn create_foreign(
        &self,
        run_id: &str,
        jobs: usize,
    ) -> Result<Vec<String>, SubmitError> {
        let mut foreign = Vec::new();
        for i in 0..jobs {
            let order = format!("theirs-{run_id}-{i:03}");
            foreign.push(
                self.other
                    .create_job(&Submission::new(order, "not ours"))
                    .await?,
            );
        }
        Ok(foreign)
    }
}
