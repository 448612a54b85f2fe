//! Verdicts made without Sume's answer do not stand: a give-up decided while Sume answered
//! nothing about the job is asked about again and superseded by Sume's own status; one decided
//! after Sume said `running` is a verdict and is left alone; and the breaker that stops
//! verdicts counts our jobs registered without a key, re-read per batch.

use std::time::Duration;

use serde_json::{json, Value};
use sume_inbox::actors::sweep::{PollStats, RecheckStats};
use sume_inbox::config::ApiKey;
use sume_sim::{Faults, RunningSim};
use sume_wire::Secret;

use crate::support::*;
use crate::sweep::{
    clocked_config, count, create, daemon_without_keys, main_key, migrate, register, sim_config,
    wait_ended, Sweep, FOREIGN_KEY, MAIN_KEY,
};

async fn set_faults(http: &reqwest::Client, sim: &RunningSim, faults: Value) {
    let r = http
        .patch(sim.sim_url("faults"))
        .json(&faults)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
}

async fn job_row(db: &TestDb, id: &str) -> (String, String, Option<Value>) {
    let row = db
        .client()
        .await
        .query_one(
            "select state, closed_by, superseded_give_up from sume.jobs where job_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// Sume down (5xx to every job read) past POLL_GIVE_UP: the job is given up blind. Once Sume
/// answers again, the recheck reads its terminal status, which supersedes the give-up through
/// the same fold as a poll, and the feed says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_give_up_made_while_sume_was_down_is_superseded_once_sume_answers() {
    let db = TestDb::new().await;
    let mut sc = sim_config();
    sc.faults = Faults {
        status_5xx: 1.0,
        ..Faults::none()
    };
    let sim = RunningSim::start(sc).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    let id = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 50})).await;
    register(&db, &id).await;
    wait_ended(&http, &sim, std::slice::from_ref(&id)).await;
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    sweep.advance(sweep.config.poll_give_up + Duration::from_secs(1));
    let polled = sweep.poll_once().await;
    assert_eq!(polled.given_up, 1, "{polled:?}");
    assert_eq!(job_state(&db, &id).await.as_deref(), Some("expired"));
    assert_eq!(
        count(&db, "select count(*) from sume.give_up_rechecks").await,
        1,
        "a blind give-up is to be asked about again"
    );
    // Not before its first wait (POLL_MAX_INTERVAL), and only while Sume answers.
    assert_eq!(sweep.recheck_once().await, RecheckStats::default());
    sweep.advance(sweep.config.poll_max_interval * 2);
    let again = sweep.recheck_once().await;
    assert_eq!((again.claimed, again.again), (1, 1), "{again:?}");
    assert_eq!(job_state(&db, &id).await.as_deref(), Some("expired"));
    set_faults(&http, &sim, json!({"status_5xx": 0.0})).await;
    sweep.advance(sweep.config.poll_max_interval * 3);
    let settled = sweep.recheck_once().await;
    assert_eq!(settled.superseded, 1, "{settled:?}");
    let (state, closed_by, superseded) = job_row(&db, &id).await;
    assert_eq!((state.as_str(), closed_by.as_str()), ("completed", "poll"));
    let superseded = superseded.expect("the give-up is kept");
    assert_eq!(superseded["state"], "expired", "{superseded}");
    assert_eq!(
        count(
            &db,
            "select count(*) from sume.job_closes where state = 'completed' and supersedes_give_up"
        )
        .await,
        1,
        "the application hears of it through the feed"
    );
    assert_eq!(
        count(&db, "select count(*) from sume.give_up_rechecks").await,
        0
    );
    sweep.advance(Duration::from_secs(24 * 3600));
    assert_eq!(sweep.recheck_once().await, RecheckStats::default());
}

/// A give-up after Sume kept answering `running` is Sume's word that the job did not end in
/// time: it is not asked about again. One made blind that then reads `running` stands too.
#[tokio::test(flavor = "multi_thread")]
async fn a_give_up_after_sume_said_running_is_not_asked_again() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    migrate(&db).await;
    let http = reqwest::Client::new();
    let hour = 3_600_000;
    let running = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": hour})).await;
    register(&db, &running).await;
    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    sweep.advance(sweep.config.poll_give_up + Duration::from_secs(1));
    assert_eq!(sweep.poll_once().await.given_up, 1);
    assert_eq!(
        count(&db, "select count(*) from sume.give_up_rechecks").await,
        0
    );

    // Blind first (5xx), then Sume says the job is still running: the give-up stands.
    set_faults(&http, &sim, json!({"status_5xx": 1.0})).await;
    let blind = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": hour})).await;
    register(&db, &blind).await;
    sweep.advance(sweep.config.poll_give_up + Duration::from_secs(1));
    assert_eq!(sweep.poll_once().await.given_up, 1);
    assert_eq!(
        count(&db, "select count(*) from sume.give_up_rechecks").await,
        1
    );
    set_faults(&http, &sim, json!({"status_5xx": 0.0})).await;
    sweep.advance(sweep.config.poll_max_interval * 2);
    let stood = sweep.recheck_once().await;
    assert_eq!((stood.claimed, stood.stands), (1, 1), "{stood:?}");
    let (state, closed_by, _) = job_row(&db, &blind).await;
    assert_eq!((state.as_str(), closed_by.as_str()), ("expired", "give_up"));
    assert_eq!(
        count(&db, "select count(*) from sume.give_up_rechecks").await,
        0
    );
}

/// Jobs registered without a key are asked under every key; when every key answers 404 for
/// nearly all of them, the URL or the keys are wrong, not the jobs: the breaker opens, and the
/// next batch of the same pass gives nothing up.
#[tokio::test(flavor = "multi_thread")]
async fn the_breaker_counts_jobs_without_a_key_and_is_read_per_batch() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let mut config = clocked_config();
    config.batch = 50;
    let sweep = Sweep::new(&db, &sim, config).await;
    let c = db.client().await;
    // Ids Sume never made (an application registering them by mistake, or the wrong SUME_API_URL
    // for them): every key answers 404.
    c.execute(
        "insert into sume.jobs (job_id, order_id)
         select 'job_unknown_' || i, 'o' || i from generate_series(1, 200) i",
        &[],
    )
    .await
    .unwrap();
    sweep.advance(sweep.config.poll_give_up + Duration::from_secs(1));
    let polled: PollStats = sweep.poll_once().await;
    assert!(
        polled.given_up <= 50,
        "the breaker opened within the first batch and held the rest: {polled:?}"
    );
    assert!(
        count(&db, "select count(*) from sume.jobs where state = 'open'").await >= 150,
        "{polled:?}"
    );
}

/// A read that Sume's front sends elsewhere (a 307 to a path where nothing is served) is not
/// Sume's answer about the job: the 404 met there neither stands as a give-up's verdict (the
/// job is given up blind and asked about again) nor sets a waiting event aside as foreign.
#[tokio::test(flavor = "multi_thread")]
async fn a_redirected_read_is_not_an_answer_about_the_job() {
    let db = TestDb::new().await;
    let mut sc = sim_config();
    sc.faults = Faults {
        status_redirect: 1.0,
        ..Faults::none()
    };
    let sim = RunningSim::start(sc).await.unwrap();
    let daemon = Daemon::start(daemon_without_keys(&db, &sim)).await;
    let http = reqwest::Client::new();
    let registered = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 50})).await;
    register(&db, &registered).await;
    let hook = daemon.url("/webhooks/sume");
    let waiting = create(
        &http,
        &sim,
        MAIN_KEY,
        Some(&hook),
        json!({"duration_ms": 50}),
    )
    .await;
    wait_for(
        "the unregistered job's event stored",
        Duration::from_secs(30),
        || async { count(&db, "select count(*) from sume.events").await == 1 },
    )
    .await;
    daemon.stop().await;

    let sweep = Sweep::new(&db, &sim, clocked_config()).await;
    sweep.advance(sweep.config.poll_give_up.max(sweep.config.inbox_grace) + Duration::from_secs(1));
    let polled = sweep.poll_once().await;
    assert_eq!(polled.given_up, 1, "{polled:?}");
    assert_eq!(
        count(&db, "select count(*) from sume.give_up_rechecks").await,
        1,
        "given up with no answer about the job: to be asked about again"
    );
    let answer: String = db
        .client()
        .await
        .query_one("select answer from sume.job_polls", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        answer,
        format!("307 to \"/moved/jobs/{registered}/status\""),
        "the call's timeline says where it was sent"
    );
    let checked = sweep.check_once().await;
    assert_eq!(
        (
            checked.foreign,
            checked.events_set_aside,
            checked.checks_inconclusive
        ),
        (0, 0, 1),
        "{checked:?}"
    );
    assert_eq!(
        count(
            &db,
            &format!(
                "select count(*) from sume.events
                 where job_id = '{waiting}' and set_aside_at is null"
            )
        )
        .await,
        1
    );
}

/// A key that cannot be asked (its day's reads spent, or paused by a 429) once sent the check
/// back untouched after the other keys had answered: every pass asked them again, spending
/// their reads without end. Now the answers are recorded and the check waits its backoff.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_that_cannot_be_asked_does_not_spend_the_others_reads() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let foreign = ApiKey {
        name: "foreign".into(),
        key: Secret::new(FOREIGN_KEY),
    };
    let keys = vec![main_key(), foreign];
    let sweep = Sweep::with_keys(&db, &sim.api_url(), clocked_config(), keys).await;
    // A first pass with nothing waiting: both keys pass their check.
    sweep.check_once().await;
    let c = db.client().await;
    c.execute(
        "update sume.rate_buckets set paused_until = now() + interval '1 day' where key_name = 'foreign'",
        &[],
    )
    .await
    .unwrap();
    c.execute(
        "insert into sume.events (event_id, job_id, event_type, status, body, signed_at, signature, received_at)
         values ('job_nobody_made/job.completed', 'job_nobody_made', 'job.completed', 'completed', '\\x7b7d', 0, 'v1=0', $1)",
        &[&sweep.now()],
    )
    .await
    .unwrap();
    sweep.advance(sweep.config.inbox_grace + Duration::from_secs(1));
    let mut requests = 0;
    for _ in 0..4 {
        requests += sweep.check_once().await.requests;
        sweep.advance(Duration::from_secs(1));
    }
    assert_eq!(
        requests, 1,
        "the main key is asked once, then the check waits"
    );
    let answers: Value = c
        .query_one(
            "select answers from sume.inbox_checks where job_id = 'job_nobody_made'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(answers["main"], "404", "{answers}");
    assert_eq!(
        count(
            &db,
            "select count(*) from sume.events where set_aside_at is not null"
        )
        .await,
        0,
        "no verdict without the other key"
    );
}

/// An instance without a job's key (another instance holds it: a key being rolled out) never
/// asks about that job, nor rechecks its give-up: its own keys' 404s say nothing of it. Before,
/// it polled the job under its own key and gave it up on that 404, as a verdict.
#[tokio::test(flavor = "multi_thread")]
async fn an_instance_without_a_jobs_key_never_asks_about_it() {
    let db = TestDb::new().await;
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let foreign = ApiKey {
        name: "foreign".into(),
        key: Secret::new(FOREIGN_KEY),
    };
    let sweep = Sweep::with_keys(&db, &sim.api_url(), clocked_config(), vec![foreign]).await;
    let http = reqwest::Client::new();
    let job = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 20})).await;
    register(&db, &job).await;
    let given_up = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 20})).await;
    register(&db, &given_up).await;
    let c = db.client().await;
    c.execute(
        "update sume.jobs set state = 'expired', closed_by = 'give_up', closed_at = now() where job_id = $1",
        &[&given_up],
    )
    .await
    .unwrap();
    c.execute(
        "insert into sume.give_up_rechecks (job_id, until_at, next_at) values ($1, now() + interval '7 days', now())",
        &[&given_up],
    )
    .await
    .unwrap();
    for _ in 0..3 {
        sweep.advance(sweep.config.poll_give_up + Duration::from_secs(1));
        let polled = sweep.poll_once().await;
        assert_eq!(polled.jobs_claimed, 0, "{polled:?}");
        assert_eq!(sweep.recheck_once().await.claimed, 0);
    }
    assert_eq!(job_state(&db, &job).await.as_deref(), Some("open"));
    assert_eq!(
        count(&db, "select count(*) from sume.give_up_rechecks").await,
        1,
        "the recheck is left to an instance with the key"
    );
}

/// A 429 asking for no wait (`Retry-After: 0`; a date already past reads the same) is waited
/// out as one naming none: before, the job was asked again at every pass, each read spending
/// the key's day.
#[tokio::test(flavor = "multi_thread")]
async fn a_429_asking_for_no_wait_is_not_asked_again_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let db = TestDb::new().await;
    let asked = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().fallback({
        let asked = asked.clone();
        move |uri: axum::http::Uri| async move {
            use axum::response::IntoResponse;
            if !uri.path().ends_with("/status") {
                // The key check: a list, so the key works.
                return axum::Json(json!({"data": [], "has_more": false})).into_response();
            }
            asked.fetch_add(1, Ordering::SeqCst);
            (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "0")],
                r#"{"error":{"code":"rate_limit_exceeded","message":"slow down","details":{}},"request_id":"req_1"}"#,
            )
                .into_response()
        }
    });
    let api = stand_in_api(app).await;
    let sweep = Sweep::with_keys(&db, &api, clocked_config(), vec![main_key()]).await;
    register(&db, "job_behind_a_429").await;
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    sweep.poll_once().await;
    let first = asked.load(Ordering::SeqCst);
    assert_eq!(first, 1);
    for _ in 0..3 {
        sweep.advance(Duration::from_secs(2));
        sweep.poll_once().await;
    }
    assert_eq!(
        asked.load(Ordering::SeqCst),
        first,
        "asked again within the wait"
    );
}

/// A 503 whose `Retry-After` says how long Sume (or its front) is unavailable was not heeded:
/// every job due was asked at once and again at each of its own polls, each read taken from the
/// key's day (an hour's outage could spend most of it). The key is paused for every instance,
/// as after a 429: the first read says so, the other jobs wait, untouched.
#[tokio::test(flavor = "multi_thread")]
async fn a_503_saying_how_long_sume_is_away_pauses_the_key() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let db = TestDb::new().await;
    let asked = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().fallback({
        let asked = asked.clone();
        move |uri: axum::http::Uri| async move {
            use axum::response::IntoResponse;
            if !uri.path().ends_with("/status") {
                return axum::Json(json!({"data": [], "has_more": false})).into_response();
            }
            asked.fetch_add(1, Ordering::SeqCst);
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                [("retry-after", "600")],
                "down for maintenance",
            )
                .into_response()
        }
    });
    let api = stand_in_api(app).await;
    let sweep = Sweep::with_keys(&db, &api, clocked_config(), vec![main_key()]).await;
    for job in ["job_away_1", "job_away_2", "job_away_3"] {
        register(&db, job).await;
    }
    sweep.advance(sweep.config.poll_after + Duration::from_secs(1));
    let polled = sweep.poll_once().await;
    assert_eq!(asked.load(Ordering::SeqCst), 1, "{polled:?}");
    assert_eq!(
        count(
            &db,
            "select count(*) from sume.jobs where last_poll_answer = '503'"
        )
        .await,
        1
    );
    let paused = count(
        &db,
        "select count(*) from sume.rate_buckets where key_name = 'main' and paused_until > now() + interval '590 seconds'",
    )
    .await;
    assert_eq!(paused, 1, "the pause is the fleet's");
}
