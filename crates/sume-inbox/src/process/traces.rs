//! Traces: optional OTLP export (HTTP/protobuf) of the daemon's spans, set up with the logger
//! when an endpoint is set and export is not turned off (see [`crate::config::Traces`];
//! [`install`]). Off (the default), no layer is
//! installed and `span!` makes no span at all ([`tracing::Span::none`]), so the code paths
//! that name spans cost one relaxed load.
//!
//! The spans: a delivery on the public port (`delivery`, with its header checks, body read,
//! verification and wait for its batch as children), the ingest transaction that commits it
//! (`inbox commit`, linked to every delivery it carries), each attach transaction
//! (`attach`), each poll and inbox check of the sweep with each status read (`sume status
//! read`: the key's name, Sume's answer, the request id Sume sent), and each close (`close`,
//! with `sume.job_id`, `sume.event_id`, linked to the delivery that closed it when it came
//! through this instance, and to the trace of the application's `POST /v1/jobs` when that
//! request carried a `traceparent`, stored with the job).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing::Span;
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::config::{ConfigError, TracesConfig};

/// The target every traced span is made under: the exporter's layer takes these only.
pub const TARGET: &str = "sume_inbox::traces";

static ON: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (export on, and the layer installed).
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// An INFO span under [`TARGET`] when export is on; [`tracing::Span::none`] otherwise. A number
/// field must be an `i64` (see [`int`]) to be exported as a number.
macro_rules! span {
    ($($arg:tt)*) => {
        if $crate::process::traces::on() {
            ::tracing::info_span!(target: "sume_inbox::traces", $($arg)*)
        } else {
            ::tracing::Span::none()
        }
    };
}
pub(crate) use span;

/// A count as a span attribute: an integer, as OpenTelemetry's conventions have it
/// (`tracing-opentelemetry` exports a `u64` or `usize` field as its text; an `i64` as a number).
pub fn int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The running export: shut it down at exit ([`Exporting::shutdown`]) to send what is queued.
pub struct Exporting {
    provider: SdkTracerProvider,
}

impl Exporting {
    /// Flushes the queued spans and stops the exporter, waiting at most `wait` (a collector
    /// that does not answer does not hold the exit longer).
    pub fn shutdown(self, wait: Duration) {
        let (done, finished) = std::sync::mpsc::channel();
        let provider = self.provider;
        std::thread::spawn(move || {
            let _ = done.send(provider.shutdown_with_timeout(wait));
        });
        match finished.recv_timeout(wait + Duration::from_secs(1)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "traces: the last spans were not all sent"),
            Err(_) => tracing::warn!("traces: the exporter did not stop in time; spans dropped"),
        }
    }
}

/// The variables of compression, which the SDK reads itself: read and checked with the rest
/// (`none` is all this build takes), then removed before the exporter is built, as the SDK
/// takes no `none` and would refuse its start for it.
const COMPRESSION: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
];

/// The exporter's layer (spans of [`TARGET`] only) and its handle; turns [`on`] on. Call before
/// any thread starts (it removes the compression variables from the environment).
pub fn install<S>(
    config: &TracesConfig,
) -> Result<(impl Layer<S> + Send + Sync + 'static, Exporting), ConfigError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync + 'static,
{
    for name in COMPRESSION {
        std::env::remove_var(name);
    }
    // The endpoint given here is used as it is: the SDK then reads neither endpoint variable.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(config.traces_url.clone())
        .with_timeout(config.timeout)
        .build()
        .map_err(|e| {
            ConfigError::new(
                config.endpoint_setting,
                format!("cannot start the exporter: {e}"),
            )
        })?;
    let resource = Resource::builder_empty()
        .with_attributes(
            config
                .resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_service_name(config.service_name.clone())
        .build();
    let exporter = super::trace_export::Reporting::new(
        exporter,
        config.traces_url.clone(),
        config.endpoint_setting,
    );
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler(config))
        .with_resource(resource)
        .build();
    let tracer: SdkTracer = provider.tracer("sume-inbox");
    let layer: OpenTelemetryLayer<S, SdkTracer> = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        .with_location(false)
        .with_threads(false);
    let layer = layer.with_filter(Targets::new().with_target(TARGET, tracing::Level::INFO));
    ON.store(true, Ordering::Relaxed);
    Ok((layer, Exporting { provider }))
}

fn sampler(config: &TracesConfig) -> Sampler {
    let ratio = Sampler::TraceIdRatioBased(config.ratio);
    match config.sampler {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => ratio,
        "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        "parentbased_traceidratio" => Sampler::ParentBased(Box::new(ratio)),
        _ => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
    }
}

/// The span's OpenTelemetry context, when export is on and the span is recorded. Starts the
/// span: add its links first.
pub fn context_of(span: &Span) -> Option<SpanContext> {
    if !on() || span.is_none() {
        return None;
    }
    let cx = span.context().span().span_context().clone();
    cx.is_valid().then_some(cx)
}

/// Links `span` to `to` (before the span is first entered).
pub fn link(span: &Span, to: &SpanContext) {
    if on() {
        span.add_link(to.clone());
    }
}

/// The part of a valid `traceparent` worth keeping: its first 55 characters
/// (version-traceid-parentid-flags), what W3C Trace Context reads of a later version, whose
/// further fields are ignored; `None` when it is not valid.
pub fn kept_traceparent(value: &str) -> Option<&str> {
    parse_traceparent(value)?;
    value.trim().get(..55)
}

/// A W3C `traceparent` (`00-{trace id}-{parent id}-{flags}`), as a context to link to; `None`
/// when it is not one (the header is then ignored, as W3C Trace Context says).
pub fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(parent, 16) || !hex(flags, 2)
    {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()? & 1;
    let cx = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(parent).ok()?,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    cx.is_valid().then_some(cx)
}

/// The most deliveries remembered for their close's link.
const DELIVERIES_KEPT: usize = 10_000;

/// Deliveries received here, by event id, until their close links to them (or, past
/// [`DELIVERIES_KEPT`], the oldest are forgotten). Only used while export is on.
static DELIVERIES: Mutex<Option<Deliveries>> = Mutex::new(None);

#[derive(Default)]
struct Deliveries {
    by_event: HashMap<String, SpanContext>,
    order: VecDeque<String>,
}

/// Remembers the delivery span of `event_id`, for the close it causes.
pub fn delivered(event_id: &str, delivery: SpanContext) {
    let mut kept = DELIVERIES.lock().unwrap_or_else(|p| p.into_inner());
    let kept = kept.get_or_insert_with(Deliveries::default);
    if kept.by_event.len() >= DELIVERIES_KEPT {
        if let Some(oldest) = kept.order.pop_front() {
            kept.by_event.remove(&oldest);
        }
    }
    if kept
        .by_event
        .insert(event_id.to_owned(), delivery)
        .is_none()
    {
        kept.order.push_back(event_id.to_owned());
    }
}

fn delivery_of(event_id: &str) -> Option<SpanContext> {
    let mut kept = DELIVERIES.lock().unwrap_or_else(|p| p.into_inner());
    kept.as_mut()?.by_event.remove(event_id)
}

/// One job closed (after its transaction committed): a `close` span, child of the current
/// span, linked to the delivery of `event_id` if it came through here and to the
/// application's `traceparent` of its registration.
pub fn closed(job_id: &str, event_id: Option<&str>, by: &str, traceparent: Option<&str>) {
    if !on() {
        return;
    }
    let span = span!(
        "close",
        otel.name = "close",
        sume.job_id = job_id,
        sume.event_id = event_id,
        sume.closed_by = by,
    );
    if let Some(delivery) = event_id.and_then(delivery_of) {
        span.add_link_with_attributes(delivery, vec![KeyValue::new("sume.link", "delivery")]);
    }
    if let Some(app) = traceparent.and_then(parse_traceparent) {
        span.add_link_with_attributes(app, vec![KeyValue::new("sume.link", "registration")]);
    }
    drop(span.entered());
}

#[cfg(test)]
mod tests {
    use super::parse_traceparent;

    #[test]
    fn traceparents_are_read_as_w3c_writes_them() {
        let cx = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .expect("valid");
        assert_eq!(
            cx.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(cx.span_id().to_string(), "00f067aa0ba902b7");
        assert!(cx.is_sampled() && cx.is_remote());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_is_kept_as_its_first_55_characters() {
        let head = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let long = format!("{head}-{}", "z".repeat(100));
        assert_eq!(super::kept_traceparent(&long), Some(head));
        assert_eq!(super::kept_traceparent(&format!(" {head} ")), Some(head));
        assert_eq!(super::kept_traceparent("cc-x"), None);
    }
}
