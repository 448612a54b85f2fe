//! Traces: OpenTelemetry's standard variables, read from the environment only (as every
//! OpenTelemetry SDK reads them). Export is off unless OTEL_EXPORTER_OTLP_ENDPOINT or
//! OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; each is checked at start whether export is on or
//! not, and what this build cannot do (gRPC, compression, another exporter) stops the start.

use super::declare;
use crate::config::setting::{Form, Setting};

declare! { TRACES, "Traces (OpenTelemetry)",
    /// Where spans are sent; unset: no export.
    OTEL_EXPORTER_OTLP_ENDPOINT {
        form: Form::HttpUrl { example: "http://127.0.0.1:4318" },
        about: "an OTLP/HTTP collector's base URL (e.g. `http://127.0.0.1:4318`; spans go to its `/v1/traces`, protobuf); unset, and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT unset too: no traces are made or exported (environment only, `serve`)",
    }
    /// Where spans are sent, as written; before OTEL_EXPORTER_OTLP_ENDPOINT.
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT {
        form: Form::HttpUrl { example: "http://127.0.0.1:4318/v1/traces" },
        about: "the URL spans are sent to, used as written (no `/v1/traces` added, e.g. `http://127.0.0.1:4318/v1/traces`); when set it is used rather than OTEL_EXPORTER_OTLP_ENDPOINT, and alone turns export on (environment only, `serve`)",
    }
    /// Export off whatever else is set; `true` or `false` only, as OpenTelemetry reads it.
    OTEL_SDK_DISABLED {
        default: Some("false"),
        form: Form::Choice(&["true", "false"]),
        about: "`true` (any case): no traces are made or exported, whatever else is set (an INFO line at start says so); only `true` and `false` are taken, as OpenTelemetry reads them: `yes`, `1` or any other stops the start (environment only)",
    }
    /// The exporter: OTLP, or none.
    OTEL_TRACES_EXPORTER {
        default: Some("otlp"),
        form: Form::Choice(&["otlp", "none"]),
        about: "`otlp` exports to the endpoint; `none`: no traces are made or exported (an INFO line at start says so); any other exporter (`zipkin`, `console`) stops the start (environment only)",
    }
    /// The OTLP protocol: HTTP with protobuf only.
    OTEL_EXPORTER_OTLP_PROTOCOL {
        default: Some("http/protobuf"),
        form: Form::Choice(&["http/protobuf"]),
        about: "only `http/protobuf` is taken: `grpc`, `http/json` or any other stops the start (environment only)",
    }
    /// The same, for spans only.
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL {
        default_note: Some("OTEL_EXPORTER_OTLP_PROTOCOL"),
        form: Form::Choice(&["http/protobuf"]),
        about: "the same, for spans only: only `http/protobuf` is taken (environment only)",
    }
    /// Compression of the exports: none.
    OTEL_EXPORTER_OTLP_COMPRESSION {
        default: Some("none"),
        form: Form::Choice(&["none"]),
        about: "only `none` is taken (spans are sent uncompressed): `gzip` or any other stops the start (environment only)",
    }
    /// The same, for spans only.
    OTEL_EXPORTER_OTLP_TRACES_COMPRESSION {
        default_note: Some("OTEL_EXPORTER_OTLP_COMPRESSION"),
        form: Form::Choice(&["none"]),
        about: "the same, for spans only: only `none` is taken (environment only)",
    }
    /// Headers of every export (a collector's credentials).
    OTEL_EXPORTER_OTLP_HEADERS {
        form: Form::Headers,
        secret: true,
        about: "headers sent with every export, `name=value,name=value`, each value percent-encoded (e.g. `Authorization=Bearer%20TOKEN`): where a collector's credentials go; an item that does not read (no `=`, an empty name or value, a character a header cannot carry) stops the start, named by its position, never its value (environment only)",
    }
    /// The same, for spans only.
    OTEL_EXPORTER_OTLP_TRACES_HEADERS {
        form: Form::Headers,
        secret: true,
        about: "the same, for spans only; when set, used rather than OTEL_EXPORTER_OTLP_HEADERS (environment only)",
    }
    /// How long one export may take.
    OTEL_EXPORTER_OTLP_TIMEOUT {
        default_note: Some("10000"),
        form: Form::Text,
        about: "how long one export of spans may take, in milliseconds as OpenTelemetry writes it (`10000`, from 1 to 600000); anything else stops the start (environment only)",
    }
    /// The same, for spans only.
    OTEL_EXPORTER_OTLP_TRACES_TIMEOUT {
        form: Form::Text,
        about: "the same, for spans only; when set, used rather than OTEL_EXPORTER_OTLP_TIMEOUT (environment only)",
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
        about: "which traces are kept, as OpenTelemetry spells it (environment only; checked at start even with export off); the ratio ones take OTEL_TRACES_SAMPLER_ARG",
    }
    /// The ratio of the ratio samplers.
    OTEL_TRACES_SAMPLER_ARG {
        default_note: Some("1.0"),
        form: Form::Text,
        about: "the share of traces kept by `traceidratio` and `parentbased_traceidratio`, from 0 to 1 (environment only; checked at start even with export off)",
    }
    /// Resource attributes.
    OTEL_RESOURCE_ATTRIBUTES {
        form: Form::Text,
        about: "more resource attributes, `key=value,key=value` (e.g. `deployment.environment=prod`), percent-encoded as OpenTelemetry specifies; an item that does not read (no `=`, no key, a `%` not followed by two hex digits) stops the start, named by its position (environment only)",
    }
}
