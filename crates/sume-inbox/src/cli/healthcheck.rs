//! `sume-inbox healthcheck`: asks the local daemon's `/healthz` (or `/readyz`), for container
//! health checks in images that have no HTTP client.

use clap::Args;

use super::CliError;
use crate::config;

/// `healthcheck`'s settings.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// The daemon's LISTEN_ADDR; an unspecified address (0.0.0.0) is reached on loopback.
    #[arg(long, env = "LISTEN_ADDR", default_value = "0.0.0.0:8080")]
    pub listen_addr: String,
    /// Check readiness (database, schema, tasks) instead of liveness.
    #[arg(long)]
    pub ready: bool,
}

/// Exits 0 when the daemon on LISTEN_ADDR answers 2xx within 3 seconds.
pub async fn healthcheck(args: HealthcheckArgs) -> Result<(), CliError> {
    let mut addr = config::parse_addr("LISTEN_ADDR", &args.listen_addr)?;
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    let path = if args.ready { "readyz" } else { "healthz" };
    let url = format!("http://{addr}/{path}");
    let fail = |e: reqwest::Error| CliError::Failed(format!("GET {url}: {e}"));
    let response = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .build()
        .map_err(fail)?
        .get(&url)
        .send()
        .await
        .map_err(fail)?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(CliError::Failed(format!("{path}: {status} {body}")));
    }
    println!("{path}: {body}");
    Ok(())
}
