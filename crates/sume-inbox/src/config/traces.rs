//! OTEL_* read as OpenTelemetry defines them, from the environment only and before the runtime
//! starts (as logging is). Every one is checked at start, whether export is on or not: a typo
//! in the sampler does not wait for the day an endpoint is set to stop a start. Export is on when
//! an endpoint is set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as written, else
//! OTEL_EXPORTER_OTLP_ENDPOINT's `/v1/traces`), unless OTEL_SDK_DISABLED or
//! OTEL_TRACES_EXPORTER=none turns it off. What this build cannot do (another exporter, gRPC or
//! JSON, compression) is refused rather than ignored, and so is a header the SDK would drop.

use super::declared::*;
use super::model::{Traces, TracesConfig};
use super::setting::Setting;
use super::values::Values;
use super::ConfigError;
use std::time::Duration;

/// OTEL_* from the environment.
pub fn traces_from_env() -> Result<Traces, ConfigError> {
    traces(&Values::from_env(TRACES.settings)?)
}

/// OTEL_* as read from `v`.
pub fn traces(v: &Values) -> Result<Traces, ConfigError> {
    let disabled = v.choice(&OTEL_SDK_DISABLED)? == "true";
    let exporter = v.choice(&OTEL_TRACES_EXPORTER)?;
    let endpoint = endpoint(v)?;
    for (setting, only, why) in [
        (&OTEL_EXPORTER_OTLP_PROTOCOL, "http/protobuf", PROTOCOL),
        (
            &OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
            "http/protobuf",
            PROTOCOL,
        ),
        (&OTEL_EXPORTER_OTLP_COMPRESSION, "none", COMPRESSION),
        (&OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, "none", COMPRESSION),
    ] {
        only_value(v, setting, only, why)?;
    }
    v.named(check_headers(v, &OTEL_EXPORTER_OTLP_HEADERS))?;
    v.named(check_headers(v, &OTEL_EXPORTER_OTLP_TRACES_HEADERS))?;
    let service_name = v.text(&OTEL_SERVICE_NAME).unwrap_or_default().trim();
    if service_name.is_empty() {
        return Err(ConfigError::new(OTEL_SERVICE_NAME.name, "is empty"));
    }
    let sampler = v.choice(&OTEL_TRACES_SAMPLER)?;
    let ratio = ratio(v)?;
    let timeout = timeout(v)?;
    let resource = resource_attributes(v.text(&OTEL_RESOURCE_ATTRIBUTES).unwrap_or(""))?;
    let because = if disabled {
        Some("OTEL_SDK_DISABLED=true")
    } else if exporter == "none" {
        Some("OTEL_TRACES_EXPORTER=none")
    } else {
        None
    };
    Ok(match (because, endpoint) {
        (None, Some((traces_url, endpoint_setting))) => Traces::On(TracesConfig {
            traces_url,
            endpoint_setting,
            service_name: service_name.to_owned(),
            sampler,
            ratio,
            resource,
            timeout,
        }),
        (because, _) => Traces::Off { because },
    })
}

/// Why another protocol is refused.
const PROTOCOL: &str = "this build sends spans over HTTP as protobuf only (no gRPC, no \
                        http/json): write http/protobuf, or leave it unset";

/// Why compression is refused.
const COMPRESSION: &str = "this build sends spans uncompressed (it has no gzip): write none, or \
                           leave it unset";

/// The URL spans go to, with the variable it comes from: the traces' own endpoint as written,
/// else the base endpoint's `/v1/traces` (both checked, whichever is used).
fn endpoint(v: &Values) -> Result<Option<(String, &'static str)>, ConfigError> {
    let base = v.optional_http_url(&OTEL_EXPORTER_OTLP_ENDPOINT)?;
    let own = v.optional_url_as_written(&OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)?;
    Ok(match (own, base) {
        (Some(url), _) => Some((url, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.name)),
        (None, Some(base)) => Some((
            format!("{base}/v1/traces"),
            OTEL_EXPORTER_OTLP_ENDPOINT.name,
        )),
        (None, None) => None,
    })
}

/// A setting this build takes one value of (any case), or leaves unset.
fn only_value(v: &Values, s: &'static Setting, only: &str, why: &str) -> Result<(), ConfigError> {
    match v.text(s) {
        Some(raw) if !raw.trim().eq_ignore_ascii_case(only) => Err(ConfigError::new(
            s.name,
            format!("{raw:?} is not supported: {why}"),
        )),
        _ => Ok(()),
    }
}

/// OTEL_TRACES_SAMPLER_ARG: a ratio from 0 to 1, 1 when unset.
fn ratio(v: &Values) -> Result<f64, ConfigError> {
    match v.text(&OTEL_TRACES_SAMPLER_ARG).map(str::trim) {
        None | Some("") => Ok(1.0),
        Some(raw) => match raw.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
            _ => Err(ConfigError::new(
                OTEL_TRACES_SAMPLER_ARG.name,
                format!("{raw:?} is not a ratio from 0 to 1 (such as 0.25)"),
            )),
        },
    }
}

/// OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, else OTEL_EXPORTER_OTLP_TIMEOUT: whole milliseconds from 1
/// to 600,000, 10 s when neither is set. Both are checked. The SDK would read them itself and
/// drop a value it cannot read without a word; the one taken is given to it.
fn timeout(v: &Values) -> Result<Duration, ConfigError> {
    let read = |s: &'static Setting| {
        match v.text(s).map(str::trim) {
        None | Some("") => Ok(None),
        Some(raw) => match raw.parse::<u64>() {
            Ok(ms) if (1..=600_000).contains(&ms) => Ok(Some(Duration::from_millis(ms))),
            _ => Err(ConfigError::new(
                s.name,
                format!("{raw:?} is not a timeout in whole milliseconds from 1 to 600000 (such as 10000)"),
            )),
        },
    }
    };
    let base = read(&OTEL_EXPORTER_OTLP_TIMEOUT)?;
    let own = read(&OTEL_EXPORTER_OTLP_TRACES_TIMEOUT)?;
    Ok(own.or(base).unwrap_or(Duration::from_secs(10)))
}

/// OTEL_EXPORTER_OTLP_HEADERS (or its traces' own): `name=value` items separated by commas,
/// each value percent-decoded, as the SDK reads them. The SDK drops an item it cannot read
/// without a word (a collector then refuses every export for want of its key), so one is
/// refused here, by its position: a value, often a secret, is never quoted, nor an item
/// without `=` (it may be a value alone) or a name that is no header's (it may hold one).
fn check_headers(v: &Values, s: &'static Setting) -> Result<(), ConfigError> {
    let Some(raw) = v.text(s) else {
        return Ok(());
    };
    for (i, item) in raw.split(',').enumerate() {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let bad = |why: String| {
            ConfigError::new(
                s.name,
                format!(
                    "item {} {why}: write name=value items separated by commas, each value \
                     percent-encoded (such as api-key=KEY,Authorization=Bearer%20TOKEN)",
                    i + 1
                ),
            )
        };
        let Some((name, value)) = item.split_once('=') else {
            return Err(bad("is not name=value".into()));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("has no name before its =".into()));
        }
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(bad(
                "has a name that is not a header's (letters, digits and -)".into(),
            ));
        }
        let Some(value) = percent_decoded(value.trim()) else {
            return Err(bad(format!(
                "({name}) has a % not followed by two hex digits, or encodes what is not UTF-8"
            )));
        };
        if value.is_empty() {
            return Err(bad(format!("({name}) has an empty value")));
        }
        // Printable ASCII only: `HeaderValue` takes a tab and any byte past ASCII (an accented
        // letter's UTF-8), which the exporter then sends as no collector reads it, or drops.
        if !value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(bad(format!(
                "({name}) has a value a header cannot carry (a control character such as a tab, \
                 or a character outside printable ASCII such as an accented letter, written \
                 as is or percent-encoded)"
            )));
        }
    }
    Ok(())
}

/// `text` with each `%XX` decoded; `None` when a `%` is not followed by two hex digits or the
/// bytes are not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `key=value,key=value`, each part percent-decoded (OpenTelemetry's resource format). An
/// item that does not read (no `=`, no key, a `%` not followed by two hex digits) is refused
/// by its position, rather than dropped or kept half-decoded as the SDK would.
fn resource_attributes(raw: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut pairs = Vec::new();
    for (i, item) in raw.split(',').map(str::trim).enumerate() {
        if item.is_empty() {
            continue;
        }
        let bad = |why: &str| {
            ConfigError::new(
                OTEL_RESOURCE_ATTRIBUTES.name,
                format!(
                    "item {} ({item:?}) {why}: write key=value items separated by commas, each \
                     part percent-encoded (such as deployment.environment=prod,team=a%2Cb)",
                    i + 1
                ),
            )
        };
        let Some((key, value)) = item.split_once('=') else {
            return Err(bad("is not key=value"));
        };
        let (Some(key), Some(value)) = (percent_decoded(key), percent_decoded(value)) else {
            return Err(bad(
                "has a % not followed by two hex digits, or encodes what is not UTF-8",
            ));
        };
        if key.trim().is_empty() {
            return Err(bad("has no key before its ="));
        }
        pairs.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    Ok(pairs)
}

#[cfg(test)]
#[path = "traces_tests.rs"]
mod tests;
