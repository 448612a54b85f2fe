//! PostgreSQL over TLS, against a local server with a self-signed certificate that refuses
//! connections without TLS: each sslmode means what it means in libpq.

use sume_inbox::db;

use crate::support::*;

fn port_of(url: &str) -> &str {
    url.rsplit(':').next().unwrap().split('/').next().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_over_tls_with_every_sslmode() {
    let cluster = PrivateCluster::start_with("tls", &[("DEVPG_SSL", "only")]);
    let cert = devpg(&["cert", cluster.dir()], &[]);
    let port = port_of(&cluster.url).to_owned();
    let url =
        |host: &str, query: &str| format!("postgres://postgres@{host}:{port}/postgres?{query}");

    // The server refuses plain connections.
    let plain = db::connect(&url("127.0.0.1", "sslmode=disable")).await;
    assert!(plain.is_err(), "a plain connection must be refused");
    // require: encrypted, certificate not checked (libpq's meaning).
    let c = db::connect(&url("127.0.0.1", "sslmode=require"))
        .await
        .unwrap();
    let ssl: bool = c
        .query_one(
            "select ssl from pg_stat_ssl where pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ssl);
    // verify-full: an unknown issuer is refused; the right root and name are accepted.
    let unknown = db::connect(&url("localhost", "sslmode=verify-full")).await;
    assert!(
        unknown.is_err(),
        "a self-signed certificate is not trusted by default"
    );
    let rooted = format!("sslmode=verify-full&sslrootcert={cert}");
    db::connect(&url("localhost", &rooted)).await.unwrap();
    // The certificate names localhost, not 127.0.0.1: verify-full refuses, verify-ca accepts.
    let wrong_name = db::connect(&url("127.0.0.1", &rooted)).await;
    assert!(wrong_name.is_err(), "verify-full checks the host name");
    // Neither is retried at start: waiting does not make a certificate verify.
    for refused in [unknown, wrong_name] {
        let e = refused.unwrap_err();
        assert!(e.is_permanent(), "{e}");
        assert!(e.to_string().contains("check sslrootcert"), "{e}");
    }
    db::connect(&url(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={cert}"),
    ))
    .await
    .unwrap();

    // The daemon itself, on verify-full: webhooks stored, every connection encrypted.
    c.batch_execute("create database tls_daemon").await.unwrap();
    let daemon_url = format!(
        "postgres://postgres@localhost:{port}/tls_daemon?sslmode=verify-full&sslrootcert={cert}"
    );
    let daemon = Daemon::start(config(&daemon_url)).await;
    let http = reqwest::Client::new();
    let r = Delivery::completed("job_tls")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    assert_eq!(r.status(), 204);
    let stats = c
        .query_one(
            "select count(*) filter (where s.ssl), count(*)
             from pg_stat_activity a join pg_stat_ssl s using (pid)
             where a.datname = 'tls_daemon' and a.application_name = 'sume-inbox'",
            &[],
        )
        .await
        .unwrap();
    let (encrypted, all): (i64, i64) = (stats.get(0), stats.get(1));
    assert!(all >= 2, "pool and LISTEN connections: {all}");
    assert_eq!(encrypted, all);
    let dc = db::connect(&daemon_url).await.unwrap();
    let n: i64 = dc
        .query_one("select count(*) from sume.events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    daemon.stop().await;
}
