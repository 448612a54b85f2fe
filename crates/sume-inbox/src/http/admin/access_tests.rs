use super::*;

#[test]
fn the_bearer_scheme_is_read_in_any_case() {
    for header in ["Bearer t0k", "bearer t0k", "BEARER  t0k ", " Bearer t0k"] {
        assert_eq!(bearer_token(header), Some("t0k"), "{header:?}");
    }
    for header in ["Basic t0k", "Bearer", "Bearer ", "Bearert0k", "t0k", ""] {
        assert_eq!(bearer_token(header), None, "{header:?}");
    }
}

#[test]
fn hosts_are_the_address_localhost_and_the_named_ones() {
    let lo: SocketAddr = "127.0.0.1:9090".parse().unwrap();
    let hosts = Access::hosts_for(lo, &["admin.internal".into()]).unwrap();
    for h in [
        "127.0.0.1:9090",
        "localhost:9090",
        "[::1]:9090",
        "admin.internal:9090",
    ] {
        assert!(hosts.contains(&h.to_owned()), "{h}");
    }
    assert!(!hosts.contains(&"evil.example:9090".to_owned()));
    let any: SocketAddr = "0.0.0.0:9090".parse().unwrap();
    assert_eq!(Access::hosts_for(any, &[]), None);
    assert!(Access::hosts_for(any, &["a.b".into()]).is_some());
}

#[test]
fn on_a_wildcard_address_narrowed_by_admin_hosts_its_own_addresses_still_answer() {
    for bound in ["0.0.0.0:9090", "[::]:9090"] {
        let bound: SocketAddr = bound.parse().unwrap();
        let access = Access {
            operator: None,
            app: None,
            hosts: Access::hosts_for(bound, &["admin.internal".into()]),
            wildcard_port: Access::wildcard_port(bound),
        };
        for host in [
            "admin.internal",
            "admin.internal:9090",
            "127.0.0.1:9090",
            "10.1.2.3:9090",
            "[::1]:9090",
            "[fd00::5]:9090",
            "LOCALHOST:9090",
        ] {
            assert!(access.host_allowed(Some(host)), "{bound} {host}");
        }
        for host in [
            "evil.example:9090",
            "10.1.2.3:9091",
            "localhost:9091",
            "10.1.2.3",
            "",
        ] {
            assert!(!access.host_allowed(Some(host)), "{bound} {host}");
        }
    }
    let lo: SocketAddr = "127.0.0.1:9090".parse().unwrap();
    assert_eq!(Access::wildcard_port(lo), None);
}
