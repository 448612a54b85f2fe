//! Least privilege: one role changes the schema (`sume-inbox migrate`), another runs the
//! daemon with no right to change it, and the application's own role may only register jobs.
//! The grants here are the ones README lists.

use std::time::Duration;

use rand::Rng;

use crate::support::*;

/// `url` with `role` as its user (the throwaway cluster trusts local connections).
fn as_role(url: &str, role: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let host = rest.split_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{role}@{host}")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_role_that_cannot_change_the_schema_runs_the_daemon() {
    let db = TestDb::new().await;
    let roles = Roles::create(&db).await;
    roles.migrate_and_grant(&db).await;

    // The daemon runs as the runtime role: the schema is current, so it only reads it.
    let daemon = Daemon::start(config(&as_role(&db.url, &roles.runtime))).await;
    let http = reqwest::Client::new();
    assert_eq!(
        http.get(daemon.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let d = Delivery::completed("job_least_privilege");
    assert_eq!(
        d.send(&http, &daemon.url("/webhooks/sume")).await.status(),
        204
    );
    // The application registers its job in its own transaction, with its own role.
    let mut a = connect(&as_role(&db.url, &roles.app)).await;
    let tx = a.transaction().await.unwrap();
    tx.execute(
        "insert into sume.jobs (job_id, order_id) values ('job_least_privilege', 'o_1')",
        &[],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    wait_for("the job closed", Duration::from_secs(10), || async {
        job_state(&db, "job_least_privilege").await.as_deref() == Some("completed")
    })
    .await;
    daemon.stop().await;
    assert_eq!(
        db.scalar("select count(*) from sume.job_closes where job_id = 'job_least_privilege'")
            .await,
        1,
        "the close's feed entry is written with the owner's rights"
    );

    // Neither may change the schema, and the application may not touch the inbox.
    let r = connect(&as_role(&db.url, &roles.runtime)).await;
    let denied = r
        .batch_execute("create table sume.x (id int)")
        .await
        .unwrap_err();
    assert_eq!(
        denied.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
    );
    let denied = a.query("select * from sume.events", &[]).await.unwrap_err();
    assert_eq!(
        denied.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
    );
}

/// A runtime role never granted its rights (usage on the schema), where the daemon only reads
/// the schema (behind a transaction pooler, migrations a step of their own): the start stops
/// at once (78) saying what to grant, instead of exiting 1 on "permission denied".
#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_role_without_its_grants_stops_the_start_saying_what_to_grant() {
    let db = TestDb::new().await;
    let roles = Roles::create(&db).await;
    let mut m = connect(&as_role(&db.url, &roles.migrator)).await;
    sume_inbox::db::migrate::migrate(&mut m).await.unwrap();
    let url = as_role(&db.url, &roles.runtime);
    let out = run_as("serve", &url, &[("DB_POOLER", "transaction")]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{said}");
    assert!(
        said.contains("may not read the schema") && said.contains("grant it usage on schema sume"),
        "{said}"
    );
}

/// A role never granted its rights on a schema another role migrated, where the migrations run
/// (`migrate`, and `serve` without a pooler): the schema is there, so the way out is the grants
/// README lists, named for this role (78), not "run `sume-inbox migrate` with a role that may
/// create the schema", which had nothing to apply.
#[tokio::test(flavor = "multi_thread")]
async fn a_role_without_grants_on_a_migrated_schema_is_told_the_grants_it_lacks() {
    let db = TestDb::new().await;
    let roles = Roles::create(&db).await;
    let mut m = connect(&as_role(&db.url, &roles.migrator)).await;
    sume_inbox::db::migrate::migrate(&mut m).await.unwrap();
    for command in ["migrate", "serve"] {
        let out = run_as(command, &as_role(&db.url, &roles.runtime), &[]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{command}: {said}");
        let runtime = &roles.runtime;
        for grant in [
            format!("grant usage on schema sume to {runtime}"),
            format!(
                "grant select, insert, update, delete on all tables in schema sume to {runtime}"
            ),
            format!("as {}", roles.migrator),
        ] {
            assert!(said.contains(&grant), "{command}: {said}");
        }
        assert!(!said.contains("may create the schema"), "{command}: {said}");
    }
}

/// A runtime role granted its rights before migration 9 (none on `sume.instances` and
/// `sume.instance_minutes`): what reads the fleet's picture fails, saying it is a permission
/// and which grants to give (`stats` exit 78, the admin API 503 `permission_denied`, not
/// "database unavailable"), and nothing else does: deliveries are stored, and the inbox check
/// of an instance with keys reads no fleet table (even on a generic plan, which checks the
/// rights of every table a statement names).
#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_role_granted_before_the_fleets_tables_fails_only_what_reads_them() {
    let db = TestDb::new().await;
    let roles = Roles::create(&db).await;
    roles.migrate_and_grant(&db).await;
    let runtime = &roles.runtime;
    db.client()
        .await
        .batch_execute(&format!(
            "revoke all on sume.instances, sume.instance_minutes from {runtime};
             alter role {runtime} set plan_cache_mode = force_generic_plan;"
        ))
        .await
        .unwrap();
    let url = as_role(&db.url, runtime);
    let grants = "grant select, insert, update, delete on all tables in schema sume to ROLE";
    let store = sume_inbox::db::Store::new(&url, 2).unwrap();
    let clock = sume_inbox::db::Clock::Database;
    store
        .events_orphan_late(60.0, false, 100, &clock)
        .await
        .unwrap();
    let e = store.instances_keyed_live().await.unwrap_err();
    assert!(e.is_denied() && e.to_string().contains(grants), "{e}");

    let daemon = Daemon::start(config(&url)).await;
    let http = reqwest::Client::new();
    let d = Delivery::completed("job_before_the_grants");
    let stored = d.send(&http, &daemon.url("/webhooks/sume")).await;
    assert_eq!(stored.status(), 204);
    for path in ["/v1/stats", "/v1/instances"] {
        let r = http.get(daemon.admin_url(path)).send().await.unwrap();
        assert_eq!(r.status(), 503, "{path}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "permission_denied", "{path}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("permission denied for table"), "{message}");
        assert!(message.contains(grants), "{message}");
    }
    daemon.stop().await;

    let out = run_as("stats", &url, &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{said}");
    assert!(said.contains(&grants.replace("ROLE", runtime)), "{said}");
}

/// An admin command the database refuses for want of a privilege (42501) names the role it
/// refused, and writes the grants for it: it said "the database role lacks a grant ... to
/// ROLE", leaving the operator to work out which role a URL, a pooler or a default user ended
/// up as. Read from the server (`current_user`), whether the statement refused is the first
/// (no usage on the schema) or a later one (a table without its grant), for `reconcile`, and
/// for a write the role may not audit.
#[tokio::test(flavor = "multi_thread")]
async fn an_admin_command_refused_for_a_privilege_names_the_role_refused() {
    let db = TestDb::new().await;
    let roles = Roles::create(&db).await;
    let mut m = connect(&as_role(&db.url, &roles.migrator)).await;
    sume_inbox::db::migrate::migrate(&mut m).await.unwrap();
    let runtime = &roles.runtime;
    let url = as_role(&db.url, runtime);
    let grants = [
        format!("the role {runtime} lacks a grant"),
        format!("grant usage on schema sume to {runtime};"),
    ];
    let named = |args: &[&str], words: &[String]| {
        let out = crate::cli_refused::run(args, &crate::cli_refused::settings(&url));
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(78), "{args:?}: {said}");
        for words in words {
            assert!(said.contains(words), "{args:?}: {said}");
        }
        assert!(
            said.contains("retrying cannot fix this"),
            "{args:?}: {said}"
        );
        assert!(!said.contains("ROLE"), "{args:?}: {said}");
    };
    // Never granted anything: the first statement, the schema's version, is refused.
    named(&["stats"], &grants);
    named(
        &["reconcile", "--sume-api-url", "http://127.0.0.1:9"],
        &grants,
    );
    // Granted all but the dead letters' table and writing the audit log: a later statement is
    // refused, and a write that could not be audited is not made.
    m.batch_execute(&format!(
        "grant usage on schema sume to {runtime};
         grant select, insert, update, delete on all tables in schema sume to {runtime};
         revoke all on sume.dead_letters from {runtime};
         revoke insert on sume.audit_log from {runtime};"
    ))
    .await
    .unwrap();
    named(&["dead-letters", "ls"], &grants);
    let audit = format!("the role {runtime} may not write the audit log");
    named(&["replay", "evt_x"], &[audit]);
}

/// The same role, on an instance with keys: its inbox check reads the keys the fleet holds,
/// which it may not. No heartbeat is written either, so nobody's keys are known: a job is
/// judged on this instance's keys alone, as before they were read, and a foreign job's events
/// are still set aside.
#[tokio::test(flavor = "multi_thread")]
async fn without_the_fleets_grants_an_instance_with_keys_judges_on_its_own_keys() {
    let db = TestDb::new().await;
    let roles = Roles::create(&db).await;
    roles.migrate_and_grant(&db).await;
    let runtime = &roles.runtime;
    db.client()
        .await
        .batch_execute(&format!(
            "revoke all on sume.instances, sume.instance_minutes from {runtime};"
        ))
        .await
        .unwrap();
    let sim = sume_sim::RunningSim::start(crate::sweep::sim_config())
        .await
        .unwrap();
    let url = as_role(&db.url, runtime);
    let keys = vec![crate::sweep::main_key()];
    let (check, clock, config) =
        crate::split_keys::inbox_check(&db, &url, &sim.api_url(), keys).await;
    crate::split_keys::waiting_event(&db, "job_nobody_made", clock.now().unwrap()).await;
    clock.advance(config.inbox_grace + Duration::from_secs(1));
    let judged = crate::split_keys::check_once(&check).await;
    assert_eq!(
        (judged.foreign, judged.events_set_aside),
        (1, 1),
        "{judged:?}"
    );
}

/// Runs `sume-inbox COMMAND` against `url` with a secret and ports of its own, `extra` on top,
/// and nothing else of the test's environment.
fn run_as(command: &str, url: &str, extra: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .arg(command)
        .env_clear()
        .env("DATABASE_URL", url)
        .env("SUME_WEBHOOK_SECRET", "whsec_x")
        .env("LISTEN_ADDR", "127.0.0.1:0")
        .env("ADMIN_ADDR", "127.0.0.1:0")
        .envs(extra.iter().copied())
        .output()
        .unwrap()
}

/// The three roles of README's grants, named afresh for each test.
struct Roles {
    migrator: String,
    runtime: String,
    app: String,
}

impl Roles {
    /// Creates them; only the migration role may create a schema in the database.
    async fn create(db: &TestDb) -> Roles {
        let n: u32 = rand::thread_rng().gen();
        let (migrator, runtime, app) = (
            format!("sume_migrator_{n}"),
            format!("sume_runtime_{n}"),
            format!("sume_app_{n}"),
        );
        let dbname = db.url.rsplit('/').next().unwrap().to_owned();
        let admin = db.client().await;
        admin
            .batch_execute(&format!(
                "create role {migrator} login;
                 create role {runtime} login;
                 create role {app} login;
                 grant create on database {dbname} to {migrator};"
            ))
            .await
            .unwrap();
        Roles {
            migrator,
            runtime,
            app,
        }
    }

    /// The migration role creates and owns the schema, then grants what the others need.
    async fn migrate_and_grant(&self, db: &TestDb) {
        let Roles {
            migrator,
            runtime,
            app,
        } = self;
        let mut m = connect(&as_role(&db.url, migrator)).await;
        sume_inbox::db::migrate::migrate(&mut m).await.unwrap();
        m.batch_execute(&format!(
            "grant usage on schema sume to {runtime};
             grant select, insert, update, delete on all tables in schema sume to {runtime};
             grant usage on schema sume to {app};
             grant select, insert on sume.jobs to {app};
             -- As if these grants predated migration 7's feed: closes must still work.
             revoke all on sume.job_closes from {runtime};"
        ))
        .await
        .unwrap();
    }
}
