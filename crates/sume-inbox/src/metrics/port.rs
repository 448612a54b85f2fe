//! The counters one port's server loop keeps ([`crate::http::server`]): the public port's are
//! the `sume_inbox_port_*` series of [`Metrics`], the admin port's `sume_inbox_admin_port_*`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{
    LingerEnd, LingerLabels, Metrics, ProtocolLabels, RefusedProtocol, TimeoutKind, TimeoutLabels,
};

/// One port's connections, timeouts and refusals (handles on the registered series).
#[derive(Clone, Debug, Default)]
pub struct PortMetrics {
    /// Connections open now.
    pub connections_open: Gauge,
    /// Connections closed at the connection cap, to make room, while they lingered after an
    /// answer given with their body unread, or were still sending (or had not started, or were
    /// idle before) a request head.
    pub connections_shed: Counter,
    /// New connections closed at once at the cap (none could be shed).
    pub connections_refused: Counter,
    /// Connections closed (or requests answered 408) by a timeout, by which one.
    pub timeouts: Family<TimeoutLabels, Counter>,
    /// Requests answered 503 at once at the port's MAX_IN_FLIGHT.
    pub in_flight_refused: Counter,
    /// Connections opened with a protocol the port does not speak, by which.
    pub protocols_refused: Family<ProtocolLabels, Counter>,
    /// Connections answered with a body unread, reading what their client still sends before
    /// they close, now.
    pub lingering: Gauge,
    /// Those lingers ended, by what ended them.
    pub lingers: Family<LingerLabels, Counter>,
}

impl PortMetrics {
    /// Counts a connection closed, or a request refused, by the timer `kind`.
    pub fn timeout(&self, kind: TimeoutKind) {
        self.timeouts.get_or_create(&TimeoutLabels { kind }).inc();
    }

    /// Counts a connection opened with `protocol`, which the port does not speak.
    pub fn protocol_refused(&self, protocol: RefusedProtocol) {
        self.protocols_refused
            .get_or_create(&ProtocolLabels { protocol })
            .inc();
    }

    /// Counts a linger ended by `by`.
    pub fn lingered(&self, by: LingerEnd) {
        self.lingers.get_or_create(&LingerLabels { by }).inc();
    }

    /// Registers the admin port's series (its requests in flight are bounded by its connection
    /// cap alone, so it has no refusals of its own to count).
    pub(super) fn register_admin(&self, r: &mut Registry) {
        r.register(
            "admin_port_connections_open",
            "Connections open on ADMIN_ADDR",
            self.connections_open.clone(),
        );
        r.register(
            "admin_port_connections_shed",
            "Connections on ADMIN_ADDR lingering after an answer given with their body unread, or sending no request (headers pending, or idle), closed at MAX_ADMIN_CONNECTIONS to make room",
            self.connections_shed.clone(),
        );
        r.register(
            "admin_port_connections_refused",
            "New connections on ADMIN_ADDR closed at once at MAX_ADMIN_CONNECTIONS (every one busy with a request)",
            self.connections_refused.clone(),
        );
        r.register(
            "admin_port_timeouts",
            "Connections on ADMIN_ADDR closed or requests answered 408 by HEADER_TIMEOUT, BODY_TIMEOUT or IDLE_TIMEOUT",
            self.timeouts.clone(),
        );
        r.register(
            "admin_port_protocols_refused",
            "Connections on ADMIN_ADDR opened with a protocol it does not speak (HTTP/2 with prior knowledge), answered 505 and closed",
            self.protocols_refused.clone(),
        );
        r.register(
            "admin_port_lingering_connections",
            "Connections on ADMIN_ADDR answered with their request body unread, reading what the client still sends before they close",
            self.lingering.clone(),
        );
        r.register(
            "admin_port_lingers",
            "Connections on ADMIN_ADDR that read what their client sent after an answer given with the body unread, by what ended it: client (closed its side), time, bytes, shed",
            self.lingers.clone(),
        );
    }
}

impl Metrics {
    /// The public port's series, as its server loop counts them.
    pub fn public_port(&self) -> PortMetrics {
        PortMetrics {
            connections_open: self.port_connections_open.clone(),
            connections_shed: self.port_connections_shed.clone(),
            connections_refused: self.port_connections_refused.clone(),
            timeouts: self.port_timeouts.clone(),
            in_flight_refused: self.port_in_flight_refused.clone(),
            protocols_refused: self.port_protocols_refused.clone(),
            lingering: self.port_lingering.clone(),
            lingers: self.port_lingers.clone(),
        }
    }
}
