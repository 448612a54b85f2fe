//! systemd readiness (`Type=notify`): when `NOTIFY_SOCKET` is set, tell systemd the daemon is
//! serving and, later, that it is stopping. Without the variable these do nothing. Failures are
//! logged, never fatal: a daemon that cannot reach systemd still serves.

use sd_notify::NotifyState;

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
