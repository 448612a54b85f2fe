//! The sweep at Sume's scale: where a key has many jobs open, a walk of its list settles them
//! at a page's cost; in whatever order the list comes, every job ends in Sume's state (a list in
//! an order the walk did not expect only costs more reads).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use sume_inbox::actors::sweep::PollStats;
use sume_inbox::config::SweepConfig;
use sume_sim::{JobsAnswer, ListOrder, RunningSim, SimConfig};

use crate::support::*;
use crate::sweep::{
    assert_matches_truth, clocked_config, count, create, daemon_config, migrate, register,
    sim_config, sim_get, wait_ended, Sweep, MAIN_KEY,
};

/// Creates `n` short jobs under the main key; registers those `registered` says.
async fn jobs(
    http: &reqwest::Client,
    sim: &RunningSim,
    db: &TestDb,
    n: usize,
    registered: bool,
) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        let id = create(http, sim, MAIN_KEY, None, json!({"duration_ms": 20})).await;
        if registered {
            register(db, &id).await;
        }
        ids.push(id);
    }
    ids
}

/// Reads of single jobs the simulator answered for the main key.
async fn singles(http: &reqwest::Client, sim: &RunningSim) -> usize {
    let log: sume_sim::RequestsAnswer = sim_get(http, sim, "requests?key=main").await;
    log.requests
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/jobs/job_"))
        .count()
}

async fn walk_with(order: ListOrder) -> (PollStats, usize) {
    walk_on(SimConfig {
        list_order: order,
        ..sim_config()
    })
    .await
}

async fn walk_on(config: SimConfig) -> (PollStats, usize) {
    let order = config.list_order;
    let db = TestDb::new().await;
    let sim = RunningSim::start(config).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    // The workspace made 150 jobs this daemon never saw (another application of the key),
    // then the 120 registered here, whose webhooks were lost.
    let others = jobs(&http, &sim, &db, 150, false).await;
    let ours = jobs(&http, &sim, &db, 120, true).await;
    wait_ended(&http, &sim, &ours).await;
    wait_ended(&http, &sim, &others).await;
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    let polled = sweep.poll_once().await;
    assert_matches_truth(&http, &sim, &db, &ours).await;
    assert_eq!(
        count(&db, "select count(*) from sume.jobs where state = 'open'").await,
        0,
        "{order:?}: {polled:?}"
    );
    let truth: JobsAnswer = sim_get(&http, &sim, "jobs").await;
    assert_eq!(truth.jobs.len(), 270);
    (polled, singles(&http, &sim).await)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_walk_settles_a_hundred_jobs_a_read_in_whatever_order_the_list_comes() {
    // Newest first, as assumed: the 120 are on the first two pages; no job is read by itself.
    let (polled, singles) = walk_with(ListOrder::Newest).await;
    assert_eq!(
        (polled.seen_in_list, polled.closed_by_poll),
        (120, 120),
        "{polled:?}"
    );
    assert_eq!((singles, polled.list_pages), (0, 2), "{polled:?}");
    // Oldest first: the others come first; still every job settled, at more pages.
    let (polled, singles) = walk_with(ListOrder::Oldest).await;
    assert_eq!(polled.closed_by_poll, 120, "{polled:?}");
    let pages = polled.list_pages;
    assert!(
        pages >= 3,
        "costlier: {pages} pages, {singles} single reads"
    );
    assert!(
        singles + pages < 120,
        "still cheaper than a read a job: {singles} + {pages}"
    );
    // By update: pages may repeat or skip jobs; what a walk misses is read by itself.
    let (polled, _) = walk_with(ListOrder::Updated).await;
    assert_eq!(polled.closed_by_poll, 120, "{polled:?}");
}

/// Five open jobs of one key, ended at Sume, their webhooks lost, under a daemon with
/// POLL_AFTER=2s, SWEEP_INTERVAL=500ms and every other setting at its default: each is closed
/// by the sweep once its first poll is due. Before, the first pass walked the key's list while
/// the jobs were younger than POLL_AFTER, claimed none of them, and put the key's next walk
/// half POLL_MAX_INTERVAL (15 minutes) away; nothing but the key's check reached Sume meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_lost_webhook_is_found_at_the_first_poll_at_the_defaults() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let sweep = SweepConfig {
        poll_after: Duration::from_secs(2),
        interval: Duration::from_millis(500),
        ..SweepConfig::default()
    };
    let daemon = Daemon::start(daemon_config(&db, &sim, sweep)).await;
    let http = reqwest::Client::new();
    let mut ours = Vec::new();
    for _ in 0..5 {
        let lost = json!({"duration_ms": 20, "drop": true});
        ours.push(create(&http, &sim, MAIN_KEY, None, lost).await);
    }
    wait_ended(&http, &sim, &ours).await;
    for id in &ours {
        register(&db, id).await;
    }
    // Generous: the first poll is due 2 s after registration, and a pass comes every 0.5 s.
    wait_for(
        "the five jobs closed by the sweep",
        Duration::from_secs(120),
        || async {
            count(
                &db,
                "select count(*) from sume.jobs where closed_by = 'poll'",
            )
            .await
                == 5
        },
    )
    .await;
    assert_matches_truth(&http, &sim, &db, &ours).await;
    daemon.stop().await;
}

/// Jobs registered `at` by the sweep's clock, as if the application had committed them then.
async fn registered_at(db: &TestDb, ids: &[String], at: DateTime<Utc>) {
    db.client()
        .await
        .execute(
            "update sume.jobs set created_at = $2 where job_id = any($1)",
            &[&ids, &at],
        )
        .await
        .unwrap();
}

/// A pass while the key's jobs are younger than POLL_AFTER leaves the key's next walk where it
/// was: the walk comes with the first job's own poll, and so for jobs registered after it.
/// Before, a walk taken while none of them was past POLL_AFTER claimed nothing and put the next
/// one half POLL_MAX_INTERVAL (15 minutes) away, for every job of the key.
#[tokio::test(flavor = "multi_thread")]
async fn a_walk_comes_with_the_first_poll_of_the_key_s_oldest_job() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    let first = jobs(&http, &sim, &db, 5, true).await;
    wait_ended(&http, &sim, &first).await;
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    registered_at(&db, &first, sweep.now()).await;
    let early = sweep.poll_once().await;
    assert_eq!((early.jobs_claimed, early.requests), (0, 0), "{early:?}");
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    let walked = sweep.poll_once().await;
    assert_eq!(
        (walked.list_pages, walked.closed_by_poll),
        (1, 5),
        "{walked:?}"
    );
    // Five more, registered after that walk: the next comes with their first poll.
    let later = jobs(&http, &sim, &db, 5, true).await;
    wait_ended(&http, &sim, &later).await;
    registered_at(&db, &later, sweep.now()).await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    let walked = sweep.poll_once().await;
    assert_eq!(
        (walked.list_pages, walked.closed_by_poll),
        (1, 5),
        "{walked:?}"
    );
    assert_matches_truth(&http, &sim, &db, &[first, later].concat()).await;
    assert_eq!(singles(&http, &sim).await, 0);
}

/// With few reads left today, a key's walks are spread out to UTC midnight, a fifth of the
/// day's reads kept back: jobs that fall due meanwhile wait for the next walk (a read of each
/// would spend what the pace keeps), which settles them when the pace allows.
#[tokio::test(flavor = "multi_thread")]
async fn walks_keep_to_the_pace_of_the_reads_left_today() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    // Ten reads a day: two kept back.
    let config = SweepConfig {
        daily_reads: 10,
        ..clocked_config()
    };
    let sweep = Sweep::new(&db, &sim, config).await;
    // One in the morning of the database's UTC day: 23 hours to midnight.
    let morning = sweep
        .now()
        .date_naive()
        .and_hms_opt(1, 0, 0)
        .unwrap()
        .and_utc();
    sweep.set(morning);
    let first = jobs(&http, &sim, &db, 5, true).await;
    wait_ended(&http, &sim, &first).await;
    registered_at(&db, &first, morning - chrono::Duration::minutes(3)).await;
    let walked = sweep.poll_once().await;
    assert_eq!(
        (walked.list_pages, walked.closed_by_poll),
        (1, 5),
        "{walked:?}"
    );
    // The key's check and a page: 8 reads left, 6 beyond the 2 kept back; one page at that
    // pace is 23 h / 6, so the next walk comes at 4:50.
    let second = jobs(&http, &sim, &db, 5, true).await;
    wait_ended(&http, &sim, &second).await;
    registered_at(&db, &second, morning).await;
    sweep.set(morning + chrono::Duration::minutes(229));
    assert_eq!(sweep.poll_once().await, PollStats::default());
    sweep.set(morning + chrono::Duration::minutes(231));
    let walked = sweep.poll_once().await;
    assert_eq!(
        (walked.list_pages, walked.closed_by_poll),
        (1, 5),
        "{walked:?}"
    );
    assert_matches_truth(&http, &sim, &db, &[first, second].concat()).await;
    assert_eq!(singles(&http, &sim).await, 0);
    let used = db
        .scalar("select day_used::int8 from sume.rate_buckets where key_name = 'main'")
        .await;
    assert_eq!(used, 3, "the key's check and two pages");
}

/// A list whose cursor does not move on (every page read with a cursor answers it again): the
/// walk stops at the first cursor it had seen before and reads by themselves the jobs it did
/// not see, instead of reading the same page up to its page cap (119 pages here).
#[tokio::test(flavor = "multi_thread")]
async fn a_list_that_does_not_move_on_is_left_at_once() {
    let mut config = SimConfig {
        list_order: ListOrder::Oldest,
        ..sim_config()
    };
    config.faults.list_cursor_stuck = 1.0;
    // Oldest first: 100 of the others, then 50 more and 50 of ours, whose cursor comes back.
    let (polled, singles) = walk_on(config).await;
    assert_eq!(polled.closed_by_poll, 120, "{polled:?}");
    assert_eq!(
        (polled.list_pages, polled.seen_in_list, singles),
        (2, 50, 70),
        "{polled:?}"
    );
}

/// A few open jobs: a walk would cost as much as reading them; they are read one by one, and
/// no page is read.
#[tokio::test(flavor = "multi_thread")]
async fn a_few_open_jobs_are_read_one_by_one() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    let ours = jobs(&http, &sim, &db, 1, true).await;
    wait_ended(&http, &sim, &ours).await;
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    let polled = sweep.poll_once().await;
    assert_eq!(
        (polled.closed_by_poll, polled.list_pages),
        (1, 0),
        "{polled:?}"
    );
    assert_eq!(singles(&http, &sim).await, 1);
}

/// Jobs registered an hour after Sume created them (a backfill, a submit path that commits
/// late): the walk reads on to them. Before, it stopped at the first page whose jobs were
/// older than the oldest registration (less INBOX_GRACE), and read the rest one by one, at
/// every walk.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_registered_long_after_their_creation_are_still_found_by_the_walk() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    let ours = jobs(&http, &sim, &db, 120, true).await;
    let others = jobs(&http, &sim, &db, 30, false).await;
    wait_ended(&http, &sim, &ours).await;
    wait_ended(&http, &sim, &others).await;
    db.client()
        .await
        .execute(
            "update sume.jobs set created_at = created_at + interval '1 hour'",
            &[],
        )
        .await
        .unwrap();
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    sweep.advance(Duration::from_secs(3600) + sweep.config.poll_after + Duration::from_secs(1));
    let polled = sweep.poll_once().await;
    assert_matches_truth(&http, &sim, &db, &ours).await;
    // Newest first: the 30 others, then ours over two pages.
    assert_eq!(
        (
            polled.seen_in_list,
            polled.list_pages,
            singles(&http, &sim).await
        ),
        (120, 2, 0),
        "{polled:?}"
    );
}

/// Jobs the list does not show are read by themselves only once their own poll is due: a walk
/// every half POLL_MAX_INTERVAL does not read them sooner than their backoff would. Before,
/// every walk read each job it had not seen, whatever its backoff said.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_the_list_does_not_show_is_read_only_when_its_poll_is_due() {
    let mut config = SimConfig {
        list_order: ListOrder::Oldest,
        ..sim_config()
    };
    config.faults.list_cursor_stuck = 1.0;
    let db = TestDb::new().await;
    let sim = RunningSim::start(config).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    // Jobs still running: walks leave them open. The list shows two pages, then its cursor
    // does not move on.
    for _ in 0..250 {
        let id = create(
            &http,
            &sim,
            MAIN_KEY,
            None,
            json!({"duration_ms": 3_600_000}),
        )
        .await;
        register(&db, &id).await;
    }
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    let first = sweep.poll_once().await;
    let read_alone = singles(&http, &sim).await;
    assert_eq!((first.seen_in_list, read_alone), (200, 50), "{first:?}");
    // The 50 read alone back off for hours; the 200 the list showed are due again.
    db.client()
        .await
        .batch_execute(
            "update sume.jobs set next_poll_at = case when last_poll_answer like '%(list)' \
             then now() else now() + interval '10 hours' end",
        )
        .await
        .unwrap();
    sweep.advance(sweep.config.poll_max_interval / 2 + Duration::from_secs(1));
    let second = sweep.poll_once().await;
    assert!(second.list_pages >= 1, "a second walk: {second:?}");
    assert_eq!(singles(&http, &sim).await, read_alone, "{second:?}");
}

/// A list showing one of our jobs twice, `failed` then `completed`: the list settles nothing of
/// it and a read of its own decides (here, `running`: it stays open). Before, the first entry
/// closed it, and the second was dropped without a word.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_listed_twice_saying_two_things_is_read_by_itself() {
    let db = TestDb::new().await;
    migrate(&db).await;
    for id in ["job_w1", "job_w2", "job_w3"] {
        register(&db, id).await;
    }
    let list = json!({"data": [
        {"id": "job_w1", "status": "completed"},
        {"id": "job_w2", "status": "failed"},
        {"id": "job_w2", "status": "completed"},
        {"id": "job_w3", "status": "completed"},
    ], "has_more": false});
    let polled = walk_once(&db, list.to_string(), "running").await;
    assert_eq!(
        (polled.list_pages, polled.closed_by_poll, polled.requests),
        (1, 2, 1),
        "{polled:?}"
    );
    assert_eq!(job_state(&db, "job_w2").await.as_deref(), Some("open"));
    assert_eq!(job_state(&db, "job_w1").await.as_deref(), Some("completed"));
}

/// A list page on which one job's `result` holds a number past `f64` once did not read as a
/// page at all: the walk stopped there and every job on it waited for a read of its own. The
/// page now reads; that job closes without its result, the others with theirs.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_page_holding_an_odd_result_settles_every_job_on_it() {
    let db = TestDb::new().await;
    migrate(&db).await;
    for id in ["job_o1", "job_o2", "job_o3"] {
        register(&db, id).await;
    }
    let page = r#"{"data":[
        {"id":"job_o1","status":"completed","result":{"n":1e400}},
        {"id":"job_o2","status":"failed","error":{"code":"x"}},
        {"id":"job_o3","status":"completed","result":{"url":"u"}}
    ],"has_more":false}"#;
    let polled = walk_once(&db, page.to_owned(), "running").await;
    assert_eq!(
        (
            polled.list_pages,
            polled.seen_in_list,
            polled.closed_by_poll
        ),
        (1, 3, 3),
        "{polled:?}"
    );
    let results: Vec<(String, String, Option<serde_json::Value>)> = db
        .client()
        .await
        .query(
            "select job_id, state, result from sume.jobs order by job_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        results,
        [
            ("job_o1".into(), "completed".into(), None),
            (
                "job_o2".into(),
                "failed".into(),
                Some(json!({"error": {"code": "x"}}))
            ),
            (
                "job_o3".into(),
                "completed".into(),
                Some(json!({"url": "u"}))
            ),
        ]
    );
}

/// A list page holding an entry that is no job (`null`, one without a `status`) did not read
/// at all, nor one repeating a key: the walk stopped there and every job on the page waited
/// for a read of its own. The page reads without the entry; its jobs settle by it.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_page_holding_an_entry_that_is_no_job_settles_the_others() {
    let db = TestDb::new().await;
    migrate(&db).await;
    for id in ["job_w1", "job_w2", "job_w3"] {
        register(&db, id).await;
    }
    let page = r#"{"data":[
        {"id":"job_w1","status":"completed"}, null, {"id":"job_w2"},
        {"id":"job_w3","status":"running","status":"failed"}
    ],"has_more":false}"#;
    let polled = walk_once(&db, page.to_owned(), "running").await;
    assert_eq!(
        (
            polled.list_pages,
            polled.seen_in_list,
            polled.closed_by_poll
        ),
        (1, 2, 2),
        "{polled:?}"
    );
    for (job, state) in [
        ("job_w1", "completed"),
        ("job_w2", "open"),
        ("job_w3", "failed"),
    ] {
        assert_eq!(job_state(&db, job).await.as_deref(), Some(state), "{job}");
    }
}

/// One poll of the registered jobs through a stand-in for Sume whose list is `page` (one page,
/// as sent) and whose status reads answer `status` for any job, the walk on.
async fn walk_once(db: &TestDb, page: String, status: &'static str) -> PollStats {
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let page = page.clone();
        async move {
            use axum::response::IntoResponse;
            match uri.path().strip_suffix("/status") {
                Some(path) => {
                    let id = path.rsplit('/').next().unwrap_or_default().to_owned();
                    axum::Json(json!({"id": id, "status": status})).into_response()
                }
                None => ([("content-type", "application/json")], page).into_response(),
            }
        }
    });
    let api = stand_in_api(app).await;
    let sweep = Sweep::with_keys(db, &api, clocked_config(), vec![crate::sweep::main_key()]).await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    sweep.poll_once().await
}

/// A hundred jobs registered, and a list page of them all with results of 12 KB each, past the
/// client's 1 MiB cap; with the number of entries whole before the cut (the `,` after them
/// within it).
pub(crate) async fn page_past_the_cap(db: &TestDb) -> (String, usize) {
    let text = "x".repeat(12_000);
    let ids: Vec<String> = (0..100).map(|n| format!("job_big{n:03}")).collect();
    for id in &ids {
        register(db, id).await;
    }
    let entries: Vec<String> = ids
        .iter()
        .map(|id| json!({"id": id, "status": "completed", "result": {"text": text}}).to_string())
        .collect();
    let page = format!(r#"{{"data":[{}],"has_more":false}}"#, entries.join(","));
    assert!(page.len() > sume_wire::status_client::MAX_ANSWER_BYTES);
    let mut end = r#"{"data":["#.len();
    let whole = entries
        .iter()
        .take_while(|e| {
            end += e.len() + 1;
            end <= sume_wire::status_client::MAX_ANSWER_BYTES
        })
        .count();
    assert!((80..100).contains(&whole), "{whole}");
    (page, whole)
}

/// A list page past 1 MiB (a hundred jobs with results of 12 KB) did not read at all: the walk
/// stopped there and every job on it was read by itself, a hundred reads instead of one. The
/// page is now read up to the cut: the jobs whole before it settle by the list (with their
/// results), the one cut in the middle and those after it by reads of their own.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_page_past_the_cap_settles_the_jobs_whole_before_the_cut() {
    let db = TestDb::new().await;
    migrate(&db).await;
    let (page, whole) = page_past_the_cap(&db).await;
    let polled = walk_once(&db, page, "failed").await;
    assert_eq!(
        (
            polled.list_pages,
            polled.seen_in_list,
            polled.closed_by_poll,
            polled.requests
        ),
        (1, whole, 100, 100 - whole),
        "{polled:?}"
    );
    // The list said `completed` (with the result), a read of its own `failed`.
    let states: Vec<(String, String, bool)> = db
        .client()
        .await
        .query(
            "select job_id, state, result is not null from sume.jobs order by job_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let by_list = states.iter().take_while(|s| s.1 == "completed").count();
    assert_eq!(by_list, whole, "{states:?}");
    assert!(states[..whole].iter().all(|s| s.2), "{states:?}");
    assert!(
        states[whole..].iter().all(|s| s.1 == "failed"),
        "{states:?}"
    );
}
