//! systemd readiness (`Type=notify`): when `NOTIFY_SOCKET` is set, tell systemd the daemon is
//! serving (`READY=1`) and, later, that it is stopping (`STOPPING=1`). Without the variable
//! these do nothing.

use std::os::unix::net::UnixDatagram;

/// Sends `state` to the notification socket, if there is one. Failures are logged, never
/// fatal: a daemon that cannot reach systemd still serves.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let result = (|| {
        let socket = UnixDatagram::unbound()?;
        let bytes = path.as_encoded_bytes();
        if let Some(name) = bytes.strip_prefix(b"@") {
            // An abstract socket (Linux).
            #[cfg(target_os = "linux")]
            {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                socket.send_to_addr(state.as_bytes(), &addr)?;
            }
            #[cfg(not(target_os = "linux"))]
            let _ = name;
        } else {
            socket.send_to(state.as_bytes(), &path)?;
        }
        Ok::<(), std::io::Error>(())
    })();
    if let Err(e) = result {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}
