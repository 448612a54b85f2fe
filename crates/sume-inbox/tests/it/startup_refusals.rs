//! A database that refuses what the daemon asked for, in ways waiting cannot fix, stops the
//! start at once with exit 78, naming the setting and its target without the password: TLS
//! asked of a server without it, a password the server asks for and the URL lacks, a role that
//! may not create the schema.

use std::process::{Command, Output};

use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// PostgreSQL's SSLRequest code.
const SSL_REQUEST: u32 = 80_877_103;

/// A server speaking only the first words of PostgreSQL's protocol: `N` (no TLS) to an
/// SSLRequest, then a request for a cleartext password after the startup message.
async fn password_asking_server() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                loop {
                    let mut head = [0u8; 8];
                    if s.read_exact(&mut head).await.is_err() {
                        return;
                    }
                    let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
                    if u32::from_be_bytes(head[4..].try_into().unwrap()) == SSL_REQUEST {
                        let _ = s.write_all(b"N").await;
                        continue;
                    }
                    let mut rest = vec![0u8; len.saturating_sub(8)];
                    if s.read_exact(&mut rest).await.is_err() {
                        return;
                    }
                    let _ = s.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]).await;
                    let _ = s.read(&mut [0u8; 64]).await;
                    return;
                }
            });
        }
    });
    port
}

/// `sume-inbox <command>` with only `env`, a webhook secret and the listeners on free ports.
fn sume_inbox(command: &str, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sume-inbox"));
    cmd.arg(command)
        .env_clear()
        .env("SUME_WEBHOOK_SECRET", "whsec_x")
        .env("LISTEN_ADDR", "127.0.0.1:0")
        .env("ADMIN_ADDR", "127.0.0.1:0")
        .envs(env.iter().copied());
    cmd
}

/// [`sume_inbox`] run to its end off the runtime, so a server of the test can answer it.
async fn run(command: &'static str, env: Vec<(&'static str, String)>) -> (Output, String) {
    let out = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        sume_inbox(command, &env).output().unwrap()
    })
    .await
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_the_server_lacks_or_a_password_the_url_lacks_stop_the_start_at_once() {
    let port = password_asking_server().await;
    for (query, expected) in [
        ("?sslmode=require", "server does not support TLS"),
        ("?sslmode=disable", "password missing"),
        ("", "password missing"),
    ] {
        let url = format!("postgres://sume@127.0.0.1:{port}/app{query}");
        let (out, text) = run("serve", vec![("DATABASE_URL", url)]).await;
        assert_eq!(out.status.code(), Some(78), "{query}: {text}");
        let target = format!("DATABASE_URL (postgres://sume@127.0.0.1:{port}/app)");
        assert!(text.contains(&target), "{text}");
        assert!(text.contains(expected), "{text}");
        assert!(text.contains("retrying cannot fix this"), "{text}");
        assert!(!text.contains("not reachable yet"), "{text}");
    }
}

/// A role without the right to create the schema, for `serve` (through MIGRATE_DATABASE_URL)
/// and `migrate` (through DATABASE_URL): exit 78 naming the setting used, its target, and the
/// way out (README "Least privilege").
#[tokio::test(flavor = "multi_thread")]
async fn a_role_that_may_not_create_the_schema_stops_migrations_naming_the_setting() {
    let db = sume_testkit::TestDb::new().await;
    let role = format!("sume_no_rights_{}", rand::thread_rng().gen::<u32>());
    let admin = db.client().await;
    admin
        .batch_execute(&format!("create role {role} login"))
        .await
        .unwrap();
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_username(&role).unwrap();
    url.set_password(Some("pw-never-shown")).unwrap();
    let target = format!("postgres://{role}@");
    for (command, setting) in [
        ("serve", "MIGRATE_DATABASE_URL"),
        ("migrate", "DATABASE_URL"),
    ] {
        let (out, text) = run(
            command,
            vec![("DATABASE_URL", db.url.clone()), (setting, url.to_string())],
        )
        .await;
        assert_eq!(out.status.code(), Some(78), "{command}: {text}");
        assert!(text.contains(&format!("{setting} (postgres://")), "{text}");
        assert!(text.contains(&target), "{text}");
        assert!(
            text.contains("42501") && text.contains("run `sume-inbox migrate` with a role"),
            "{text}"
        );
        assert!(!text.contains("pw-never-shown"), "{text}");
    }
    admin
        .batch_execute(&format!("drop role {role}"))
        .await
        .unwrap();
}

/// LISTEN_DATABASE_URL is connected to once at start, as DATABASE_URL is: one the server
/// refuses (an unknown database, an unknown role) or whose host does not exist stops the
/// start, naming LISTEN_DATABASE_URL, instead of a daemon serving with LISTEN retried for ever.
#[tokio::test(flavor = "multi_thread")]
async fn a_listen_url_the_server_refuses_stops_the_start_naming_it() {
    let db = sume_testkit::TestDb::new().await;
    let url = url::Url::parse(&db.url).unwrap();
    let mut no_database = url.clone();
    no_database.set_path("no_such_database");
    let mut no_role = url.clone();
    no_role.set_username("no_such_role").unwrap();
    no_role.set_password(Some("pw-never-shown")).unwrap();
    let mut no_host = url.clone();
    no_host.set_host(Some("no-such-host.invalid")).unwrap();
    for (listen, expected) in [
        (no_database, "3D000"),
        (no_role, "28000"),
        (no_host, "no-such-host.invalid"),
    ] {
        // `none` first: it migrates the schema, which behind a pooler is only read.
        for pooler in ["none", "transaction"] {
            let (out, text) = run(
                "serve",
                vec![
                    ("DATABASE_URL", db.url.clone()),
                    ("DB_POOLER", pooler.into()),
                    ("LISTEN_DATABASE_URL", listen.to_string()),
                ],
            )
            .await;
            assert_eq!(out.status.code(), Some(78), "{listen}: {text}");
            assert!(text.contains("LISTEN_DATABASE_URL (postgres://"), "{text}");
            assert!(text.contains(expected), "{text}");
            assert!(!text.contains("pw-never-shown"), "{text}");
            assert!(!text.contains("serving"), "{text}");
        }
    }
}

/// SIGTERM while the start waits for a database that is not up yet is a stop asked for: `serve`
/// exits 0, saying the start was abandoned, not a "cannot connect" failure; `migrate` exits 1
/// saying it was stopped on request (before, only the last connection error).
#[test]
fn sigterm_while_waiting_for_the_database_says_the_stop_was_asked_for() {
    for (command, code, said) in [
        ("serve", 0, "start abandoned on request"),
        ("migrate", 1, "stopped on request"),
    ] {
        let seen = terminated_while_waiting(command);
        assert_eq!(seen.0, Some(code), "{command}: {}", seen.1);
        assert!(seen.1.contains(said), "{command}: {}", seen.1);
    }
}

/// `command` against a port nothing listens on, sent SIGTERM once it waits for the database:
/// its exit code and what it wrote to stderr.
fn terminated_while_waiting(command: &str) -> (Option<i32>, String) {
    use std::io::{BufRead, BufReader};
    let mut child = sume_inbox(
        command,
        &[("DATABASE_URL", "postgres://sume@127.0.0.1:1/app")],
    )
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    // The second wait: by then the signal handler, spawned before the start, is in place.
    while seen.matches("not reachable yet").count() < 2 {
        let line = lines.next().expect("the wait is logged").unwrap();
        seen.push_str(&line);
        seen.push('\n');
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    for line in lines {
        seen.push_str(&line.unwrap());
        seen.push('\n');
    }
    (child.wait().unwrap().code(), seen)
}

/// SIGTERM while the migrations' lock is held by another (an instance migrating, a stuck
/// session): `migrate` stops at once saying so (exit 1: nothing was applied), `serve` exits 0;
/// neither waits for the lock to be let go.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_while_the_migrations_lock_is_held_stops_at_once() {
    let db = crate::support::TestDb::new().await;
    let holder = db.client().await;
    holder
        .execute("select pg_advisory_lock(x'53554d45494e4258'::bigint)", &[])
        .await
        .unwrap();
    for (command, code, said) in [
        ("migrate", 1, "stopped on request"),
        ("serve", 0, "start abandoned on request"),
    ] {
        // The one before gone (its backend may outlive its process a moment).
        while askers(&holder).await > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let child = sume_inbox(command, &[("DATABASE_URL", &db.url)])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Asking for the lock, again and again: the signal handler is in place by then.
        while askers(&holder).await == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let signalled = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(signalled.success());
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()),
        )
        .await
        .unwrap_or_else(|_| panic!("{command} still waits for the lock after SIGTERM"))
        .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{command}: {text}");
        assert!(text.contains(said), "{command}: {text}");
    }
}

/// Sessions of the database, other than `holder`'s, asking for an advisory lock.
async fn askers(holder: &tokio_postgres::Client) -> i64 {
    let sql = "select count(*) from pg_stat_activity where pid <> pg_backend_pid() \
               and datname = current_database() and query like '%pg_try_advisory_lock%'";
    holder.query_one(sql, &[]).await.unwrap().get(0)
}

/// `migrate` says the schema's own version: this binary's once migrated, and a later release's
/// when one has taken the schema further (before, it printed this binary's as the schema's).
#[tokio::test(flavor = "multi_thread")]
async fn migrate_tells_the_schemas_version_even_when_newer_than_its_own() {
    let db = crate::support::TestDb::new().await;
    let latest = sume_inbox::db::migrate::latest();
    let migrate = || {
        let out = sume_inbox("migrate", &[("DATABASE_URL", &db.url)])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(migrate().starts_with(&format!("schema at version {latest} (applied now: [1, ")));
    let newer = latest + 80;
    db.client()
        .await
        .execute(
            "insert into sume.schema_migrations (version, name) values ($1, 'later')",
            &[&newer],
        )
        .await
        .unwrap();
    let said = migrate();
    assert!(
        said.starts_with(&format!(
            "schema at version {newer}, newer than this binary's {latest}"
        )),
        "{said}"
    );
}

/// `url` with `password` written after its user as is (unencoded), and `query` (`sslmode=...`)
/// added to its own.
fn with_raw_password(url: &str, password: &str, query: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (credentials, rest) = rest.split_once('@').unwrap();
    let user = credentials.split(':').next().unwrap();
    let sep = if rest.contains('?') { '&' } else { '?' };
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("{sep}{query}")
    };
    format!("{scheme}://{user}:{password}@{rest}{query}")
}

/// A `?` in the password is the password's, as libpq reads it: `sslmode=require` still holds
/// (the test cluster has no TLS, so it is refused, as psql refuses it), and without a query the
/// database is the one named. Before, the query began at the password's `?`: `require` was
/// lost and `migrate` ran in cleartext, or the database's name ended in `&sslmode=prefer`. An
/// `@` in the password stops the start before any connection, saying to percent-encode it,
/// with no part of the password printed (before, part of it was named as the host).
#[tokio::test(flavor = "multi_thread")]
async fn a_password_with_a_question_mark_keeps_sslmode_and_one_with_an_at_sign_is_refused() {
    let db = crate::support::TestDb::new().await;
    let url = with_raw_password(&db.url, "pa?SECRET2", "sslmode=require");
    let (out, text) = run("migrate", vec![("DATABASE_URL", url)]).await;
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(text.contains("server does not support TLS"), "{text}");
    assert!(!text.contains("SECRET2"), "{text}");
    let url = with_raw_password(&db.url, "pa?SECRET2", "");
    let (out, text) = run("migrate", vec![("DATABASE_URL", url)]).await;
    assert_eq!(out.status.code(), Some(0), "{text}");
    for setting in ["DATABASE_URL", "MIGRATE_DATABASE_URL"] {
        let url = with_raw_password(&db.url, "p@ssS3cret", "");
        let (out, text) = run(
            "migrate",
            vec![("DATABASE_URL", db.url.clone()), (setting, url)],
        )
        .await;
        assert_eq!(out.status.code(), Some(78), "{text}");
        assert!(
            text.contains(&format!("{setting}: cannot be read")),
            "{text}"
        );
        assert!(
            text.contains("percent-encode") && text.contains("%40"),
            "{text}"
        );
        assert!(!text.contains("S3cret"), "{text}");
    }
}

/// `migrate` applies `serve`'s rule: with DB_POOLER=transaction, a MIGRATE_DATABASE_URL that
/// is DATABASE_URL (as read: the spaces around it are not part of it) is the pooler itself,
/// refused (78) before anything is applied. Before, `migrate` ran its migrations through it.
#[tokio::test(flavor = "multi_thread")]
async fn migrate_refuses_the_pooler_as_its_direct_connection_as_serve_does() {
    let db = crate::support::TestDb::new().await;
    for command in ["migrate", "serve"] {
        let (out, text) = run(
            command,
            vec![
                ("DATABASE_URL", format!("{} ", db.url)),
                ("DB_POOLER", "transaction".into()),
                ("MIGRATE_DATABASE_URL", db.url.clone()),
            ],
        )
        .await;
        assert_eq!(out.status.code(), Some(78), "{command}: {text}");
        assert!(
            text.contains("MIGRATE_DATABASE_URL: is DATABASE_URL, the transaction pooler"),
            "{command}: {text}"
        );
    }
    let schema: bool = db
        .client()
        .await
        .query_one(
            "select exists (select from pg_namespace where nspname = 'sume')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!schema, "nothing was migrated");
}

/// `serve` on a schema a later release took past its own says so, as `migrate` does (before:
/// `schema is current applied=0 schema=19`).
#[tokio::test(flavor = "multi_thread")]
async fn serve_on_a_schema_newer_than_its_own_says_so() {
    use std::io::{BufRead, BufReader};
    let db = crate::support::TestDb::new().await;
    let out = sume_inbox("migrate", &[("DATABASE_URL", &db.url)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let newer = sume_inbox::db::migrate::latest() + 80;
    db.client()
        .await
        .execute(
            "insert into sume.schema_migrations (version, name) values ($1, 'later')",
            &[&newer],
        )
        .await
        .unwrap();
    let mut child = sume_inbox("serve", &[("DATABASE_URL", &db.url)])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let said = tokio::task::spawn_blocking(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .find(|line| line.contains("schema"))
    })
    .await
    .unwrap()
    .expect("the schema's version is logged");
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let _ = child.wait();
    assert!(
        said.contains(&format!(
            "schema at version {newer}, newer than this binary's"
        )),
        "{said}"
    );
}

/// A MIGRATE_DATABASE_URL naming another database than DATABASE_URL's stops the start (78),
/// saying DATABASE_URL's is not migrated. Before, `serve` migrated the one, logged `schema is
/// current` and served the other, answering every webhook 503 for want of the schema.
#[tokio::test(flavor = "multi_thread")]
async fn a_migrate_url_naming_another_database_than_database_url_stops_the_start() {
    let served = crate::support::TestDb::new().await;
    let migrated = crate::support::TestDb::new().await;
    let mut child = sume_inbox(
        "serve",
        &[
            ("DATABASE_URL", &served.url),
            ("MIGRATE_DATABASE_URL", &migrated.url),
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Bounded: before, the start served (and answered 503) for ever.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains("DATABASE_URL: the database it names is not migrated"),
        "{text}"
    );
    assert!(text.contains("though MIGRATE_DATABASE_URL's was"), "{text}");
    assert!(!text.contains("schema is current"), "{text}");
}

/// Settings refused together are reported in one start, a line each naming its setting (a JSON
/// object each under LOG_FORMAT=json), exit 78. Before, one a start.
#[test]
fn every_setting_refused_is_a_line_of_its_own_in_text_and_json() {
    let bad = [
        ("SUME_WEBHOOK_SECRET", ""),
        ("DB_POOL_SIZE", "0"),
        ("MAX_WAIT", "0"),
        ("LIST_WALKS", "on"),
    ];
    let names = [
        "DATABASE_URL",
        "DB_POOL_SIZE",
        "SUME_WEBHOOK_SECRET",
        "MAX_WAIT",
    ];
    for json in [false, true] {
        let format = if json { "json" } else { "pretty" };
        let mut env = bad.to_vec();
        env.push(("LOG_FORMAT", format));
        let out = sume_inbox("serve", &env).output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(78), "{text}");
        let lines: Vec<String> = text
            .lines()
            .map(|l| match json {
                true => serde_json::from_str::<serde_json::Value>(l).expect(l)["message"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                false => l.to_owned(),
            })
            .collect();
        assert_eq!(lines.len(), 5, "{text}");
        for name in names.iter().chain(["LIST_WALKS"].iter()) {
            let prefix = format!("sume-inbox: {name}: ");
            assert!(
                lines.iter().any(|l| l.starts_with(&prefix)),
                "{name}: {text}"
            );
        }
    }
}

/// A URL of two hosts that both refuse who we are (an unknown role: as a wrong password,
/// waiting cannot fix it): the start said one host's words alone. Now every host's failure is
/// said, in the order tried, and the start ends at once (78), in the URL form and the
/// `host=a,b` form alike; through the pool too (behind a transaction pooler, and the admin
/// commands).
#[tokio::test(flavor = "multi_thread")]
async fn every_host_of_a_url_is_said_and_refusals_by_all_are_permanent() {
    let db = sume_testkit::TestDb::new().await;
    let port = url::Url::parse(&db.url).unwrap().port().unwrap();
    let urls = [
        format!(
            "postgres://no_such_role:pw-never-shown@127.0.0.1:{port},127.0.0.1:{port}/postgres"
        ),
        format!(
            "host=127.0.0.1,127.0.0.1 port={port},{port} user=no_such_role \
             password=pw-never-shown dbname=postgres"
        ),
    ];
    // `migrate` and `serve` connect to migrate; behind a transaction pooler `serve` reads the
    // schema through its pool, as `stats` does.
    let runs = [
        ("migrate", None),
        ("serve", None),
        ("serve", Some("transaction")),
        ("stats", None),
    ];
    for url in urls {
        for (command, pooler) in runs {
            let mut env = vec![("DATABASE_URL", url.clone())];
            env.extend(pooler.map(|p| ("DB_POOLER", p.to_owned())));
            let (out, text) = run(command, env).await;
            assert_eq!(out.status.code(), Some(78), "{command} {url}: {text}");
            assert!(text.contains("every host failed"), "{text}");
            let said = text.matches(&format!("127.0.0.1:{port}: ")).count();
            assert!(said >= 2, "{command} {url}: each host said: {text}");
            assert!(text.contains("28000"), "{text}");
            assert!(text.contains("retrying cannot fix this"), "{text}");
            assert!(!text.contains("pw-never-shown"), "{text}");
        }
    }
}

/// A URL of two hosts, the first refusing who we are, the second not there: the start said
/// only the last host's refused connection, retried it, and exited 1, the refusal never shown.
/// Now every host's words are said; the start still waits (a host only not there, such as a
/// primary restarting behind a standby that refuses this client, may yet take it), and its
/// last words name the refusal.
#[tokio::test(flavor = "multi_thread")]
async fn a_refusal_by_one_host_is_said_while_another_is_waited_for() {
    let db = sume_testkit::TestDb::new().await;
    let port = url::Url::parse(&db.url).unwrap().port().unwrap();
    let closed = crate::support::free_port();
    let url = format!(
        "postgres://no_such_role:pw-never-shown@127.0.0.1:{port},127.0.0.1:{closed}/postgres"
    );
    let (out, text) = run("migrate", vec![("DATABASE_URL", url)]).await;
    assert_ne!(out.status.code(), Some(78), "{text}");
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("not reachable yet"), "{text}");
    assert!(text.contains("every host failed"), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}: ")), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{closed}: ")), "{text}");
    assert!(
        text.contains("28000") && text.contains("Connection refused"),
        "{text}"
    );
    assert!(!text.contains("pw-never-shown"), "{text}");
}
