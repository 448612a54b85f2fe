//! Retention removes what is old and settled, in bounded batches, and never an open job or an
//! event still waiting in the inbox.

use std::time::Duration;

use sume_inbox::actors::sweep::{Clock, Retention};
use sume_inbox::config::SweepConfig;
use sume_inbox::db::{Ages, Removed, Store};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn retention_removes_only_what_is_old_and_settled() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    seed_a_month(&c).await;
    let store = Store::new(&db.url, 2).unwrap();
    a_bounded_pass_takes_two_batches_of_each_kind(&store).await;
    let now: chrono::DateTime<chrono::Utc> = c.query_one("select now()", &[]).await.unwrap().get(0);
    let clock = Clock::fixed(now);
    let retention = the_service_takes_the_rest(&db, &c, &store, &clock).await;
    fifteen_days_on_every_settled_row_goes(&db, &retention, &clock).await;
    dead_letters_keep_a_retention_of_their_own(&db, &c, &store, &retention, &clock).await;
}

/// A month of rows of every kind beside a few recent ones, and one event still waiting.
async fn seed_a_month(c: &tokio_postgres::Client) {
    c.batch_execute(
        "insert into sume.jobs (job_id, created_at) values ('open_old', now() - interval '30 days');
         insert into sume.jobs (job_id, state, sume_status, closed_by, created_at, closed_at)
         select 'done_' || g, 'completed', 'completed', 'webhook',
                now() - interval '30 days', now() - interval '30 days'
         from generate_series(1, 2500) g;
         -- Applied long ago (2,500), applied recently (1), set aside long ago (3), set aside
         -- recently (1), waiting in the inbox for a month (1), dead letters old (2) and new (1).
         insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                                  received_at, applied_at, outcome)
         select 'old_' || g, 'done_' || g, 'completed', '\\x7b7d', 0, 'v1=00',
                now() - interval '30 days', now() - interval '30 days', 'closed'
         from generate_series(1, 2500) g;
         insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                                  received_at, applied_at, outcome)
         values ('recent', 'done_1', 'completed', '\\x7b7d', 0, 'v1=00', now(), now(), 'ignored');
         insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                                  received_at, set_aside_at, set_aside_reason)
         select 'aside_' || g, 'foreign_' || g, 'completed', '\\x7b7d', 0, 'v1=00',
                now() - interval '30 days', now() - interval '30 days', 'foreign'
         from generate_series(1, 3) g;
         insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                                  received_at, set_aside_at, set_aside_reason)
         values ('aside_new', 'foreign_new', 'completed', '\\x7b7d', 0, 'v1=00', now(), now(), 'foreign');
         insert into sume.inbox_checks (job_id, verdict, checked_at)
         select 'foreign_' || g, 'foreign', now() - interval '30 days' from generate_series(1, 3) g;
         insert into sume.inbox_checks (job_id, verdict, checked_at)
         values ('foreign_new', 'foreign', now());
         insert into sume.events (event_id, job_id, status, body, signed_at, signature, received_at)
         values ('waiting', 'open_old', 'running', '\\x7b7d', 0, 'v1=00', now() - interval '30 days');
         insert into sume.dead_letters (dead_letter_id, reason, body, signed_at, signature, received_at)
         values ('dl_1', 'x', '\\x00', 0, 'v1=00', now() - interval '30 days'),
                ('dl_2', 'x', '\\x00', 0, 'v1=00', now() - interval '30 days'),
                ('dl_3', 'x', '\\x00', 0, 'v1=00', now());
         insert into sume.job_closes (job_id, state, closed_by, closed_at)
         values ('closed_old', 'completed', 'webhook', now() - interval '30 days'),
                ('closed_new', 'completed', 'webhook', now());",
    )
    .await
    .unwrap();
}

/// Bounded: 1,000 rows a statement, two statements a kind in this pass.
async fn a_bounded_pass_takes_two_batches_of_each_kind(store: &Store) {
    let fourteen_days = 14.0 * 86_400.0;
    let first = store
        .retention_pass(
            &Ages {
                settled: fourteen_days,
                dead_letters: Some(20.0 * 86_400.0),
                orphans: 60.0 * 86_400.0,
            },
            1000,
            2,
            &Clock::Database,
        )
        .await
        .unwrap();
    assert_eq!(first.events_applied, 2000);
    assert_eq!(first.events_set_aside, 3);
    assert_eq!(first.dead_letters, 2);
    assert_eq!(first.inbox_checks, 3);
    assert_eq!(
        first.feed, 1,
        "the feed's old entry goes, the recent one stays"
    );
}

/// The retention service takes the rest (it needs no API key), on a clock the test moves.
async fn the_service_takes_the_rest(
    db: &TestDb,
    c: &tokio_postgres::Client,
    store: &Store,
    clock: &Clock,
) -> Retention {
    let cfg = SweepConfig {
        retention: Duration::from_secs(14 * 86_400),
        retention_batch: 1000,
        ..SweepConfig::default()
    };
    let metrics = std::sync::Arc::new(sume_inbox::metrics::Metrics::new());
    let retention = Retention::new(store.clone(), metrics, cfg, clock.clone());
    let removed = retention.run_once().await.unwrap();
    assert_eq!(removed.events_applied, 500);
    assert_eq!(removed.total(), 500);
    let left: Vec<String> = c
        .query("select event_id from sume.events order by event_id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(left, vec!["aside_new", "recent", "waiting"]);
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 1);
    assert_eq!(db.scalar("select count(*) from sume.inbox_checks").await, 1);
    assert_eq!(
        db.scalar("select count(*) from sume.jobs").await,
        2501,
        "jobs are never removed"
    );
    assert_eq!(retention.run_once().await.unwrap(), Removed::default());
    retention
}

/// Fifteen days on, the recent rows are old too: every settled one goes (the foreign check
/// with its set-aside event), never the event still waiting, never a job. Dead letters have
/// their own, longer retention (DEAD_LETTER_RETENTION, 90 days).
async fn fifteen_days_on_every_settled_row_goes(db: &TestDb, retention: &Retention, clock: &Clock) {
    clock.advance(Duration::from_secs(15 * 86_400));
    assert_eq!(
        retention.run_once().await.unwrap(),
        Removed {
            events_applied: 1,
            events_set_aside: 1,
            dead_letters: 0,
            inbox_checks: 1,
            jobs: 0,
            feed: 1,
            orphan_events: 0,
            orphan_checks: 0,
            orphans_unmarked: 0,
        }
    );
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 1);
}

/// Kept for good with `never`, removed after their own retention otherwise.
async fn dead_letters_keep_a_retention_of_their_own(
    db: &TestDb,
    c: &tokio_postgres::Client,
    store: &Store,
    retention: &Retention,
    clock: &Clock,
) {
    // Kept for good with `never`...
    let keep = Retention::new(
        store.clone(),
        std::sync::Arc::new(sume_inbox::metrics::Metrics::new()),
        SweepConfig {
            dead_letter_retention: None,
            ..SweepConfig::default()
        },
        clock.clone(),
    );
    clock.advance(Duration::from_secs(1000 * 86_400));
    assert_eq!(keep.run_once().await.unwrap(), Removed::default());
    // ...removed after their own retention otherwise.
    assert_eq!(retention.run_once().await.unwrap().dead_letters, 1);
    let left: Vec<String> = c
        .query("select event_id from sume.events", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(left, vec!["waiting"]);
    assert_eq!(db.scalar("select count(*) from sume.jobs").await, 2501);
}

/// JOB_RETENTION (off by default, as every pass above shows): closed jobs older than it go,
/// with their disagreements; open jobs, recently closed ones, give-ups still to be asked about
/// again and the events never.
#[tokio::test(flavor = "multi_thread")]
async fn job_retention_removes_only_jobs_closed_long_ago() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    c.batch_execute(
        "insert into sume.jobs (job_id, created_at) values ('open_old', now() - interval '400 days');
         insert into sume.jobs (job_id, state, sume_status, closed_by, created_at, closed_at)
         select 'done_' || g, 'completed', 'completed', 'webhook',
                now() - interval '200 days', now() - interval '200 days'
         from generate_series(1, 1500) g;
         insert into sume.jobs (job_id, state, sume_status, closed_by, created_at, closed_at)
         values ('done_recent', 'failed', 'failed', 'poll', now() - interval '10 days',
                 now() - interval '10 days');
         insert into sume.disagreements (job_id, kept_state, seen_state, seen_status, source)
         values ('done_1', 'completed', 'failed', 'failed', 'webhook'),
                ('done_recent', 'failed', 'completed', 'completed', 'webhook');
         insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                                  received_at, applied_at, outcome)
         values ('e_recent', 'done_recent', 'failed', '\\x7b7d', 0, 'v1=00', now(), now(), 'closed');
         insert into sume.jobs (job_id, state, closed_by, created_at, closed_at, close_reason)
         values ('given_up_old', 'expired', 'give_up', now() - interval '200 days',
                 now() - interval '200 days', 'no answer');
         insert into sume.give_up_rechecks (job_id, until_at, next_at)
         values ('given_up_old', now() + interval '1 day', now() + interval '1 hour');",
    )
    .await
    .unwrap();
    let store = Store::new(&db.url, 2).unwrap();
    let metrics = std::sync::Arc::new(sume_inbox::metrics::Metrics::new());
    let cfg = SweepConfig {
        job_retention: Some(Duration::from_secs(90 * 86_400)),
        retention_batch: 1000,
        ..SweepConfig::default()
    };
    let retention = Retention::new(store.clone(), metrics.clone(), cfg, Clock::Database);
    assert_eq!(retention.run_once().await.unwrap().jobs, 1500);
    let left: Vec<String> = c
        .query("select job_id from sume.jobs order by job_id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    // A give-up still to be asked about again stays, whatever JOB_RETENTION says.
    assert_eq!(left, vec!["done_recent", "given_up_old", "open_old"]);
    assert_eq!(
        db.scalar("select count(*) from sume.disagreements where job_id = 'done_recent'")
            .await,
        1
    );
    assert_eq!(
        db.scalar("select count(*) from sume.disagreements").await,
        1
    );
    assert_eq!(db.scalar("select count(*) from sume.events").await, 1);
    // Off (the default), nothing of a job is touched however old.
    let off = Retention::new(store, metrics, SweepConfig::default(), Clock::Database);
    c.batch_execute(
        "update sume.jobs set closed_at = now() - interval '9 years' where state <> 'open'",
    )
    .await
    .unwrap();
    assert_eq!(off.run_once().await.unwrap().jobs, 0);
    assert_eq!(db.scalar("select count(*) from sume.jobs").await, 3);
}

/// Closed jobs are looked for at the first pass, then not again until their period is over
/// (`sweep/retention.rs` tests the period itself: an hour, or a shorter JOB_RETENTION).
#[tokio::test]
async fn closed_jobs_are_looked_for_at_the_first_pass_then_once_a_period() {
    let db = TestDb::new().await;
    let mut c = db.client().await;
    sume_inbox::db::migrate::migrate(&mut c).await.unwrap();
    let close_one = |id: &'static str| {
        let c = &c;
        async move {
            c.execute(
                "insert into sume.jobs (job_id, state, sume_status, closed_by, created_at, closed_at)
                 values ($1, 'completed', 'completed', 'webhook', now() - interval '3 hours',
                         now() - interval '3 hours')",
                &[&id],
            )
            .await
            .unwrap();
        }
    };
    let store = Store::new(&db.url, 2).unwrap();
    let metrics = std::sync::Arc::new(sume_inbox::metrics::Metrics::new());
    let with = |keep: u64| SweepConfig {
        job_retention: Some(Duration::from_secs(keep)),
        ..SweepConfig::default()
    };
    let minute = Retention::new(store.clone(), metrics.clone(), with(60), Clock::Database);
    let hours = Retention::new(store, metrics, with(2 * 3600), Clock::Database);
    close_one("a").await;
    assert_eq!(minute.run_once().await.unwrap().jobs, 1);
    close_one("b").await;
    assert_eq!(hours.run_once().await.unwrap().jobs, 1);
    close_one("c").await;
    // Neither is due again at once, though job c is old enough.
    assert_eq!(minute.run_once().await.unwrap().jobs, 0);
    assert_eq!(hours.run_once().await.unwrap().jobs, 0);
}
