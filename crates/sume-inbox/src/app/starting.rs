//! The start's waits, answered: the store is opened ([`super::startup::open_store`]) while
//! LISTEN_ADDR, already bound, says the daemon is starting and why
//! ([`crate::http::starting`]), and systemd hears every [`systemd::EXTEND_EVERY`] that the start
//! goes on. Once the store is open (or the start failed, or was stopped), the listener is handed
//! back to be served by the daemon's own server, without a connection refused in between.

use std::convert::Infallible;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{startup, RunError};
use crate::config::Config;
use crate::db::Store;
use crate::http::body_readers::BodyReaders;
use crate::http::conns::Conns;
use crate::http::server::{self, Port};
use crate::http::starting::{self, Starting};
use crate::metrics::PortMetrics;
use crate::process::systemd;

/// The store, opened while `listener` answers that the daemon starts, its connections counted
/// in `conns`, the public port's (which the daemon's own server goes on counting them in).
pub async fn open_store(
    config: &Config,
    listener: &TcpListener,
    conns: Arc<Conns>,
    shutdown: &CancellationToken,
) -> Result<Store, RunError> {
    let starting = Starting::default();
    let retry_after_secs = config.ingest.retry_after_secs;
    let port = Port {
        app: starting::router(starting.clone(), retry_after_secs),
        name: "LISTEN_ADDR",
        body_readers: BodyReaders::default(),
        conns,
        config: config.port.clone(),
        bound_bodies: false,
        body_limit: config.max_body_bytes,
        retry_after_secs,
        // Nobody scrapes them: the admin port serves once the start is over.
        metrics: PortMetrics::default(),
    };
    let handover = CancellationToken::new();
    let opening = async {
        let opened = tokio::select! {
            opened = startup::open_store(config, shutdown, &starting) => opened,
            never = tell_systemd(&starting) => match never {},
        };
        handover.cancel();
        opened
    };
    let answering = server::serve_until(listener, port, &handover, shutdown);
    tokio::join!(opening, answering).0
}

/// Tells systemd, every [`systemd::EXTEND_EVERY`], that the start goes on and what it waits
/// for.
async fn tell_systemd(starting: &Starting) -> Infallible {
    loop {
        tokio::time::sleep(systemd::EXTEND_EVERY).await;
        systemd::starting(&starting.why());
    }
}
