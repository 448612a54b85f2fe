//! The wiring's context: the configuration and the handles every part is built from (the store,
//! the metrics, the tasks and their health, the shutdown), and one method per part that starts
//! its actors the one way ([`Tasks::spawn`]) and answers the handles the others need.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::RunError;
use crate::actors::attach::{Attach, AttachHandle, JobListener};
use crate::actors::close_waiters::{WaiterWakeup, Waiters};
use crate::actors::heartbeat::Fleet;
use crate::actors::ingest::{Ingest, IngestHandle};
use crate::actors::supervision::{Health, Tasks};
use crate::actors::sweep::{Clock, InboxCheck, Poll, Recheck, Retention};
use crate::config::{Config, PortConfig};
use crate::db::Store;
use crate::http::admin::{self, Access, AdminState};
use crate::http::conns::Conns;
use crate::http::console;
use crate::http::probes::Readiness;
use crate::http::server::Port;
use crate::http::webhook::{self, BodyBudget, BodyReaders, WebhookState};
use crate::metrics::Metrics;
use crate::sume_api::StatusReader;

/// What the parts of one daemon are built from.
pub struct Wiring {
    /// The settings.
    pub config: Config,
    /// The database.
    pub store: Store,
    /// This instance's counters.
    pub metrics: Arc<Metrics>,
    /// The tasks that outlive the servers: stopped after them.
    pub tasks: Tasks,
    /// Cancelled to stop the servers (SIGTERM, or the caller's token).
    pub shutdown: CancellationToken,
}

impl Wiring {
    /// The context of a daemon that stops on `shutdown`.
    pub fn new(config: Config, store: Store, shutdown: CancellationToken) -> Wiring {
        let keys = config.api_keys.iter().map(|k| k.name.as_str());
        let metrics = Metrics::for_instance(config.webhook_secrets.len(), keys);
        Wiring {
            config,
            store,
            metrics: Arc::new(metrics),
            tasks: Tasks::new(Health::default(), CancellationToken::new()),
            shutdown,
        }
    }

    /// The tasks' health table.
    pub fn health(&self) -> &Health {
        self.tasks.health()
    }

    /// Attach, and its LISTEN connection where the store can listen.
    pub fn start_attach(&self) -> AttachHandle {
        let (attach, handle) = Attach::new(
            self.store.clone(),
            self.metrics.clone(),
            self.config.attach.clone(),
        );
        self.tasks.spawn(attach);
        if self.store.can_listen() {
            self.tasks
                .spawn(JobListener::new(self.store.clone(), handle.clone()));
        }
        handle
    }

    /// The sweep: four services. The three that ask Sume share one reader, so one budget and
    /// one lease owner, whose name (also the instance's in the fleet's picture) is answered.
    pub fn start_sweep(&self) -> Result<String, RunError> {
        let c = &self.config;
        let client = sume_wire::StatusClient::new(&c.sume_api_url, c.sweep.request_timeout)
            .map_err(|e| RunError::Config(e.to_string()))?;
        let reader = StatusReader::new(
            self.store.clone(),
            self.metrics.clone(),
            client,
            c.api_keys.clone(),
            c.sweep.read_rate,
        )
        .with_daily_reads(c.sweep.daily_reads)
        .with_key_check_max_age(c.sweep.key_check_max_age);
        let owner = reader.owner().to_owned();
        let (store, metrics) = (&self.store, &self.metrics);
        self.tasks.spawn(InboxCheck::new(
            store.clone(),
            metrics.clone(),
            reader.clone(),
            c.sweep.clone(),
            Clock::Database,
        ));
        self.tasks.spawn(Poll::new(
            store.clone(),
            metrics.clone(),
            reader.clone(),
            c.sweep.clone(),
            Clock::Database,
        ));
        self.tasks.spawn(Recheck::new(
            store.clone(),
            metrics.clone(),
            reader,
            c.sweep.clone(),
            Clock::Database,
        ));
        self.tasks.spawn(Retention::new(
            store.clone(),
            metrics.clone(),
            c.sweep.clone(),
            Clock::Database,
        ));
        Ok(owner)
    }

    /// The heartbeat of instance `instance`, on tasks of its own: stopped after every other,
    /// so its last write shows them finished.
    pub fn start_heartbeat(&self, instance: &str) -> Tasks {
        let last = Tasks::new(self.health().clone(), CancellationToken::new());
        let fleet = Fleet::new(
            self.store.clone(),
            self.metrics.clone(),
            self.health().clone(),
            instance,
            Clock::Database,
        );
        let keys = self.config.api_keys.iter().map(|k| k.name.clone());
        last.spawn(
            fleet
                .with_config(self.config.fleet.clone())
                .with_api_keys(keys.collect()),
        );
        last
    }

    /// The ingest writers; answers the handle the webhook handler sends on. The writers stop
    /// once every handle is dropped and the queue is empty, after the servers stopped.
    pub fn start_ingest(&self, attach: AttachHandle) -> IngestHandle {
        let (ingest, handle) = Ingest::new(
            self.store.clone(),
            self.metrics.clone(),
            attach,
            self.config.ingest.clone(),
        );
        let writers = self.tasks.stopped_by(self.shutdown.clone());
        for i in 0..ingest.writers() {
            writers.spawn(ingest.writer(i));
        }
        handle
    }

    /// The waiters of `?wait=` and the task that wakes them.
    pub fn start_waiters(&self) -> Waiters {
        let waiters = Waiters::new(self.config.wait.max_waiters);
        self.tasks.spawn(WaiterWakeup::new(
            self.store.clone(),
            waiters.clone(),
            &self.config.wait,
        ));
        waiters
    }

    /// What the admin API's handlers share.
    pub fn admin_state(
        &self,
        attach: AttachHandle,
        waiters: Waiters,
        instance: &str,
    ) -> AdminState {
        AdminState {
            store: self.store.clone(),
            attach,
            key_names: Arc::new(
                self.config
                    .api_keys
                    .iter()
                    .map(|k| k.name.clone())
                    .collect(),
            ),
            metrics: self.metrics.clone(),
            health: self.health().clone(),
            waiters,
            max_wait: self.config.wait.max_wait,
            shutdown: self.shutdown.clone(),
            secrets: Arc::new(self.config.webhook_secrets.clone()),
            instance: instance.into(),
        }
    }

    /// The public port: the webhook and the health checks, with its limits; `conns` holds the
    /// connections accepted while the daemon started.
    pub fn public_port(&self, ingest: IngestHandle, conns: Arc<Conns>) -> Port {
        let c = &self.config;
        let body_readers = BodyReaders::default();
        let app = webhook::router(WebhookState {
            secrets: Arc::new(c.webhook_secrets.clone()),
            tolerance: c.webhook_tolerance,
            max_body_bytes: c.max_body_bytes,
            body_timeout: c.port.body_timeout,
            body_memory: BodyBudget::new(c.port.max_body_memory),
            body_readers: body_readers.clone(),
            ingest,
            timeout: c.ingest.timeout,
            retry_after_secs: c.ingest.retry_after_secs,
            health: Readiness::new(self.health().clone(), self.store.clone()),
            metrics: self.metrics.clone(),
        });
        Port {
            app,
            name: "LISTEN_ADDR",
            body_readers,
            conns,
            config: c.port.clone(),
            bound_bodies: false,
            body_limit: c.max_body_bytes,
            retry_after_secs: c.ingest.retry_after_secs,
            metrics: self.metrics.public_port(),
        }
    }

    /// The admin port: `app` (the admin API and the console) with the public port's timeouts
    /// and a cap of `max_connections` of its own, which also bounds its requests in flight (a
    /// `?wait=` holds its connection and its request until the job closes).
    pub fn admin_port(&self, app: axum::Router, max_connections: usize) -> Port {
        let c = &self.config;
        Port {
            app,
            name: "ADMIN_ADDR",
            body_readers: BodyReaders::default(),
            conns: Arc::new(Conns::new(max_connections)),
            config: PortConfig {
                max_connections,
                max_in_flight: max_connections,
                ..c.port.clone()
            },
            bound_bodies: true,
            body_limit: crate::http::admin::MAX_WRITE_BYTES,
            retry_after_secs: c.ingest.retry_after_secs,
            metrics: self.metrics.admin_port.clone(),
        }
    }

    /// The admin port's routes: the admin API and the console, answering for `admin_addr`.
    pub fn admin_router(
        &self,
        state: AdminState,
        admin_addr: std::net::SocketAddr,
    ) -> axum::Router {
        let c = &self.config;
        let access = Access {
            operator: c.admin_token.clone(),
            app: c.admin_app_token.clone(),
            hosts: Access::hosts_for(admin_addr, &c.admin_hosts),
            wildcard_port: Access::wildcard_port(admin_addr),
        };
        let console_app = console::router(console::ConsoleState {
            admin: state.clone(),
            access: Arc::new(access.clone()),
            inbox_grace: c.sweep.inbox_grace,
            sessions: Arc::default(),
            no_api_keys: c.api_keys.is_empty(),
        });
        admin::router(state, access).merge(console_app)
    }
}
