//! The sweep's and attach's queries, and the search by order id, stay on their indexes beside
//! a million closed jobs: the cost grows with the rows due or found, not with the size of the
//! tables. The poll's history write finds its jobs by their key too, and ingest's insert finds
//! a legacy row by an index. The catch-up scan's cost does not grow with the events of
//! jobs that never get a row.

use crate::support::*;

/// The `$now` parameter as production passes it: null, the database's own clock.
const DATABASE_CLOCK: Option<chrono::DateTime<chrono::Utc>> = None;

/// The statements a sweep pass and the catch-up scan run, with sample parameters.
fn statements() -> Vec<(&'static str, String)> {
    use sume_inbox::db::sql;
    [
        sql::JOBS_CLAIM_DUE,
        sql::JOBS_OPEN_BY_KEY,
        sql::JOBS_CLAIM_WALK,
        sql::INBOX_CHECKS_ENQUEUE,
        sql::INBOX_CHECKS_CLAIM,
        sql::EVENTS_ATTACHABLE_SCAN,
        sql::JOBS_LIST_BY_ORDER,
        sql::JOB_POLLS_INSERT,
        sql::EVENTS_INSERT,
    ]
    .iter()
    .map(|s| (s.name(), s.sql().to_owned()))
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn sweep_queries_use_indexes_beside_a_million_closed_jobs() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    c.batch_execute(
        "set session_replication_role = replica; -- no notification per inserted row
         insert into sume.jobs (job_id, order_id, state, sume_status, closed_by, created_at, closed_at)
         select 'job_' || g, 'order_' || g, 'completed', 'completed', 'webhook',
                now() - interval '2 days', now() - interval '2 days'
         from generate_series(1, 1000000) g;
         insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                                  received_at, applied_at, outcome)
         select 'evt_' || g, 'job_' || g, 'completed', '\\x7b7d', 0, 'v1=00',
                now() - interval '2 days', now() - interval '2 days', 'closed'
         from generate_series(1, 1000000) g;
         -- What is due: 200 open jobs, and 50 old events with no row.
         insert into sume.jobs (job_id, created_at, api_key)
         select 'open_' || g, now() - interval '1 hour', case when g % 2 = 0 then 'main' end
         from generate_series(1, 200) g;
         insert into sume.events (event_id, job_id, status, body, signed_at, signature, received_at)
         select 'evt_stray_' || g, 'stray_' || g, 'completed', '\\x7b7d', 0, 'v1=00',
                now() - interval '1 hour'
         from generate_series(1, 50) g;
         set session_replication_role = origin;
         analyze sume.jobs; analyze sume.events; analyze sume.inbox_checks;",
    )
    .await
    .unwrap();

    for (name, sql) in statements() {
        let explain = format!("explain (analyze, buffers, format text) {sql}");
        let tx = c.transaction().await.unwrap();
        let params = params_of(name);
        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
            params.iter().map(|p| p.as_ref()).collect();
        let plan: Vec<String> = tx
            .query(&explain, &refs)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"))
            .iter()
            .map(|r| r.get(0))
            .collect();
        tx.rollback().await.unwrap();
        let plan = plan.join("\n");
        eprintln!("--- {name}\n{plan}");
        for table in ["jobs", "events"] {
            assert!(
                !plan.contains(&format!("Seq Scan on {table}")),
                "{name} scans all of sume.{table}:\n{plan}"
            );
        }
        // Pages touched, not time: a scan of either table would touch tens of thousands.
        let touched: u64 = plan
            .lines()
            .filter(|l| l.trim_start().starts_with("Buffers:"))
            .take(1)
            .flat_map(|l| {
                l.split_whitespace()
                    .filter_map(|w| w.split('=').nth(1)?.parse::<u64>().ok())
            })
            .sum();
        assert!(touched < 5_000, "{name} touched {touched} pages:\n{plan}");
        if name == "events_insert" {
            let probe = plan
                .lines()
                .find(|l| l.contains("on events legacy"))
                .unwrap_or_default();
            assert!(
                probe.contains("Index Scan using events_pkey")
                    || probe.contains("Index Scan using events_job_id"),
                "the legacy probe reads one of the two indexes its statement names:\n{plan}"
            );
        }
    }
    db.drop_database().await;
}

/// The pages one statement touches (its top node's `Buffers:`), from `explain (analyze,
/// buffers)`, and the plan.
async fn pages(
    c: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> (u64, String) {
    let plan: Vec<String> = c
        .query(
            &format!("explain (analyze, buffers, format text) {sql}"),
            params,
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let touched = plan
        .iter()
        .find(|l| l.trim_start().starts_with("Buffers:"))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.split('=').nth(1)?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    (touched, plan.join("\n"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_catch_up_scan_costs_the_same_beside_100_000_events_that_never_find_their_job() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    // 100,000 closed jobs, two days of events whose job never got a row (another workspace's,
    // with no API key to tell), and one event whose job row exists, waiting for the scan.
    c.batch_execute(
        "set session_replication_role = replica; -- no trigger per inserted row
         insert into sume.jobs (job_id, state, sume_status, closed_by, closed_at)
         select 'job_' || g, 'completed', 'completed', 'webhook', now()
         from generate_series(1, 100000) g;
         insert into sume.events (event_id, job_id, status, body, signed_at, signature, received_at)
         select 'evt_stray_' || g, 'stray_' || g, 'completed', '\\x7b7d', 0, 'v1=00',
                now() - interval '2 days' + g * interval '1 second'
         from generate_series(1, 100000) g;
         set session_replication_role = origin;
         insert into sume.jobs (job_id) values ('job_ours');
         insert into sume.events (event_id, job_id, status, body, signed_at, signature)
         values ('evt_ours', 'job_ours', 'completed', '\\x7b7d', 0, 'v1=00');",
    )
    .await
    .unwrap();
    for table in ["sume.jobs", "sume.events"] {
        c.batch_execute(&format!("vacuum analyze {table}"))
            .await
            .unwrap();
    }
    let scan = sume_inbox::db::sql::EVENTS_ATTACHABLE_SCAN.sql();
    let (before, plan) = pages(&c, scan, &[&100i64]).await;
    eprintln!("--- before the sweep marks them: {before} pages\n{plan}");
    // The sweep without API keys marks every event past INBOX_GRACE with no row; autovacuum
    // then clears the index entries the marks left behind (here: at once).
    let store = sume_inbox::db::Store::new(&db.url, 2).unwrap();
    let mut marked = 0;
    loop {
        let n = store
            .events_orphan_late(300.0, true, 20_000, &sume_inbox::db::Clock::Database)
            .await
            .unwrap();
        marked += n;
        if n == 0 {
            break;
        }
    }
    assert_eq!(marked, 100_000);
    c.batch_execute("vacuum analyze sume.events").await.unwrap();
    let (after, plan) = pages(&c, scan, &[&100i64]).await;
    eprintln!("--- after: {after} pages\n{plan}");
    assert!(
        plan.contains("events_awaiting"),
        "the scan reads events_awaiting:\n{plan}"
    );
    assert!(after < 100, "the scan touched {after} pages:\n{plan}");
    assert!(
        before > 20 * after,
        "unmarked, the same events cost the scan {before} pages, marked {after}"
    );
    let job: String = c.query_one(scan, &[&100i64]).await.unwrap().get(0);
    assert_eq!(job, "job_ours");
    asking_again_costs_a_step_wherever_it_starts(&c).await;
    db.drop_database().await;
}

/// An instance with keys clears the marks a keyless sweep left, a step at a time: a step from
/// the first event and one from the middle of the 100,000 touch the same bounded pages.
async fn asking_again_costs_a_step_wherever_it_starts(c: &tokio_postgres::Client) {
    let step = sume_inbox::db::sql::EVENTS_ORPHAN_UNMARK_ASKABLE.sql();
    let none: Option<chrono::DateTime<chrono::Utc>> = None;
    let (first, plan) = pages(c, step, &[&none, &None::<String>, &100i64]).await;
    eprintln!("--- asking again from the first: {first} pages\n{plan}");
    let mid = c
        .query_one(
            "select received_at, event_id from sume.events where event_id = 'evt_stray_50000'",
            &[],
        )
        .await
        .unwrap();
    let at: Option<chrono::DateTime<chrono::Utc>> = Some(mid.get(0));
    let id: Option<String> = Some(mid.get(1));
    let (middle, plan) = pages(c, step, &[&at, &id, &100i64]).await;
    eprintln!("--- from the middle: {middle} pages\n{plan}");
    assert!(
        first < 4_000 && middle < 4_000,
        "{first}, {middle}:\n{plan}"
    );
    let unmarked = "select count(*) from sume.events where orphaned_at is null";
    let n: i64 = c.query_one(unmarked, &[]).await.unwrap().get(0);
    assert_eq!(
        n, 201,
        "two steps of 100 unmarked, and the event of job_ours"
    );
}

/// Sample arguments of each statement of [`statements`].
fn params_of(name: &str) -> Vec<Box<dyn tokio_postgres::types::ToSql + Sync>> {
    match name {
        "jobs_claim_due" => vec![
            Box::new("plan-test"),
            Box::new(100i64),
            Box::new(60.0f64),
            Box::new(120.0f64),
            Box::new(DATABASE_CLOCK),
            Box::new(vec!["walked"]),
            Box::new(vec!["main"]),
        ],
        "jobs_open_by_key" => vec![
            Box::new(120.0f64),
            Box::new(DATABASE_CLOCK),
            Box::new(900.0f64),
        ],
        "jobs_claim_walk" => vec![
            Box::new("plan-test"),
            Box::new("main"),
            Box::new(10_000i64),
            Box::new(60.0f64),
            Box::new(120.0f64),
            Box::new(DATABASE_CLOCK),
        ],
        "inbox_checks_enqueue" => vec![
            Box::new(300.0f64),
            Box::new(100i64),
            Box::new(DATABASE_CLOCK),
        ],
        "inbox_checks_claim" => vec![
            Box::new("plan-test"),
            Box::new(100i64),
            Box::new(60.0f64),
            Box::new(DATABASE_CLOCK),
            Box::new(vec!["main"]),
            Box::new(vec!["main", "alt"]),
        ],
        "events_attachable_scan" => vec![Box::new(100i64)],
        // The console's and the API's search by order id, for the first page.
        "jobs_list_by_order" => {
            let any: Option<String> = None;
            let anytime: Option<chrono::DateTime<chrono::Utc>> = None;
            vec![
                Box::new(""),
                Box::new(any.clone()),
                Box::new(Some("order_500000")),
                Box::new(any),
                Box::new(anytime),
                Box::new(anytime),
                Box::new(anytime),
                Box::new(anytime),
                Box::new(50i64),
            ]
        }
        // A poll batch's history: 100 calls of the open jobs.
        "job_polls_insert" => {
            let ids: Vec<String> = (1..=100).map(|g| format!("open_{}", g % 200 + 1)).collect();
            vec![
                Box::new(ids),
                Box::new(vec!["main"; 100]),
                Box::new(vec!["200 running"; 100]),
                Box::new(vec![12i32; 100]),
                Box::new(vec![0.5f64; 100]),
                Box::new(DATABASE_CLOCK),
            ]
        }
        "events_insert" => events_insert_params(),
        _ => unreachable!(),
    }
}

/// An ingest batch whose header ids name rows stored before 0004_signed_keys (the
/// seeded events, older than the migration) of other jobs: each is probed once.
fn events_insert_params() -> Vec<Box<dyn tokio_postgres::types::ToSql + Sync>> {
    let n = 100;
    let ids: Vec<String> = (1..=n).map(|g| format!("new_{g}/job.completed")).collect();
    let jobs: Vec<String> = (1..=n).map(|g| format!("new_{g}")).collect();
    let hints: Vec<Option<String>> = (1..=n).map(|g| Some(format!("evt_{g}"))).collect();
    let none: Vec<Option<String>> = vec![None; n];
    vec![
        Box::new(ids),
        Box::new(jobs),
        Box::new(none.clone()),
        Box::new(vec![Some("completed"); n]),
        Box::new(none),
        Box::new(vec![b"{}".to_vec(); n]),
        Box::new(vec![0i64; n]),
        Box::new(vec!["v1=00"; n]),
        Box::new(hints),
    ]
}
