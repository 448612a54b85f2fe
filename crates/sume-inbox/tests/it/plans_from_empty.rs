//! The hot statements keep a right plan from an empty inbox to a million rows. Every install
//! starts on empty tables, and a connection keeps the plans it made then: a generic plan (what
//! `plan_cache_mode = auto` settles on after five runs) chosen while sume.jobs and sume.events
//! were empty may hash or scan a whole table, which costs nothing on the first day and the
//! whole table on every batch once the inbox has grown, until something re-plans (an ANALYZE,
//! a restart, a new connection). Here one connection prepares each statement of ingest,
//! attach, the catch-up scan and the sweep's claims while the tables are empty, with
//! `force_generic_plan`, and runs it once, which fixes its plan; another grows the tables to a
//! million rows each with autovacuum off for them (so nothing re-plans); then the first runs
//! each again under `explain (analyze, buffers, format json) execute`. A statement fails when
//! a node of its plan reads more than a bounded number of rows or is a sequential scan of
//! sume.jobs or sume.events. The plan's estimated cost must be the one computed while the
//! tables were empty: proof that it is still that plan.

use serde_json::Value;

use crate::support::*;

/// Rows each table is grown to.
const GROWN: i64 = 1_000_000;
/// The rows any one node of a hot statement may read (rows out plus rows filtered away, over
/// all its loops): a batch is 100 rows, and what is due at once a few hundred.
const MAX_ROWS_PER_NODE: f64 = 10_000.0;
/// Rows in a batch.
const BATCH: usize = 100;

/// A `text[]` literal.
fn texts(items: impl IntoIterator<Item = String>) -> String {
    let quoted: Vec<String> = items
        .into_iter()
        .map(|s| format!("'{}'", s.replace('\'', "''")))
        .collect();
    format!("array[{}]::text[]", quoted.join(","))
}

/// A `text[]` of one value, `BATCH` times.
fn same(value: &str) -> String {
    texts((0..BATCH).map(|_| value.to_owned()))
}

/// Job ids of a batch: half of them registered (`job_<n>`, closed), half never seen.
fn batch_jobs() -> Vec<String> {
    (1..=BATCH)
        .map(|g| {
            if g % 2 == 0 {
                format!("job_{}", g * 7919)
            } else {
                format!("new_{g}")
            }
        })
        .collect()
}

/// The hot statements, each with the arguments of a typical run as SQL expressions.
fn hot() -> Vec<(&'static str, &'static str, String)> {
    use sume_inbox::db::sql;
    let jobs = batch_jobs();
    let events: Vec<String> = jobs.iter().map(|j| format!("{j}/job.completed")).collect();
    // Header ids that differ from the body's key, naming rows stored before 0004_signed_keys
    // (the grown events): the legacy probe runs for every row.
    let hints: Vec<String> = (1..=BATCH).map(|g| format!("evt_{}", g * 7919)).collect();
    let bodies = format!("array_fill('\\x7b7d'::bytea, array[{BATCH}])");
    let args = |list: &[String]| list.join(", ");
    let insert = args(&[
        texts(events.clone()),
        texts(jobs.clone()),
        same("job.completed"),
        same("completed"),
        same("{\"url\": \"https://cdn.example/x.mp4\"}"),
        bodies,
        format!("array_fill(0::int8, array[{BATCH}])"),
        same("v1=00"),
        texts(hints.clone()),
    ]);
    let apply = args(&[
        texts(jobs.clone()),
        same("completed"),
        same("completed"),
        same("webhook"),
        texts(events.clone()),
        format!("array_fill(null::jsonb, array[{BATCH}])"),
        format!("array_fill(false, array[{BATCH}])"),
    ]);
    let polls = args(&[
        texts((1..=BATCH).map(|g| format!("open_{}", g % 200 + 1))),
        same("main"),
        same("200 running"),
        format!("array_fill(12, array[{BATCH}])"),
        format!("array_fill(0.5::float8, array[{BATCH}])"),
        "null".into(),
    ]);
    let ids = texts(jobs);
    let mut hot = vec![
        // Ingest.
        (sql::EVENTS_INSERT.name(), sql::EVENTS_INSERT.sql(), insert),
        // What ids not new hold (a batch of redeliveries: every id has a row).
        (
            sql::EVENTS_STORED.name(),
            sql::EVENTS_STORED.sql(),
            texts(hints),
        ),
        // Attach.
        (
            sql::EVENTS_ATTACHABLE.name(),
            sql::EVENTS_ATTACHABLE.sql(),
            ids.clone(),
        ),
        (sql::JOBS_LOCK.name(), sql::JOBS_LOCK.sql(), ids.clone()),
        (
            sql::EVENTS_PENDING_FOR_JOBS.name(),
            sql::EVENTS_PENDING_FOR_JOBS.sql(),
            ids.clone(),
        ),
        (
            sql::EVENTS_MARK_APPLIED.name(),
            sql::EVENTS_MARK_APPLIED.sql(),
            args(&[texts(events), same("closed")]),
        ),
        (sql::JOBS_APPLY.name(), sql::JOBS_APPLY.sql(), apply),
        (sql::JOBS_POLL_NOW.name(), sql::JOBS_POLL_NOW.sql(), ids),
    ];
    hot.extend(scan_and_sweep(polls));
    hot
}

/// The catch-up scan's and the sweep's statements; `polls`: a poll batch's history.
fn scan_and_sweep(polls: String) -> Vec<(&'static str, &'static str, String)> {
    use sume_inbox::db::sql;
    vec![
        // The catch-up scan.
        (
            sql::EVENTS_ATTACHABLE_SCAN.name(),
            sql::EVENTS_ATTACHABLE_SCAN.sql(),
            "100".into(),
        ),
        // The sweep.
        (
            sql::JOBS_CLAIM_DUE.name(),
            sql::JOBS_CLAIM_DUE.sql(),
            "'plans', 100, 60, 120, null, array['walked'], array['main']".into(),
        ),
        (
            sql::JOBS_OPEN_BY_KEY.name(),
            sql::JOBS_OPEN_BY_KEY.sql(),
            "120, null, 900".into(),
        ),
        (
            sql::JOBS_CLAIM_WALK.name(),
            sql::JOBS_CLAIM_WALK.sql(),
            "'plans', 'main', 10000, 60, 120, null".into(),
        ),
        (
            sql::JOB_POLLS_INSERT.name(),
            sql::JOB_POLLS_INSERT.sql(),
            polls,
        ),
        (
            sql::INBOX_CHECKS_ENQUEUE.name(),
            sql::INBOX_CHECKS_ENQUEUE.sql(),
            "300, 100, null".into(),
        ),
        // An instance with keys, asking again about what was marked while no key could.
        (
            sql::EVENTS_ORPHAN_UNMARK_ASKABLE.name(),
            sql::EVENTS_ORPHAN_UNMARK_ASKABLE.sql(),
            "null, null, 100".into(),
        ),
        (
            sql::INBOX_CHECKS_CLAIM.name(),
            sql::INBOX_CHECKS_CLAIM.sql(),
            "'plans', 100, 60, null, array['main'], array['main', 'alt']".into(),
        ),
    ]
}

/// Runs `explain (analyze, buffers, format json) execute` of one prepared statement in a
/// transaction rolled back after, and answers the plan's top node.
async fn explain(c: &tokio_postgres::Client, name: &str, args: &str) -> Value {
    c.batch_execute("begin").await.unwrap();
    let text = c
        .simple_query(&format!(
            "explain (analyze, buffers, format json) execute {name}({args})"
        ))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
        .into_iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .expect("a plan");
    c.batch_execute("rollback").await.unwrap();
    let plan: Value = serde_json::from_str(&text).unwrap();
    plan[0]["Plan"].clone()
}

/// What is wrong with one node and those under it: rows read past the bound, or a sequential
/// scan of a grown table.
fn faults(node: &Value, out: &mut Vec<String>) {
    let num = |k: &str| node[k].as_f64().unwrap_or(0.0);
    let loops = num("Actual Loops");
    let read = loops
        * (num("Actual Rows")
            + num("Rows Removed by Filter")
            + num("Rows Removed by Index Recheck")
            + num("Rows Removed by Join Filter"));
    let kind = node["Node Type"].as_str().unwrap_or("?");
    let relation = node["Relation Name"].as_str().unwrap_or("");
    let alias = node["Alias"].as_str().unwrap_or(relation);
    let label = match node["Parent Relationship"].as_str() {
        Some("SubPlan") | Some("InitPlan") => format!(
            "{kind} on {relation} {alias} ({})",
            node["Subplan Name"].as_str().unwrap_or("subplan")
        ),
        _ if relation.is_empty() => kind.to_owned(),
        _ => format!("{kind} on {relation} {alias}"),
    };
    if kind == "Seq Scan" && (relation == "events" || relation == "jobs") {
        out.push(format!("{label}: a sequential scan of sume.{relation}"));
    } else if read > MAX_ROWS_PER_NODE {
        out.push(format!("{label}: read {read} rows"));
    }
    for child in node["Plans"].as_array().into_iter().flatten() {
        faults(child, out);
    }
}

/// Grows sume.jobs and sume.events to [`GROWN`] closed jobs and applied events (stored
/// before 0004_signed_keys, so a header id naming one is probed), plus what a sweep finds
/// due: 200 open jobs (half of key `main`), 100 waiting events of theirs, 50 events with no
/// job row past the grace, and their 50 pending checks.
async fn grow(url: &str) {
    let c = connect(url).await;
    c.batch_execute(&format!(
        "set session_replication_role = replica; -- no trigger per inserted row
         insert into sume.jobs (job_id, order_id, state, sume_status, closed_by, created_at,
                                closed_at)
         select 'job_' || g, 'order_' || g, 'completed', 'completed', 'webhook',
                now() - interval '2 days', now() - interval '2 days'
         from generate_series(1, {GROWN}) g;
         insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                                  received_at, applied_at, outcome)
         select 'evt_' || g, 'job_' || g, 'completed', '\\x7b7d', 0, 'v1=00',
                now() - interval '2 days', now() - interval '2 days', 'closed'
         from generate_series(1, {GROWN}) g;
         insert into sume.jobs (job_id, created_at, api_key)
         select 'open_' || g, now() - interval '1 hour', case when g % 2 = 0 then 'main' end
         from generate_series(1, 200) g;
         insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                                  received_at)
         select 'evt_open_' || g, 'open_' || g, 'completed', '\\x7b7d', 0, 'v1=00',
                now() - interval '10 minutes'
         from generate_series(1, 100) g;
         insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                                  received_at)
         select 'evt_stray_' || g, 'stray_' || g, 'completed', '\\x7b7d', 0, 'v1=00',
                now() - interval '1 hour'
         from generate_series(1, 50) g;
         insert into sume.inbox_checks (job_id, next_check_at)
         select 'stray_' || g, now() - interval '1 minute' from generate_series(1, 50) g;"
    ))
    .await
    .unwrap();
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn hot_statements_planned_on_empty_tables_stay_on_their_indexes_at_a_million_rows() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    // Nothing may re-plan behind the test's back: no autovacuum (nor its analyze) on the
    // tables that grow or that the statements read.
    c.batch_execute(
        "alter table sume.jobs set (autovacuum_enabled = false);
         alter table sume.events set (autovacuum_enabled = false);
         alter table sume.inbox_checks set (autovacuum_enabled = false);
         alter table sume.job_polls set (autovacuum_enabled = false);
         set plan_cache_mode = force_generic_plan;",
    )
    .await
    .unwrap();
    let statements = hot();
    let mut empty_costs = Vec::new();
    for (name, sql, args) in &statements {
        c.batch_execute(&format!("prepare {name} as {sql}"))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        // The first run makes the generic plan, from the empty tables' statistics.
        let plan = explain(&c, name, args).await;
        empty_costs.push(plan["Total Cost"].as_f64().unwrap());
    }

    grow(&db.url).await;

    let mut failures = Vec::new();
    for ((name, _, args), empty_cost) in statements.iter().zip(empty_costs) {
        let plan = explain(&c, name, args).await;
        assert_eq!(
            plan["Total Cost"].as_f64().unwrap(),
            empty_cost,
            "{name} was planned again: the test no longer sees the plan made on empty tables"
        );
        let mut found = Vec::new();
        faults(&plan, &mut found);
        let pages = plan["Shared Hit Blocks"].as_u64().unwrap_or(0)
            + plan["Shared Read Blocks"].as_u64().unwrap_or(0);
        eprintln!("--- {name}: {pages} pages\n{plan:#}");
        for fault in found {
            failures.push(format!("{name}: {fault}"));
        }
    }
    assert!(
        failures.is_empty(),
        "plans made on empty tables read the grown tables whole:\n{}",
        failures.join("\n")
    );
    db.drop_database().await;
}
