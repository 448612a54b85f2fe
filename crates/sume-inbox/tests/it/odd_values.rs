//! Values Sume itself might send that PostgreSQL takes but that do not come back, or that it
//! refuses outright: each delivery is still answered 204 and stored, no other delivery fails
//! with it, and no task stops on reading it back.

use crate::support::*;

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// A result nested 128 deep is valid JSON that `jsonb` holds and that the daemon could not
/// read back: it once stopped the attach task on every instance at the first job it met. It
/// is now left out of the `result` column (the raw body keeps it), and a row an older release
/// stored with one is read as having no result.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_nested_too_deep_still_closes_its_job() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let mut deep = Delivery::completed("job_deep");
    deep.body = format!(
        r#"{{"event":"job.completed","job_id":"job_deep","result":{}}}"#,
        nested(128)
    );
    let sent = deep.send(&http, &daemon.url("/webhooks/sume")).await;
    assert_eq!(sent.status(), 204);
    // As an older release stored it: the deep result in the column.
    db.client()
        .await
        .execute(
            "insert into sume.events (event_id, job_id, event_type, status, result, body, signed_at, signature)
             values ('job_old/job.completed', 'job_old', 'job.completed', 'completed', $1::text::jsonb, '\\x7b7d', 0, 'v1=0')",
            &[&nested(128)],
        )
        .await
        .unwrap();
    for job in ["job_deep", "job_old"] {
        let reg = api_register(&http, &daemon, job, "o1").await;
        assert_eq!(reg.status(), 201, "{job}");
        let answer: serde_json::Value = reg.json().await.unwrap();
        assert_eq!(answer["state"], "completed", "{job}: {answer}");
        assert!(answer["result"].is_null(), "{job}: {answer}");
        let read = http
            .get(daemon.admin_url(&format!("/v1/jobs/{job}")))
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), 200, "{job}");
    }
    let body: String = db
        .client()
        .await
        .query_one(
            "select convert_from(body, 'UTF8') from sume.events where job_id = 'job_deep'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(body, deep.body, "the raw body keeps the result");
    let feed = http
        .get(daemon.admin_url("/v1/closes"))
        .send()
        .await
        .unwrap();
    assert_eq!(feed.status(), 200);
    let health = http.get(daemon.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200, "{}", health.text().await.unwrap());
    // The attach task still runs: a later registration still finds its event.
    Delivery::completed("job_after")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    let reg = api_register(&http, &daemon, "job_after", "o2").await;
    let answer: serde_json::Value = reg.json().await.unwrap();
    assert_eq!(answer["state"], "completed", "{answer}");
    daemon.stop().await;
}

/// Letters that do not compress (an index entry is compressed before its size is checked).
fn letters(n: usize) -> String {
    let mut x: u32 = 2_463_534_242;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

/// An event type longer than the inbox's key index holds (`{job}/{type}` over 2704 bytes)
/// once failed every attempt with 503, and every delivery that shared its batch with it.
#[tokio::test(flavor = "multi_thread")]
async fn a_type_too_long_for_the_index_is_stored_with_its_batch() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let sends = (0..30).map(|i| {
        let (http, url) = (http.clone(), url.clone());
        tokio::spawn(async move {
            let mut d = Delivery::completed(&format!("job_long_{i}"));
            if i == 7 {
                d.body = format!(
                    r#"{{"event":"job.{}","job_id":"job_long_7","status":"completed"}}"#,
                    letters(3000)
                );
            }
            d.send(&http, &url).await.status()
        })
    });
    for s in futures_util::future::join_all(sends).await {
        assert_eq!(s.unwrap(), 204);
    }
    assert_eq!(db.scalar("select count(*) from sume.events").await, 30);
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 0);
    let reg = api_register(&http, &daemon, "job_long_7", "o1").await;
    let answer: serde_json::Value = reg.json().await.unwrap();
    assert_eq!(answer["state"], "completed", "{answer}");
    daemon.stop().await;
}

/// A limit of PostgreSQL's own (SQLSTATE class 54: an index entry too large, a value nested
/// too deep) refuses one row as surely as a data exception does: the delivery is kept as a
/// dead letter, the others of its batch are stored, none is answered 503.
#[tokio::test(flavor = "multi_thread")]
async fn a_row_past_a_database_limit_is_kept_as_a_dead_letter() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    db.client()
        .await
        .batch_execute(
            "create function public.past_a_limit() returns trigger language plpgsql as $$
             begin
                 if new.job_id = 'job_limit' then
                     raise exception 'past a limit, for the test' using errcode = '54001';
                 end if;
                 return new;
             end $$;
             create trigger past_a_limit before insert on sume.events
                 for each row execute function public.past_a_limit();",
        )
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let sends = (0..20).map(|i| {
        let (http, url) = (http.clone(), url.clone());
        let job = if i == 3 {
            "job_limit".to_owned()
        } else {
            format!("job_fine_{i}")
        };
        tokio::spawn(async move { Delivery::completed(&job).send(&http, &url).await.status() })
    });
    for s in futures_util::future::join_all(sends).await {
        assert_eq!(s.unwrap(), 204);
    }
    assert_eq!(db.scalar("select count(*) from sume.events").await, 19);
    assert_eq!(
        db.scalar("select count(*) from sume.dead_letters where reason like '%past a limit%'")
            .await,
        1
    );
    daemon.stop().await;
}

/// `jsonb` reads a number as `numeric`, which holds at most 16383 digits after the decimal
/// point: `1e-20000` (0 to `f64`) once failed its row, and a genuine terminal event became a
/// dead letter that a replay could not store either. The check that leaves such a result out
/// of the column agrees with PostgreSQL itself at every bound: the scale, the exponent, and
/// past `f64`'s range.
#[tokio::test(flavor = "multi_thread")]
async fn the_numbers_left_out_of_a_result_are_exactly_those_jsonb_refuses() {
    let db = TestDb::new().await;
    let c = db.client().await;
    let mut tokens: Vec<String> = Vec::new();
    for exponent in -16386..=-16380 {
        for mantissa in ["1", "-1", "0", "-0", "1.5", "10", "0.1", "0.00", "9.99"] {
            tokens.push(format!("{mantissa}e{exponent}"));
        }
    }
    for exponent in [
        1_073_741_821_i64,
        1_073_741_822,
        1_073_741_823,
        99_999_999_999,
    ] {
        tokens.push(format!("0e{exponent}"));
        tokens.push(format!("0E+{exponent}"));
        tokens.push(format!("0e-{exponent}"));
    }
    for scale in [16382, 16383, 16384] {
        tokens.push(format!("0.{}", "0".repeat(scale)));
        tokens.push(format!("1.{}1", "0".repeat(scale - 1)));
    }
    tokens.extend(
        [
            "1e-0016383",
            "1e-0016384",
            "1e308",
            "1e309",
            "1e131071",
            "1e131072",
        ]
        .map(String::from),
    );
    for token in &tokens {
        let text = format!("[{token}]");
        let jsonb_takes = c
            .query_one("select $1::text::jsonb", &[&text])
            .await
            .is_ok();
        let finite = token.parse::<f64>().is_ok_and(f64::is_finite);
        let short = &token[..token.len().min(40)];
        if finite {
            assert_eq!(sume_wire::numeric_holds(token), jsonb_takes, "{short}");
        }
        assert_eq!(
            sume_wire::readable_json_text(&text),
            jsonb_takes && finite,
            "{short}"
        );
    }
    db.drop_database().await;
}

/// A terminal event whose result holds a number `jsonb` refuses is stored without its result
/// and closes its job, as README says of what PostgreSQL cannot hold; it is no dead letter.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_number_past_numerics_scale_still_closes_its_job() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let mut tiny = Delivery::completed("job_bf_bad");
    tiny.body = r#"{"event":"job.completed","job_id":"job_bf_bad","result":{"n":1e-20000}}"#.into();
    let sent = tiny.send(&http, &daemon.url("/webhooks/sume")).await;
    assert_eq!(sent.status(), 204);
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 0);
    assert_eq!(
        db.scalar(
            "select count(*) from sume.events where job_id = 'job_bf_bad' and result is null"
        )
        .await,
        1
    );
    let reg = api_register(&http, &daemon, "job_bf_bad", "o1").await;
    assert_eq!(reg.status(), 201);
    let answer: serde_json::Value = reg.json().await.unwrap();
    assert_eq!(answer["state"], "completed", "{answer}");
    assert!(answer["result"].is_null(), "{answer}");
    daemon.stop().await;
}
