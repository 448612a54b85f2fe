//! systemd readiness (`Type=notify`): when `NOTIFY_SOCKET` is set, tell systemd the daemon is
//! serving and, later, that it is stopping; before, while the start waits (for the database,
//! for the migrations' lock, for the migrations), that it goes on, so that `TimeoutStartSec=`
//! does not end a start that takes its time. Without the variable these do nothing. Failures are
//! logged, never fatal: a daemon that cannot reach systemd still serves.

use std::time::Duration;

use sd_notify::NotifyState;

/// How often a start still under way says so ([`starting`]).
pub const EXTEND_EVERY: Duration = Duration::from_secs(10);

/// How long each [`starting`] gives the start: past `TimeoutStartSec=`, systemd ends it only
/// when no such message came for this long (a process that hangs).
pub const EXTEND_BY: Duration = Duration::from_secs(30);

/// `EXTEND_TIMEOUT_USEC` and `STATUS=starting: {why}`: the start goes on, waiting for `why`.
pub fn starting(why: &str) {
    // One line each: a line break would end the state early.
    let status = format!("starting: {why}").replace(['\n', '\r'], " ");
    let extend = NotifyState::ExtendTimeoutUsec(EXTEND_BY.as_micros() as u32);
    send(&[extend, NotifyState::Status(&status)]);
}

/// `READY=1`: every listener is bound and every task started.
pub fn ready() {
    send(&[NotifyState::Ready, NotifyState::Status("serving")]);
}

/// `STOPPING=1`: shutdown has begun.
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}
