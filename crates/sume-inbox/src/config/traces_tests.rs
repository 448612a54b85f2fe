//! OTEL_* as OpenTelemetry writes them: what turns export on and off, and what is refused.

use super::*;
use std::time::Duration;

fn values(given: &[(&'static Setting, &str)]) -> Values {
    given
        .iter()
        .fold(Values::defaults(), |v, (s, text)| v.with(s, text))
}

fn on(given: &[(&'static Setting, &str)]) -> TracesConfig {
    match traces(&values(given)).unwrap() {
        Traces::On(config) => config,
        off => panic!("{given:?}: {off:?}"),
    }
}

fn refused(given: &[(&'static Setting, &str)]) -> ConfigError {
    traces(&values(given)).expect_err("refused")
}

const ENDPOINT: (&Setting, &str) = (&OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318/");

/// Off unless an endpoint is set; each setting read as OpenTelemetry spells it.
#[test]
fn traces_are_read_as_opentelemetry_writes_them() {
    let off = traces(&Values::defaults()).unwrap();
    assert_eq!(off, Traces::Off { because: None });
    let read = on(&[
        ENDPOINT,
        (&OTEL_TRACES_SAMPLER, "ParentBased_TraceIdRatio"),
        (&OTEL_TRACES_SAMPLER_ARG, "0.25"),
        (
            &OTEL_RESOURCE_ATTRIBUTES,
            "deployment.environment=prod, team=a%2Cb",
        ),
        (&OTEL_TRACES_EXPORTER, "otlp"),
        (&OTEL_SDK_DISABLED, "false"),
        (&OTEL_EXPORTER_OTLP_PROTOCOL, "http/protobuf"),
        (&OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "HTTP/Protobuf"),
        (&OTEL_EXPORTER_OTLP_COMPRESSION, "none"),
        (&OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, "none"),
        (
            &OTEL_EXPORTER_OTLP_HEADERS,
            "api-key=k1, Authorization=Bearer%20t,",
        ),
    ]);
    assert_eq!(read.traces_url, "http://collector:4318/v1/traces");
    assert_eq!(read.endpoint_setting, "OTEL_EXPORTER_OTLP_ENDPOINT");
    assert_eq!(read.service_name, "sume-inbox");
    assert_eq!(read.sampler, "parentbased_traceidratio");
    assert_eq!(read.ratio, 0.25);
    let pairs = [("deployment.environment", "prod"), ("team", "a,b")];
    let pairs: Vec<(String, String)> = pairs.map(|(k, v)| (k.into(), v.into())).into();
    assert_eq!(read.resource, pairs);
    assert_eq!(read.timeout, Duration::from_secs(10), "the default");
}

/// The export's timeout is whole milliseconds, the traces' own before the base one.
#[test]
fn the_export_timeout_is_read_in_milliseconds_the_traces_own_first() {
    let base = (&OTEL_EXPORTER_OTLP_TIMEOUT, " 2500 ");
    assert_eq!(on(&[ENDPOINT, base]).timeout, Duration::from_millis(2500));
    let own = (&OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, "700");
    assert_eq!(
        on(&[ENDPOINT, base, own]).timeout,
        Duration::from_millis(700)
    );
    let e = refused(&[ENDPOINT, (&OTEL_EXPORTER_OTLP_TIMEOUT, "10s")]).to_string();
    assert!(e.contains("whole milliseconds"), "{e}");
}

/// Every value is checked whether export is on or not: a bad sampler set on an instance
/// without an endpoint stops its start as it would with one.
#[test]
fn each_bad_value_is_refused_under_its_own_name_with_export_on_or_off() {
    for (setting, bad) in [
        (&OTEL_EXPORTER_OTLP_ENDPOINT, "collector:4318"),
        (
            &OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
            "collector:4318/v1/traces",
        ),
        (&OTEL_TRACES_SAMPLER, "bogus"),
        (&OTEL_TRACES_SAMPLER_ARG, "1.5"),
        (&OTEL_TRACES_SAMPLER_ARG, "half"),
        (&OTEL_RESOURCE_ATTRIBUTES, "team"),
        (&OTEL_RESOURCE_ATTRIBUTES, "=x"),
        (&OTEL_SDK_DISABLED, "maybe"),
        (&OTEL_TRACES_EXPORTER, "zipkin"),
        (&OTEL_EXPORTER_OTLP_PROTOCOL, "grpc"),
        (&OTEL_EXPORTER_OTLP_COMPRESSION, "gzip"),
        (&OTEL_EXPORTER_OTLP_HEADERS, "garbage"),
        (&OTEL_EXPORTER_OTLP_TIMEOUT, "10s"),
        (&OTEL_EXPORTER_OTLP_TIMEOUT, "0"),
        (&OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, "-5"),
        (&OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, "600001"),
    ] {
        for with_endpoint in [true, false] {
            let mut given = vec![(setting, bad)];
            if with_endpoint && setting.name != ENDPOINT.0.name {
                given.push(ENDPOINT);
            }
            let e = refused(&given);
            assert_eq!(e.name, setting.name, "{bad} ({with_endpoint}): {e}");
        }
    }
}

/// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn export off, saying which did;
/// `otlp` (the default) keeps it; any other exporter is refused with the values taken.
#[test]
fn export_is_turned_off_as_opentelemetry_says() {
    for (setting, text, because) in [
        (&OTEL_SDK_DISABLED, "true", "OTEL_SDK_DISABLED=true"),
        (&OTEL_SDK_DISABLED, "TRUE", "OTEL_SDK_DISABLED=true"),
        (&OTEL_TRACES_EXPORTER, "none", "OTEL_TRACES_EXPORTER=none"),
    ] {
        let read = traces(&values(&[ENDPOINT, (setting, text)])).unwrap();
        let because = Some(because);
        assert_eq!(read, Traces::Off { because }, "{text}");
        let read = traces(&values(&[(setting, text)])).unwrap();
        assert_eq!(read, Traces::Off { because }, "{text}");
    }
    on(&[ENDPOINT, (&OTEL_SDK_DISABLED, "false")]);
    on(&[ENDPOINT, (&OTEL_TRACES_EXPORTER, "otlp")]);
    for other in ["zipkin", "console", "otlp,console"] {
        let e = refused(&[ENDPOINT, (&OTEL_TRACES_EXPORTER, other)]).to_string();
        assert!(e.starts_with("OTEL_TRACES_EXPORTER: "), "{e}");
        assert!(e.contains("`otlp`") && e.contains("`none`"), "{e}");
    }
}

/// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the whole URL, used as written, before the base
/// endpoint; alone, it turns export on.
#[test]
fn the_traces_own_endpoint_is_used_as_written() {
    let own = (
        &OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
        " http://c:4318/custom/path ",
    );
    for given in [vec![own], vec![own, ENDPOINT]] {
        let read = on(&given);
        assert_eq!(read.traces_url, "http://c:4318/custom/path");
        assert_eq!(read.endpoint_setting, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    }
    let slash = (
        &OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
        "http://c:4318/v1/traces/",
    );
    assert_eq!(on(&[slash]).traces_url, "http://c:4318/v1/traces/");
    let bad_base = (&OTEL_EXPORTER_OTLP_ENDPOINT, "collector");
    assert_eq!(
        refused(&[own, bad_base]).name,
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    );
    let e = refused(&[(&OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "http://u:pw@c/x")]).to_string();
    assert!(
        e.contains("OTEL_EXPORTER_OTLP_HEADERS") && !e.contains("pw@"),
        "{e}"
    );
}

/// Only HTTP with protobuf, uncompressed, is sent: another protocol or a compression is
/// refused under the variable set, saying what is taken, rather than ignored (or refused
/// under another name by the SDK).
#[test]
fn a_protocol_or_compression_this_build_lacks_is_refused() {
    for (setting, bad, taken) in [
        (&OTEL_EXPORTER_OTLP_PROTOCOL, "grpc", "http/protobuf"),
        (&OTEL_EXPORTER_OTLP_PROTOCOL, "http/json", "http/protobuf"),
        (&OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "grpc", "http/protobuf"),
        (&OTEL_EXPORTER_OTLP_COMPRESSION, "gzip", "write none"),
        (&OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, "gzip", "write none"),
        (&OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, "zstd", "write none"),
    ] {
        let e = refused(&[ENDPOINT, (setting, bad)]);
        assert_eq!(e.name, setting.name, "{e}");
        assert!(e.problem.contains(taken), "{e}");
    }
}

/// A header item the SDK would drop without a word stops the start, named by its position;
/// no value is ever quoted.
#[test]
fn a_header_that_does_not_read_is_refused_by_position() {
    for (raw, position) in [
        ("x-api-key=secret123,garbage", "item 2 is not name=value"),
        ("garbage-secret123", "item 1 is not name=value"),
        ("=secret123", "item 1 has no name"),
        ("x api key=secret123", "item 1 has a name"),
        ("x-api-key=", "item 1 (x-api-key) has an empty value"),
        ("a=b,x-api-key=secret%2", "item 2 (x-api-key) has a %"),
        ("x-api-key=secret%0A123", "item 1 (x-api-key) has a value"),
    ] {
        for setting in [
            &OTEL_EXPORTER_OTLP_HEADERS,
            &OTEL_EXPORTER_OTLP_TRACES_HEADERS,
        ] {
            let e = refused(&[ENDPOINT, (setting, raw)]);
            assert_eq!(e.name, setting.name, "{e}");
            assert!(e.problem.starts_with(position), "{raw}: {e}");
            assert!(!e.problem.contains("secret"), "{e}");
        }
    }
    assert_eq!(percent_decoded("a%20b%2C").as_deref(), Some("a b,"));
    assert_eq!(percent_decoded("%zz"), None);
}

/// An endpoint refused for its query or fragment (where a collector's token is often put) is
/// quoted with them hidden, as a password is: the token never reaches the log.
#[test]
fn a_refused_endpoint_never_shows_its_query_or_fragment() {
    for setting in [
        &OTEL_EXPORTER_OTLP_ENDPOINT,
        &OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    ] {
        for (raw, shown) in [
            (
                "http://127.0.0.1:21270?token=SECRETQ",
                "\"http://127.0.0.1:21270?***\"",
            ),
            (
                "http://u:pw@c:4318/v1/traces#SECRETQ",
                "\"http://u:***@c:4318/v1/traces#***\"",
            ),
        ] {
            let e = refused(&[(setting, raw)]);
            assert_eq!(e.name, setting.name, "{e}");
            assert!(e.problem.contains(shown), "{e}");
            assert!(!e.problem.contains("SECRETQ"), "{e}");
        }
    }
}

/// OTEL_RESOURCE_ATTRIBUTES is percent-encoded: an item whose `%` is not followed by two hex
/// digits (or that encodes what is not UTF-8) stops the start, named by its position, as one
/// without `=` or a key does; it is never taken half-decoded.
#[test]
fn a_resource_attribute_that_does_not_read_is_refused_by_position() {
    for (raw, position) in [
        ("a=%ZZ", "item 1 (\"a=%ZZ\") has a %"),
        ("team=a%2Cb, b=x%2", "item 2 (\"b=x%2\") has a %"),
        ("a=b,%zz=c", "item 2 (\"%zz=c\") has a %"),
        ("a=%FF", "item 1 (\"a=%FF\") has a %"),
        ("a=b,,noequals", "item 3 (\"noequals\") is not key=value"),
        ("=x", "item 1 (\"=x\") has no key"),
        ("%20=x", "item 1 (\"%20=x\") has no key"),
    ] {
        for with_endpoint in [vec![ENDPOINT], vec![]] {
            let mut given = with_endpoint;
            given.push((&OTEL_RESOURCE_ATTRIBUTES, raw));
            let e = refused(&given);
            assert_eq!(e.name, "OTEL_RESOURCE_ATTRIBUTES", "{e}");
            assert!(e.problem.starts_with(position), "{raw}: {e}");
        }
    }
    let read = on(&[ENDPOINT, (&OTEL_RESOURCE_ATTRIBUTES, "k%3D=a+b%20c")]).resource;
    assert_eq!(read, [("k=".to_owned(), "a+b c".to_owned())]);
}

/// OTEL_SDK_DISABLED takes only `true` and `false` (any case, spaces around), as
/// OpenTelemetry reads it: the project's own switches' `yes`, `on` or `1` stop the start
/// naming the variable and the two values, rather than turning export off.
#[test]
fn otel_sdk_disabled_takes_only_true_or_false() {
    for text in ["true", " TRUE ", "True"] {
        let read = traces(&values(&[ENDPOINT, (&OTEL_SDK_DISABLED, text)])).unwrap();
        let because = Some("OTEL_SDK_DISABLED=true");
        assert_eq!(read, Traces::Off { because }, "{text:?}");
    }
    for text in ["false", " FALSE", ""] {
        on(&[ENDPOINT, (&OTEL_SDK_DISABLED, text)]);
    }
    for text in ["yes", "on", "1", "0", "no", "off", "disabled"] {
        for with_endpoint in [vec![ENDPOINT], vec![]] {
            let mut given = with_endpoint;
            given.push((&OTEL_SDK_DISABLED, text));
            let e = refused(&given).to_string();
            assert!(e.starts_with("OTEL_SDK_DISABLED: "), "{e}");
            assert!(e.contains("`true`") && e.contains("`false`"), "{e}");
        }
    }
}

/// `Authorization=Bearer <token>é` was taken (`HeaderValue` takes any byte past ASCII, and a
/// tab), and the export then failed or went without its credentials: a value outside printable
/// ASCII, written as is or percent-encoded, is refused naming the header, never the value.
#[test]
fn a_header_value_outside_printable_ascii_is_refused_naming_the_header() {
    for raw in [
        "authorization=Bearer secret\u{e9}",
        "authorization=Bearer%20secret%C3%A9",
        "x-a=1,authorization=secret\tx",
        "authorization=secret%09x",
        "authorization=secret%7Fx",
    ] {
        for setting in [
            &OTEL_EXPORTER_OTLP_HEADERS,
            &OTEL_EXPORTER_OTLP_TRACES_HEADERS,
        ] {
            let e = refused(&[ENDPOINT, (setting, raw)]);
            assert_eq!(e.name, setting.name, "{e}");
            assert!(
                e.problem
                    .contains("(authorization) has a value a header cannot carry"),
                "{raw}: {e}"
            );
            assert!(!e.problem.contains("secret"), "{e}");
        }
    }
    let read = on(&[
        ENDPOINT,
        (&OTEL_EXPORTER_OTLP_HEADERS, "authorization=Bearer%20t~!"),
    ]);
    assert_eq!(read.traces_url, "http://collector:4318/v1/traces");
}
