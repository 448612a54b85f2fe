//! Stopping on a signal: SIGTERM (what `systemctl stop`, Docker and Kubernetes send) or SIGINT
//! (Ctrl-C). Shared by the daemon and the development tools' long-running commands.

/// Resolves when SIGTERM or SIGINT arrives (only Ctrl-C where SIGTERM cannot be watched).
pub async fn terminated() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "cannot watch SIGTERM");
                    let _ = ctrl_c.await;
                    tracing::info!("shutting down");
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}
