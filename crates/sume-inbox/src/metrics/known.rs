//! The series that exist from the start, at 0: every label set of a counter that an alert
//! (`deploy/prometheus/alerts.yml`) or README's advice reads with `increase()` or `rate()`.
//!
//! A series made at its first count appears already at 1, and `increase()` reads no increase
//! from a series' first sample: the first unknown status, misrouted webhook, 402 or delivery
//! verified by a retired secret would never fire its alert. So every label value of a closed
//! set is made here, and of the open ones (a key's name, an HTTP code) those the configuration
//! holds or the alerts name.

use std::hash::Hash;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::{
    ApiLabels, ClosedLabels, LingerEnd, LingerLabels, Metrics, OutcomeLabels, ProtocolLabels,
    ReadLabels, ReadWay, RecheckLabels, RecheckOutcome, RefusedProtocol, SecretLabels,
    StatusSource, StatusSourceLabels, TimeoutKind, TimeoutLabels, WebhookOutcome,
};

impl Metrics {
    /// Every metric at zero as [`Metrics::new`], with the series of this instance's settings
    /// made at 0 as well: the position of each of its `secrets` webhook secrets, and each of
    /// its API `keys` with the codes the alerts name.
    pub fn for_instance<'a>(secrets: usize, keys: impl IntoIterator<Item = &'a str>) -> Metrics {
        let m = Metrics::new();
        for index in 0..secrets {
            let secret = index.to_string();
            zero(&m.webhooks_by_secret, &SecretLabels { secret });
        }
        for key in keys {
            for code in ApiLabels::ALERTED {
                let labels = ApiLabels {
                    key: key.to_owned(),
                    code: code.to_owned(),
                };
                zero(&m.sume_requests, &labels);
                if ApiLabels::REFUSED.contains(&code) {
                    zero(&m.sume_refused, &labels);
                }
            }
        }
        m
    }

    /// Makes, at 0, the series of every label value known without the settings, and records
    /// the start (the time every counter stood at 0).
    pub(super) fn count_from_zero(&self) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH);
        self.start_time_seconds
            .set(now.map_or(0.0, |d| d.as_secs_f64()));
        for outcome in WebhookOutcome::ALL {
            zero(&self.webhooks, &OutcomeLabels { outcome });
        }
        for source in StatusSource::ALL {
            zero(&self.unknown_statuses, &StatusSourceLabels { source });
        }
        for by in ClosedLabels::BY {
            zero(&self.jobs_closed, &ClosedLabels { by: by.to_owned() });
        }
        for outcome in RecheckOutcome::ALL {
            zero(&self.give_up_rechecks, &RecheckLabels { outcome });
        }
        for way in ReadWay::ALL {
            zero(&self.sume_reads, &ReadLabels { way });
        }
        for kind in TimeoutKind::ALL {
            zero(&self.port_timeouts, &TimeoutLabels { kind });
            zero(&self.admin_port.timeouts, &TimeoutLabels { kind });
        }
        for by in LingerEnd::ALL {
            zero(&self.port_lingers, &LingerLabels { by });
            zero(&self.admin_port.lingers, &LingerLabels { by });
        }
        for protocol in RefusedProtocol::ALL {
            zero(&self.port_protocols_refused, &ProtocolLabels { protocol });
            zero(
                &self.admin_port.protocols_refused,
                &ProtocolLabels { protocol },
            );
        }
    }
}

/// Makes the series of `labels` in `family` at 0 (a family makes a series when first asked
/// for it).
fn zero<S: Clone + Eq + Hash>(family: &Family<S, Counter>, labels: &S) {
    let _made = family.get_or_create(labels);
}
