//! The webhook endpoint: what each delivery is answered, and what the database then holds.

use std::time::Duration;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn answers_and_stores_exactly_what_it_should() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    unauthentic_deliveries_get_401(&http, &url).await;
    oversized_bodies_and_wrong_routes_are_refused(&http, &daemon, &url).await;
    authentic_deliveries_get_204(&http, &url).await;
    what_is_stored_verifies_again(&db).await;
    daemon.stop().await;
}

async fn unauthentic_deliveries_get_401(http: &reqwest::Client, url: &str) {
    // Wrong secret: 401, nothing stored.
    let mut forged = Delivery::completed("job_forged");
    forged.secret = "whsec_someone_else".into();
    assert_eq!(forged.send(http, url).await.status(), 401);

    // No signature at all: 401.
    let r = http.post(url).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 401);

    // Authentic but stale (and one from too far in the future): 401.
    let mut stale = Delivery::completed("job_stale");
    stale.timestamp = unix_now() - 301;
    assert_eq!(stale.send(http, url).await.status(), 401);
    let mut future = Delivery::completed("job_future");
    future.timestamp = unix_now() + 301;
    assert_eq!(future.send(http, url).await.status(), 401);

    odd_verifying_headers_get_401_saying_what_is_wrong(http, url).await;

    // A body changed after signing: 401.
    let d = Delivery::completed("job_tampered");
    let r = http
        .post(url)
        .header("x-sume-timestamp", d.timestamp.to_string())
        .header(
            "x-sume-signature",
            sume_wire::signature_header(
                &[sume_wire::Secret::new(SECRET)],
                d.timestamp,
                d.body.as_bytes(),
            ),
        )
        .body(d.body.replace("completed", "failed"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

/// The same number spelt otherwise (`+N`, `0N`) would verify, since the signature covers the
/// string as sent, but could never be re-verified from the number kept: refused. A verifying
/// header sent twice, or not as ASCII text, is said to be so, not "missing".
async fn odd_verifying_headers_get_401_saying_what_is_wrong(http: &reqwest::Client, url: &str) {
    let d = Delivery::completed("job_odd_headers");
    let sign = |ts: &str| {
        let mut mac =
            <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(SECRET.as_bytes()).unwrap();
        hmac::Mac::update(&mut mac, format!("{ts}.{}", d.body).as_bytes());
        format!("v1={}", hex::encode(hmac::Mac::finalize(mac).into_bytes()))
    };
    for ts in [format!("+{}", d.timestamp), format!("0{}", d.timestamp)] {
        let r = http
            .post(url)
            .header("x-sume-timestamp", ts.as_str())
            .header("x-sume-signature", sign(&ts))
            .body(d.body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{ts}");
        let text = r.text().await.unwrap();
        assert!(text.contains("decimal digits"), "{ts}: {text}");
    }
    let ts = d.timestamp.to_string();
    let (tss, sig) = (ts.as_bytes(), sign(&ts).into_bytes());
    let not_ascii = [sig.as_slice(), "é".as_bytes()].concat();
    for (timestamps, signature, said) in [
        (
            vec![tss, tss],
            sig.clone(),
            "X-Sume-Timestamp is sent more than once",
        ),
        (vec![tss], not_ascii, "X-Sume-Signature is not ASCII text"),
    ] {
        let mut request = http.post(url).body(d.body.clone());
        for ts in timestamps {
            request = request.header("x-sume-timestamp", ts);
        }
        let value = reqwest::header::HeaderValue::from_bytes(&signature).unwrap();
        let r = request
            .header("x-sume-signature", value)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{said}");
        assert_eq!(r.text().await.unwrap(), said);
    }
}

async fn oversized_bodies_and_wrong_routes_are_refused(
    http: &reqwest::Client,
    daemon: &Daemon,
    url: &str,
) {
    // Over MAX_BODY_BYTES (64 KiB in tests): 413.
    let mut big = Delivery::completed("job_big");
    big.body = format!(
        r#"{{"job_id":"job_big","pad":"{}"}}"#,
        "x".repeat(70 * 1024)
    );
    big.send_too_large(http, url).await;

    // Wrong path, wrong method.
    assert_eq!(
        http.post(daemon.url("/webhooks/other"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(http.get(url).send().await.unwrap().status(), 405);
}

/// A `webhook_url` written with a trailing `/` is served. A signed POST to any other path is
/// Sume (or a relay) sending to the wrong place: still 404, but counted, logged, and its answer
/// says where webhooks go (the admin port's too); an unsigned one, or a GET, is a stranger's,
/// and only gets its 404.
#[tokio::test(flavor = "multi_thread")]
async fn a_trailing_slash_is_served_and_a_signed_post_elsewhere_is_counted() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let slash = Delivery::completed("job_slash");
    let r = slash.send(&http, &daemon.url("/webhooks/sume/")).await;
    assert_eq!(r.status(), 204);
    assert_eq!(
        db.scalar("select count(*) from sume.events where job_id = 'job_slash'")
            .await,
        1
    );
    for path in ["/webhook/sume", "/webhooks/sume//", "/"] {
        let r = Delivery::completed("job_lost")
            .send(&http, &daemon.url(path))
            .await;
        assert_eq!(r.status(), 404, "{path}");
        let said = r.text().await.unwrap();
        assert!(said.contains("POST /webhooks/sume"), "{path}: {said}");
    }
    let admin = Delivery::completed("job_lost")
        .send(&http, &daemon.admin_url("/webhooks/sume"))
        .await;
    assert_eq!(admin.status(), 404);
    let said = admin.text().await.unwrap();
    assert!(said.contains("on LISTEN_ADDR"), "{said}");
    let stranger = http.post(daemon.url("/wp-login.php")).body("x").send();
    assert_eq!(stranger.await.unwrap().status(), 404);
    assert_eq!(
        http.get(daemon.url("/x")).send().await.unwrap().status(),
        404
    );
    assert_eq!(
        db.scalar("select count(*) from sume.events where job_id = 'job_lost'")
            .await,
        0
    );
    let misrouted = r#"sume_inbox_webhooks_total{outcome="misrouted"}"#;
    assert_eq!(crate::port::metric(&daemon, misrouted).await, 3.0);
    daemon.stop().await;
}

/// What counts as misrouted is what the webhook route would read the body of: both signing
/// headers well formed and the timestamp within WEBHOOK_TOLERANCE. A POST naming one header
/// alone, a stale timestamp or a malformed signature is a stranger's, answered a bare 404 and
/// not counted (before, any `X-Sume-Timestamp` was counted, and 300 of them fired
/// `SumeInboxWebhooksMisrouted`).
#[tokio::test(flavor = "multi_thread")]
async fn a_post_whose_signing_headers_would_be_refused_is_not_counted_misrouted() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let (url, now) = (daemon.url("/webhook/sume"), unix_now());
    let zeros = format!("v1={}", "0".repeat(64));
    let strangers: [&[(&str, String)]; 5] = [
        &[("x-sume-timestamp", now.to_string())],
        &[("x-sume-signature", zeros.clone())],
        &[
            ("x-sume-timestamp", (now - 3600).to_string()),
            ("x-sume-signature", zeros.clone()),
        ],
        &[
            ("x-sume-timestamp", now.to_string()),
            ("x-sume-signature", "v1=nothex".into()),
        ],
        &[
            ("x-sume-timestamp", "soon".into()),
            ("x-sume-signature", zeros.clone()),
        ],
    ];
    for headers in strangers {
        let mut post = http.post(&url).body("{}");
        for (name, value) in headers {
            post = post.header(*name, value);
        }
        let r = post.send().await.unwrap();
        assert_eq!(r.status(), 404, "{headers:?}");
        assert_eq!(r.text().await.unwrap(), "", "{headers:?}");
    }
    let mut stale = Delivery::completed("job_lost");
    stale.timestamp = now - 3600;
    assert_eq!(stale.send(&http, &url).await.status(), 404);
    let misrouted = r#"sume_inbox_webhooks_total{outcome="misrouted"}"#;
    assert_eq!(crate::port::metric(&daemon, misrouted).await, 0.0);
    // Well formed and fresh: counted, though only its body could tell whether it is Sume's.
    let r = http.post(&url).header("x-sume-timestamp", now.to_string());
    let r = r.header("x-sume-signature", &zeros).body("{}").send().await;
    assert!(r
        .unwrap()
        .text()
        .await
        .unwrap()
        .contains("POST /webhooks/sume"));
    assert_eq!(crate::port::metric(&daemon, misrouted).await, 1.0);
    daemon.stop().await;
}

/// `/healthz` and `/readyz` serve GET: a signed POST there is misrouted like one to any other
/// path (before, a bare 405, neither counted nor logged); an unsigned one, or another method,
/// still gets its 405.
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_post_to_a_health_check_is_misrouted_and_an_unsigned_one_gets_405() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    for path in ["/healthz", "/readyz"] {
        let r = Delivery::completed("job_lost")
            .send(&http, &daemon.url(path))
            .await;
        assert_eq!(r.status(), 404, "{path}");
        let said = r.text().await.unwrap();
        assert!(said.contains("POST /webhooks/sume"), "{path}: {said}");
        let unsigned = http.post(daemon.url(path)).body("{}").send().await.unwrap();
        assert_eq!(unsigned.status(), 405, "{path}");
        let put = http.put(daemon.url(path)).send().await.unwrap();
        assert_eq!(put.status(), 405, "{path}");
        assert_eq!(put.headers()["allow"], "GET,HEAD", "{path}");
        let get = http.get(daemon.url(path)).send().await.unwrap();
        assert_eq!(get.status(), 200, "{path}");
    }
    let misrouted = r#"sume_inbox_webhooks_total{outcome="misrouted"}"#;
    assert_eq!(crate::port::metric(&daemon, misrouted).await, 2.0);
    daemon.stop().await;
}

/// Authentic garbage and authentic JSON naming no job are kept as dead letters; a good event
/// for a job nobody registered, and its duplicate, are stored once.
async fn authentic_deliveries_get_204(http: &reqwest::Client, url: &str) {
    // Authentic garbage, and authentic JSON naming no job: 204, kept as dead letters.
    let mut garbage = Delivery::completed("x");
    garbage.body = "this is not json".into();
    garbage.event_id = None;
    assert_eq!(garbage.send(http, url).await.status(), 204);
    let mut no_job = Delivery::completed("x");
    no_job.body = r#"{"event":"job.completed"}"#.into();
    no_job.event_id = Some("evt_no_job".into());
    assert_eq!(no_job.send(http, url).await.status(), 204);

    // A good event for a job nobody registered, then its duplicate: 204 both, one row.
    let good = Delivery::completed("job_unknown");
    assert_eq!(good.send(http, url).await.status(), 204);
    assert_eq!(good.send(http, url).await.status(), 204);
}

async fn what_is_stored_verifies_again(db: &TestDb) {
    assert_eq!(db.scalar("select count(*) from sume.events").await, 1);
    assert_eq!(
        db.scalar(
            "select count(*) from sume.events where job_id = 'job_unknown' and applied_at is null"
        )
        .await,
        1
    );
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 2);
    let c = db.client().await;
    let row = c
        .query_one(
            "select reason, body, header_event_id from sume.dead_letters where header_event_id = 'evt_no_job'",
            &[],
        )
        .await
        .unwrap();
    assert!(row.get::<_, String>(0).contains("no job id"));
    assert_eq!(
        row.get::<_, Vec<u8>>(1),
        br#"{"event":"job.completed"}"#.to_vec()
    );
    // The stored body and headers verify again, byte for byte.
    let row = c
        .query_one("select body, signed_at, signature from sume.events", &[])
        .await
        .unwrap();
    let body: Vec<u8> = row.get(0);
    let signed_at: i64 = row.get(1);
    let signature: String = row.get(2);
    assert_eq!(
        sume_wire::verify(
            sume_wire::SignedHeaders {
                timestamp: Some(&signed_at.to_string()),
                signature: Some(&signature)
            },
            &body,
            &[sume_wire::Secret::new(SECRET)],
            signed_at,
            1
        ),
        Ok(0)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn any_configured_secret_verifies_for_rotation() {
    let db = TestDb::new().await;
    let mut cfg = config(&db.url);
    cfg.webhook_secrets = vec![
        sume_wire::Secret::new("whsec_old"),
        sume_wire::Secret::new("whsec_new"),
    ];
    let daemon = Daemon::start(cfg).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    for (job, secret, want) in [
        ("j_old", "whsec_old", 204),
        ("j_new", "whsec_new", 204),
        ("j_bad", SECRET, 401),
    ] {
        let mut d = Delivery::completed(job);
        d.secret = secret.into();
        assert_eq!(d.send(&http, &url).await.status(), want, "{job}");
    }
    assert_eq!(db.scalar("select count(*) from sume.events").await, 2);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn both_body_shapes_and_every_event_id_source() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let mut envelope = Delivery::completed("job_env");
    envelope.body = serde_json::json!({
        "id": "evt_from_body", "type": "job.completed",
        "data": {"object": {"id": "job_env", "object": "job", "status": "succeeded",
                            "result": {"url": "https://cdn.example/a.png"}}}
    })
    .to_string();
    envelope.event_id = None;
    assert_eq!(envelope.send(&http, &url).await.status(), 204);
    let mut bare = Delivery::completed("job_bare");
    bare.event_id = None;
    assert_eq!(bare.send(&http, &url).await.status(), 204);
    let c = db.client().await;
    let rows = c
        .query(
            "select event_id, job_id, status from sume.events order by job_id",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(got[0].1, "job_bare");
    assert_eq!(got[0].0, "job_bare/job.completed", "{got:?}");
    assert_eq!(
        got[1],
        ("evt_from_body".into(), "job_env".into(), "succeeded".into())
    );
    // Redelivered byte for byte without an id header: still one row.
    bare.timestamp = unix_now();
    assert_eq!(bare.send(&http, &url).await.status(), 204);
    assert_eq!(db.scalar("select count(*) from sume.events").await, 2);

    let reg = api_register(&http, &daemon, "job_env", "o1").await;
    assert_eq!(reg.status(), 201);
    let job: serde_json::Value = reg.json().await.unwrap();
    assert_eq!(job["state"], "completed");
    assert_eq!(job["sume_status"], "succeeded");
    assert_eq!(job["result"]["url"], "https://cdn.example/a.png");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_concurrent_deliveries_of_one_event() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    assert_eq!(
        api_register(&http, &daemon, "job_dup", "o1").await.status(),
        201
    );
    let url = daemon.url("/webhooks/sume");
    let sends = (0..20).map(|_| {
        let http = http.clone();
        let url = url.clone();
        tokio::spawn(async move {
            Delivery::completed("job_dup")
                .send(&http, &url)
                .await
                .status()
        })
    });
    for s in futures_util::future::join_all(sends).await {
        assert_eq!(s.unwrap(), 204);
    }
    wait_for("job_dup closed", Duration::from_secs(10), || async {
        job_state(&db, "job_dup").await.as_deref() == Some("completed")
    })
    .await;
    assert_eq!(db.scalar("select count(*) from sume.events").await, 1);
    assert_eq!(
        db.scalar("select count(*) from sume.events where outcome = 'closed'")
            .await,
        1,
        "one transition"
    );
    assert_eq!(
        db.scalar("select count(*) from sume.disagreements").await,
        0
    );
    daemon.stop().await;
}

/// A result with an escaped surrogate that is half of no pair (a caption cut inside an emoji),
/// which `jsonb` refuses, is stored with that half mended into U+FFFD, never turned away from
/// the inbox: the event closes its job with the rest of its result, and the raw body keeps
/// every byte.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_cut_inside_a_character_still_closes_its_job() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let http = reqwest::Client::new();
    let mut cut = Delivery::completed("job_cut");
    cut.body = r#"{"event":"job.completed","job_id":"job_cut","status":"completed","result":{"caption":"a cat \ud83d","url":"https://cdn.example/cut.mp4"}}"#.into();
    assert_eq!(
        cut.send(&http, &daemon.url("/webhooks/sume"))
            .await
            .status(),
        204
    );
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 0);
    let body: String = db
        .client()
        .await
        .query_one(
            "select convert_from(body, 'UTF8') from sume.events where job_id = 'job_cut'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(body, cut.body, "the body is kept whole");
    let reg = api_register(&http, &daemon, "job_cut", "o1").await;
    assert_eq!(reg.status(), 201);
    let job: serde_json::Value = reg.json().await.unwrap();
    assert_eq!(job["state"], "completed");
    assert_eq!(job["result"]["caption"], "a cat \u{fffd}");
    assert_eq!(job["result"]["url"], "https://cdn.example/cut.mp4");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_the_database_refuses_does_not_fail_its_batch() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    // Stands for any row PostgreSQL refuses for its data.
    db.client()
        .await
        .batch_execute(
            "create function public.refuse_poison() returns trigger language plpgsql as $$
             begin
                 if new.job_id = 'job_poison' then
                     raise exception 'refused for the test' using errcode = '22023';
                 end if;
                 return new;
             end $$;
             create trigger refuse_poison before insert on sume.events
                 for each row execute function public.refuse_poison();",
        )
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let sends = (0..30).map(|i| {
        let (http, url) = (http.clone(), url.clone());
        tokio::spawn(async move {
            let job = if i == 7 {
                "job_poison".to_owned()
            } else {
                format!("job_ok_{i}")
            };
            Delivery::completed(&job).send(&http, &url).await.status()
        })
    });
    for s in futures_util::future::join_all(sends).await {
        assert_eq!(s.unwrap(), 204);
    }
    assert_eq!(db.scalar("select count(*) from sume.events").await, 29);
    let reason: String = db
        .client()
        .await
        .query_one(
            "select reason from sume.dead_letters where dead_letter_id = 'job_poison/job.completed'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        reason.contains("could not be stored as an event")
            && reason.contains("refused for the test"),
        "{reason}"
    );
    // Redelivered: still 204, still one dead letter.
    assert_eq!(
        Delivery::completed("job_poison")
            .send(&http, &url)
            .await
            .status(),
        204
    );
    assert_eq!(db.scalar("select count(*) from sume.dead_letters").await, 1);
    daemon.stop().await;
}
