//! The simulator's shared state: one [`App`] behind an `Arc`, handed to every handler and
//! every job's task.
//!
//! It owns the keyring, the job store, the live fault settings, the rate limiter, the counters
//! and logs the inspection endpoints read, the webhook deliverer, and the tracker of the jobs'
//! background tasks with the token that stops them.

use std::sync::{Arc, RwLock};

use thiserror::Error;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{BodyShape, ConfigError, JobTiming, SimConfig};
use crate::control::Controls;
use crate::faults::{FaultError, Faults};
use crate::journal::{DeliveryRecord, Journal, RequestRecord};
use crate::keys::Keyring;
use crate::ratelimit::RateLimiter;
use crate::stats::{KeyCounters, Polls};
use crate::store::JobStore;
use crate::webhook::Deliverer;

/// Why the simulator could not start.
#[derive(Debug, Error)]
pub enum StartError {
    /// A setting was refused; the message names it.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client that sends webhooks could not be built (a TLS backend failing to
    /// initialise, say): nothing the configuration can fix.
    #[error("cannot build the webhook HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Everything the handlers and job tasks share.
#[derive(Debug)]
pub struct App {
    pub keys: Keyring,
    pub store: JobStore,
    faults: RwLock<Faults>,
    pub limiter: RateLimiter,
    pub polls: Arc<Polls>,
    pub key_counts: KeyCounters,
    pub requests: Journal<RequestRecord>,
    pub deliveries: Arc<Journal<DeliveryRecord>>,
    pub deliverer: Deliverer,
    /// Keys' access (402, 403) and the signing clock, changed at run time.
    pub controls: Controls,
    /// The jobs' background tasks.
    pub tasks: TaskTracker,
    /// Cancelled when the simulator stops; every job task watches it.
    pub shutdown: CancellationToken,
    pub timing: JobTiming,
    pub body_shape: BodyShape,
    pub default_webhook_url: Option<String>,
    /// The order of `GET /jobs`.
    pub list_order: crate::choices::ListOrder,
}

/// The handle handlers and tasks hold.
pub type Shared = Arc<App>;

impl App {
    /// Validates `config` and builds the state; `shutdown` stops the job tasks.
    pub fn new(config: SimConfig, shutdown: CancellationToken) -> Result<Shared, StartError> {
        let keys = config.keyring()?;
        let epoch = Instant::now();
        let deliveries = Arc::new(Journal::new(config.log_capacity));
        let controls = Controls::default();
        let deliverer = Deliverer::new(
            config.delivery.clone(),
            config.webhook_secrets.clone(),
            deliveries.clone(),
            controls.clock_offset.clone(),
        )?;
        Ok(Arc::new(App {
            keys,
            store: JobStore::default(),
            faults: RwLock::new(config.faults.clone()),
            limiter: RateLimiter::new(
                epoch,
                config.limits.rate_window,
                config.limits.reads_per_window,
                config.limits.creates_per_window,
            )
            .with_daily_reads(config.limits.reads_per_day, config.limits.read_day),
            polls: Arc::new(Polls::default()),
            key_counts: KeyCounters::default(),
            requests: Journal::new(config.log_capacity),
            deliveries,
            deliverer,
            controls,
            tasks: TaskTracker::new(),
            shutdown,
            timing: config.timing,
            body_shape: config.body_shape,
            default_webhook_url: config.webhook_url,
            list_order: config.list_order,
        }))
    }

    /// The fault settings in force now.
    pub fn faults(&self) -> Faults {
        self.faults.read().expect("faults lock").clone()
    }

    /// Applies a partial update (`PATCH /sim/faults`) and answers the new settings.
    pub fn patch_faults(&self, patch: &serde_json::Value) -> Result<Faults, FaultError> {
        let mut faults = self.faults.write().expect("faults lock");
        let next = faults.patched(patch)?;
        *faults = next.clone();
        Ok(next)
    }
}
