//! Every setting, declared once, and the configuration read from them.
//!
//! A setting is a [`Setting`] in `declared/` (its variable, flag, default, form and meaning).
//! From the declarations come the command line's flags and `--help` (`clap_args.rs`), the
//! `*_FILE` variables of secrets (`secret_files.rs`), README's configuration table (`docs.rs`),
//! every part's `Default`, and the check of each single value ([`Values`]' typed readers).
//! [`Config`] is read from [`Values`] part by part (`read.rs`), then the rules between two
//! settings are checked (`rules.rs`). Every refusal is a [`ConfigError`] naming the setting the
//! operator wrote, quoting its value as written and as read, and saying the form it takes.
//!
//! Secrets (webhook secrets, API keys, the database URL's password, the admin tokens) are held
//! in [`Secret`] and never reach a log line, a `Debug` print or an error.
//!
//! [`Secret`]: sume_wire::Secret

pub mod clap_args;
mod database_routes;
pub mod declared;
pub mod docs;
mod forms;
mod lists;
mod model;
pub mod near_misses;
mod problems;
mod read;
mod rules;
pub mod secret_files;
pub mod setting;
mod traces;
pub mod values;

pub use database_routes::{DatabaseRoutes, Pooler};
pub use forms::*;
pub use lists::*;
pub use model::*;
pub use read::*;
pub use setting::{Form, Setting};
pub use traces::{traces, traces_from_env};
pub use values::{Source, Values};

use std::time::Duration;

use sume_wire::Secret;

/// A setting that is missing or malformed, or two that cannot work together. The message names
/// the setting; it never holds a secret. Where the start found more than one problem at once,
/// the others are in `also`, each shown on a line of its own.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The setting's name as the user sets it (`WEBHOOK_TOLERANCE`, `--older-than`).
    pub name: &'static str,
    /// What is wrong with it, and the form that would work.
    pub problem: String,
    /// The other settings' problems found with this one, in the order they are declared.
    pub also: Vec<ConfigError>,
}

impl ConfigError {
    /// A problem with the setting `name`.
    pub fn new(name: &'static str, problem: impl Into<String>) -> Self {
        ConfigError {
            name,
            problem: problem.into(),
            also: Vec::new(),
        }
    }

    /// Every problem, this one first: one error each, without their `also`.
    pub fn each(&self) -> Vec<ConfigError> {
        std::iter::once(ConfigError::new(self.name, self.problem.clone()))
            .chain(self.also.iter().flat_map(ConfigError::each))
            .collect()
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.problem)?;
        for other in &self.also {
            write!(f, "\n{other}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// A named Sume API key. The name is what `sume.jobs.api_key` holds; the key never leaves
/// memory except in an `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The name jobs carry (`sume.jobs.api_key`) and logs and metrics use.
    pub name: String,
    /// The key itself.
    pub key: Secret,
}

/// A number of requests per time window, e.g. `100/1m`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Requests...
    pub count: u32,
    /// ...per this window.
    pub per: Duration,
}

impl Rate {
    /// The rate as requests a second.
    pub fn per_second(&self) -> f64 {
        self.count as f64 / self.per.as_secs_f64()
    }

    /// The fleet's bucket of this rate holds a tenth of its count (at least 1): the most reads
    /// taken at once after a quiet while.
    pub fn burst(&self) -> f64 {
        (self.count as f64 / 10.0).floor().max(1.0)
    }

    /// The most reads the fleet may take within one minute: a full bucket, and a minute's
    /// refill.
    pub fn most_in_a_minute(&self) -> f64 {
        self.burst() + self.per_second() * 60.0
    }
}

/// An `http://` API URL is refused unless it points at this machine or plaintext is allowed
/// explicitly: every status request carries an API key.
pub fn check_plaintext(api_url: &str, allowed: bool) -> Result<(), ConfigError> {
    let Ok(url) = url::Url::parse(api_url) else {
        return Ok(()); // parse_http_url has refused it already
    };
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if url.scheme() == "http" && !loopback && !allowed {
        return Err(ConfigError::new(
            "SUME_API_URL",
            format!(
                "{api_url} is plain http to another host: the API keys would travel in clear; use https, or set SUME_API_ALLOW_PLAINTEXT=1 for a private network"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
