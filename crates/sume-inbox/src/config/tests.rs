//! The checks of `Config::validate`: settings that cannot work are refused by name.

use super::*;

#[test]
fn settings_that_cannot_work_are_refused_by_name() {
    let refused = |change: &dyn Fn(&mut Config)| {
        let mut c = Config::local("postgres://localhost/x", "whsec_x");
        change(&mut c);
        c.validate().unwrap_err().name
    };
    assert!(Config::local("postgres://localhost/x", "whsec_x")
        .validate()
        .is_ok());
    assert_eq!(
        refused(&|c| c.attach.scan_interval = Duration::ZERO),
        "ATTACH_SCAN_INTERVAL"
    );
    assert_eq!(
        refused(&|c| c.ingest.timeout = Duration::ZERO),
        "INGEST_TIMEOUT"
    );
    assert_eq!(
        refused(&|c| c.webhook_tolerance = Duration::from_millis(500)),
        "WEBHOOK_TOLERANCE"
    );
    assert_eq!(
        refused(&|c| c.port.header_timeout = Duration::ZERO),
        "HEADER_TIMEOUT"
    );
    assert_eq!(
        refused(&|c| c.port.max_body_memory = c.max_body_bytes - 1),
        "MAX_BODY_MEMORY"
    );
    assert_eq!(
        refused(&|c| c.port.max_body_memory = 5 << 30),
        "MAX_BODY_MEMORY"
    );
    assert_eq!(
        refused(&|c| c.port.body_timeout = Duration::ZERO),
        "BODY_TIMEOUT"
    );
    assert_eq!(
        refused(&|c| c.port.idle_timeout = Duration::from_secs(1)),
        "IDLE_TIMEOUT"
    );
    assert_eq!(
        refused(&|c| c.sweep.inbox_grace = Duration::ZERO),
        "INBOX_GRACE"
    );
    assert_eq!(
        refused(&|c| c.sweep.interval = Duration::ZERO),
        "SWEEP_INTERVAL"
    );
    assert_eq!(
        refused(&|c| c.shutdown_timeout = Duration::ZERO),
        "SHUTDOWN_TIMEOUT"
    );
    assert_eq!(
        refused(&|c| c.sweep.poll_max_interval = c.sweep.poll_after / 2),
        "POLL_MAX_INTERVAL"
    );
    assert_eq!(
        refused(&|c| c.sume_api_url = "http://sume.example/api/v1".into()),
        "SUME_API_URL"
    );
    for ok in [
        "http://127.0.0.1:8090/v1",
        "http://localhost:8090/v1",
        "http://[::1]:8090/v1",
    ] {
        let mut c = Config::local("postgres://localhost/x", "whsec_x");
        c.sume_api_url = ok.into();
        assert!(c.validate().is_ok(), "{ok}");
    }
    let mut c = Config::local("postgres://localhost/x", "whsec_x");
    c.sume_api_url = "http://sim:8090/v1".into();
    c.sume_api_allow_plaintext = true;
    assert!(c.validate().is_ok(), "allowed explicitly");
}

#[test]
fn a_lease_must_outlive_its_requests() {
    let mut config = Config::local("postgres://db/x", "s");
    config.sweep.request_timeout = Duration::from_secs(60);
    assert_eq!(config.validate().unwrap_err().name, "SWEEP_LEASE");
    let mut ok = config.clone();
    ok.sweep.request_timeout = Duration::from_secs(10);
    assert!(ok.validate().is_ok());
}

#[test]
fn worker_threads_are_one_to_the_maximum() {
    assert_eq!(parse_worker_threads("1"), Ok(1));
    assert_eq!(parse_worker_threads(" 4 "), Ok(4));
    assert_eq!(parse_worker_threads("64"), Ok(MAX_WORKER_THREADS));
    for bad in ["0", "65", "-1", "two", "1.5", "99999999999999999999999"] {
        let e = parse_worker_threads(bad).unwrap_err();
        assert_eq!(e.name, "WORKER_THREADS", "{bad}");
    }
}
