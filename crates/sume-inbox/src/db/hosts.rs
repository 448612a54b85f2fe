//! A URL's hosts one at a time: the driver tries every host of a URL such as
//! `postgres://u:p@a:5432,b:5432/db` (or `host=a,b`) in turn and answers only the last one's
//! failure, which hid an earlier host's refusal of who we are (a wrong password) behind a later
//! one's refused connection. Here each host is tried as the driver would, and each one's
//! failure kept ([`super::reach::unreachable_hosts`] says them all).

use rand::seq::SliceRandom;
use tokio_postgres::config::{Host, LoadBalanceHosts};

use super::tls::Target;

/// Host `i` of `config` and its port, as an operator names it: `db.example:5432` (its
/// `hostaddr` where it has no name).
pub(super) fn host_port(config: &tokio_postgres::Config, i: usize) -> String {
    let host = match (config.get_hosts().get(i), config.get_hostaddrs().get(i)) {
        (Some(Host::Tcp(name)), _) => name.clone(),
        (Some(Host::Unix(path)), _) => path.display().to_string(),
        (None, Some(addr)) => addr.to_string(),
        (None, None) => "?".into(),
    };
    let ports = config.get_ports();
    let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// How many hosts `config` names: by name, by address (`hostaddr`), or both.
pub(super) fn host_count(config: &tokio_postgres::Config) -> usize {
    config.get_hosts().len().max(config.get_hostaddrs().len())
}

/// The hosts tried and each one's failure, in the order tried.
pub type HostErrors = Vec<(String, tokio_postgres::Error)>;

/// A connection to the first host of `target` that takes one, tried in the URL's order (or at
/// random under `load_balance_hosts=random`), as the driver does; but where the driver answers
/// the last host's failure alone, every host's is kept. A URL of one host (or whose hosts and
/// ports do not pair up, which the driver refuses) is the driver's to connect.
pub(super) async fn each_host(target: &Target) -> Result<tokio_postgres::Client, HostErrors> {
    let config = &target.config;
    let (names, addrs) = (config.get_hosts().len(), config.get_hostaddrs().len());
    let hosts = host_count(config);
    let ports = config.get_ports().len();
    let paired = (names == 0 || addrs == 0 || names == addrs) && (ports <= 1 || ports == hosts);
    let one_at_a_time = hosts > 1 && paired;
    let mut order: Vec<usize> = (0..hosts).collect();
    if config.get_load_balance_hosts() == LoadBalanceHosts::Random {
        order.shuffle(&mut rand::thread_rng());
    }
    let mut errors = Vec::new();
    for i in order
        .into_iter()
        .take(if one_at_a_time { hosts } else { 1 })
    {
        let attempt = match one_at_a_time {
            true => only_host(config, i).connect(target.tls.clone()).await,
            false => config.connect(target.tls.clone()).await,
        };
        match attempt {
            Ok((client, connection)) => {
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "database connection ended");
                    }
                });
                return Ok(client);
            }
            Err(e) => errors.push((host_port(config, i), e)),
        }
    }
    Err(errors)
}

/// `config` naming host `i` alone (its name, address and port), every other setting as it is.
fn only_host(config: &tokio_postgres::Config, i: usize) -> tokio_postgres::Config {
    let mut one = tokio_postgres::Config::new();
    if let Some(user) = config.get_user() {
        one.user(user);
    }
    if let Some(password) = config.get_password() {
        one.password(password);
    }
    if let Some(dbname) = config.get_dbname() {
        one.dbname(dbname);
    }
    if let Some(options) = config.get_options() {
        one.options(options);
    }
    if let Some(name) = config.get_application_name() {
        one.application_name(name);
    }
    match config.get_hosts().get(i) {
        Some(Host::Tcp(name)) => one.host(name),
        Some(Host::Unix(path)) => one.host_path(path),
        None => &mut one,
    };
    if let Some(addr) = config.get_hostaddrs().get(i) {
        one.hostaddr(*addr);
    }
    let ports = config.get_ports();
    one.port(ports.get(i).or(ports.first()).copied().unwrap_or(5432))
        .ssl_mode(config.get_ssl_mode())
        .ssl_negotiation(config.get_ssl_negotiation())
        .keepalives(config.get_keepalives())
        .keepalives_idle(config.get_keepalives_idle())
        .target_session_attrs(config.get_target_session_attrs())
        .channel_binding(config.get_channel_binding())
        .load_balance_hosts(config.get_load_balance_hosts());
    if let Some(t) = config.get_connect_timeout() {
        one.connect_timeout(*t);
    }
    if let Some(t) = config.get_tcp_user_timeout() {
        one.tcp_user_timeout(*t);
    }
    if let Some(t) = config.get_keepalives_interval() {
        one.keepalives_interval(t);
    }
    if let Some(n) = config.get_keepalives_retries() {
        one.keepalives_retries(n);
    }
    one
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings `only_host` copies, by the names the driver's `Debug` of a config gives
    /// them, and the three it sets per host.
    const COPIED: &[&str] = &[
        "user",
        "password",
        "dbname",
        "options",
        "application_name",
        "ssl_mode",
        "host",
        "hostaddr",
        "port",
        "connect_timeout",
        "tcp_user_timeout",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_retries",
        "target_session_attrs",
        "channel_binding",
        "load_balance_hosts",
    ];

    /// The field names of the driver's `Debug` of a config: `Config { user: .., dbname: .. }`.
    fn field_names(config: &tokio_postgres::Config) -> Vec<String> {
        let text = format!("{config:?}");
        let inner = text
            .strip_prefix("Config { ")
            .and_then(|t| t.strip_suffix(" }"))
            .unwrap_or_else(|| panic!("the driver's Debug of a config changed shape: {text}"));
        let mut names = Vec::new();
        let mut depth = 0i32;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    names.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        names.push(&inner[start..]);
        names
            .iter()
            .map(|f| f.split(':').next().unwrap_or_default().trim().to_string())
            .collect()
    }

    /// A driver that gains a connection setting would have it dropped by `only_host`, which
    /// copies them one by one: an upgrade of the driver that adds one fails here until it is
    /// copied too.
    #[test]
    fn every_setting_the_driver_has_is_one_only_host_copies() {
        let names = field_names(&tokio_postgres::Config::new());
        let missed: Vec<&String> = names
            .iter()
            .filter(|n| !COPIED.contains(&n.as_str()))
            .collect();
        assert!(
            missed.is_empty(),
            "settings only_host does not copy: {missed:?}"
        );
        assert!(names.len() >= 15, "{names:?}");
    }

    /// Each host's config is the URL naming that host alone, every other setting kept.
    #[test]
    fn a_host_alone_keeps_every_other_setting_of_the_url() {
        let settings = "user=app password=pw dbname=inbox options=-cstatement_timeout=5s \
             application_name=inbox sslmode=disable connect_timeout=7 tcp_user_timeout=9 \
             keepalives=0 keepalives_idle=11 keepalives_interval=3 keepalives_retries=4 \
             target_session_attrs=read-write channel_binding=disable \
             load_balance_hosts=random";
        let both: tokio_postgres::Config = format!(
            "host=a,b hostaddr=10.0.0.1,10.0.0.2 \
             port=5433,5434 {settings}"
        )
        .parse()
        .expect("a valid URL");
        let second: tokio_postgres::Config =
            format!("host=b hostaddr=10.0.0.2 port=5434 {settings}")
                .parse()
                .expect("a valid URL");
        assert_eq!(format!("{:?}", only_host(&both, 1)), format!("{second:?}"));
        assert_eq!(host_port(&both, 1), "b:5434");
        assert_eq!(host_count(&both), 2);
    }
}
