//! The connection target: liveness settings and their defaults.

use super::*;

#[test]
fn liveness_settings_default_unless_the_url_names_them() {
    let t = target("postgres://u@127.0.0.1:5432/db").unwrap();
    assert_eq!(t.config.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));
    assert!(t.config.get_keepalives());
    assert_eq!(t.config.get_keepalives_idle(), KEEPALIVES_IDLE);
    assert_eq!(
        t.config.get_keepalives_interval(),
        Some(KEEPALIVES_INTERVAL)
    );
    assert_eq!(t.config.get_keepalives_retries(), Some(KEEPALIVES_RETRIES));

    let url = "postgres://u@h1:1,h2:2/db?target_session_attrs=read-write&tcp_user_timeout=3&keepalives_idle=1";
    let t = target(url).unwrap();
    assert_eq!(
        t.config.get_tcp_user_timeout(),
        Some(&Duration::from_secs(3))
    );
    assert_eq!(t.config.get_keepalives_idle(), Duration::from_secs(1));
    assert_eq!(
        t.config.get_keepalives_interval(),
        Some(KEEPALIVES_INTERVAL)
    );

    // Two hosts: each may take its connect_timeout (5 s) before the handshake.
    assert_eq!(create_timeout(&t.config), Duration::from_secs(15));
    let one = target("postgres://u@h1:1/db?connect_timeout=2").unwrap();
    assert_eq!(create_timeout(&one.config), Duration::from_secs(7));

    // `0` is libpq's "the system's default": kept, not replaced by ours.
    let t = target("host=127.0.0.1 user=u tcp_user_timeout=0 keepalives=0").unwrap();
    assert_eq!(t.config.get_tcp_user_timeout(), None);
    assert!(!t.config.get_keepalives());
}

/// A `?` in the password starts no query: `x?tcp_user_timeout=0` is a password, and the
/// default timeout holds.
#[test]
fn a_question_mark_in_the_password_names_no_parameter() {
    let t = target("postgres://u:x?tcp_user_timeout=0@127.0.0.1:5432/db").unwrap();
    assert_eq!(t.config.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));
    assert_eq!(t.config.get_password(), Some(&b"x?tcp_user_timeout=0"[..]));
}
