//! The OTLP exporter, with its failures said in the log: the OpenTelemetry SDK is built without
//! its own logging, so a collector that cannot be reached (a wrong port, a refused request)
//! would drop every span without a word, and an operator who set `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) would see no traces and no reason. A failed export is a WARN at most once a minute, with the
//! spans dropped since the last such line; the first export that succeeds after it, an INFO.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

use super::log_budget::LogBudget;

/// Failed exports are logged at most this often.
static FAILURES_LOG: LogBudget = LogBudget::new(1, Duration::from_secs(60));

/// An exporter whose failed exports are logged.
#[derive(Debug)]
pub struct Reporting<E> {
    inner: E,
    /// Where the spans go, for the log line.
    endpoint: String,
    /// The variable that said so.
    setting: &'static str,
    failing: AtomicBool,
    dropped: AtomicU64,
}

impl<E> Reporting<E> {
    /// `inner`, sending to `endpoint`, set by the variable `setting`.
    pub fn new(inner: E, endpoint: String, setting: &'static str) -> Reporting<E> {
        Reporting {
            inner,
            endpoint,
            setting,
            failing: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        }
    }

    /// Records one export's outcome, of `spans` spans.
    fn observe(&self, outcome: &OTelSdkResult, spans: u64) {
        match outcome {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    let dropped = self.dropped.swap(0, Ordering::Relaxed);
                    tracing::info!(endpoint = %self.endpoint, dropped, "traces: spans are sent again");
                }
            }
            Err(e) => {
                self.failing.store(true, Ordering::Relaxed);
                let dropped = self.dropped.fetch_add(spans, Ordering::Relaxed) + spans;
                if FAILURES_LOG.allow().is_some() {
                    tracing::warn!(
                        endpoint = %self.endpoint,
                        error = %e,
                        dropped,
                        "traces: spans could not be sent to {} and were dropped",
                        self.setting
                    );
                }
            }
        }
    }
}

impl<E: SpanExporter> SpanExporter for Reporting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let outcome = self.inner.export(batch).await;
        self.observe(&outcome, spans);
        outcome
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource)
    }
}
