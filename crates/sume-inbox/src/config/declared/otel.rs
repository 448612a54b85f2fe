//! Traces: OpenTelemetry's standard variables, read from the environment only (as every
//! OpenTelemetry SDK reads them). Export is off unless OTEL_EXPORTER_OTLP_ENDPOINT is set.

use super::declare;
use crate::config::setting::{Form, Setting};

declare! { TRACES, "Traces (OpenTelemetry)",
    /// Where spans are sent; unset: no export.
    OTEL_EXPORTER_OTLP_ENDPOINT {
        form: Form::HttpUrl { example: "http://127.0.0.1:4318" },
        about: "an OTLP/HTTP collector's base URL (e.g. `http://127.0.0.1:4318`; spans go to its `/v1/traces`, protobuf); unset: no traces are made or exported (environment only, `serve`)",
    }
    /// The `service.name` resource attribute.
    OTEL_SERVICE_NAME {
        default: Some("sume-inbox"),
        form: Form::Text,
        about: "the `service.name` the spans carry (environment only)",
    }
    /// Which traces are kept.
    OTEL_TRACES_SAMPLER {
        default: Some("parentbased_always_on"),
        form: Form::Choice(&[
            "always_on",
            "always_off",
            "traceidratio",
            "parentbased_always_on",
            "parentbased_always_off",
            "parentbased_traceidratio",
        ]),
        about: "which traces are kept, as OpenTelemetry spells it (environment only); the ratio ones take OTEL_TRACES_SAMPLER_ARG",
    }
    /// The ratio of the ratio samplers.
    OTEL_TRACES_SAMPLER_ARG {
        default_note: Some("1.0"),
        form: Form::Text,
        about: "the share of traces kept by `traceidratio` and `parentbased_traceidratio`, from 0 to 1 (environment only)",
    }
    /// Resource attributes.
    OTEL_RESOURCE_ATTRIBUTES {
        form: Form::Text,
        about: "more resource attributes, `key=value,key=value` (e.g. `deployment.environment=prod`), percent-encoded as OpenTelemetry specifies (environment only)",
    }
}
