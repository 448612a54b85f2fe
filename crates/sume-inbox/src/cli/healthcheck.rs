//! `sume-inbox healthcheck`: asks the local daemon's `/healthz` (or `/readyz`), for container
//! health checks in images that have no HTTP client.

use clap::Args;

use super::CliError;
use crate::config::clap_args::{scopes, SettingArgs};

/// `healthcheck`'s settings.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// Check readiness (database, schema, tasks) instead of liveness.
    #[arg(long)]
    pub ready: bool,
    /// LISTEN_ADDR: the daemon's; an unspecified address (0.0.0.0) is reached on loopback.
    #[command(flatten)]
    pub settings: SettingArgs<scopes::Healthcheck>,
}

/// Exits 0 when the daemon on LISTEN_ADDR answers 2xx within 3 seconds.
pub async fn healthcheck(args: HealthcheckArgs) -> Result<(), CliError> {
    let addr = crate::config::local_listen_addr(args.settings.values())?;
    let path = if args.ready { "readyz" } else { "healthz" };
    let url = format!("http://{addr}/{path}");
    let fail =
        |e: reqwest::Error| CliError::Failed(format!("GET {url}: {}", sume_wire::error_chain(&e)));
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
    super::print(&format!("{path}: {body}\n"))
}
