//! The feed of closes (`GET /v1/closes?after=`), its notification and the job list: a
//! consumer gets every close once and in order, when closes commit out of order and when the
//! daemon it reads from restarts; a give-up superseded by Sume is an entry of its own. The
//! feed as applications first read it, `GET /v1/jobs?closed_after=`, answers as it did.

use std::time::Duration;

use serde_json::Value;
use sume_inbox::db::Store;

use crate::support::*;

/// A consumer of the feed: reads every page after its cursor and keeps what it saw.
struct Consumer {
    http: reqwest::Client,
    cursor: String,
    seen: Vec<Value>,
}

impl Consumer {
    fn new() -> Consumer {
        Consumer {
            http: reqwest::Client::new(),
            cursor: "0".into(),
            seen: Vec::new(),
        }
    }

    /// Reads pages of two until one is empty; the cursor moves to each page's next_cursor.
    async fn drain(&mut self, daemon: &Daemon) {
        loop {
            let url = daemon.admin_url(&format!("/v1/closes?after={}&limit=2", self.cursor));
            let r = self.http.get(url).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let page: Value = r.json().await.unwrap();
            let closes = page["closes"].as_array().unwrap().clone();
            self.cursor = page["next_cursor"].as_str().unwrap().to_owned();
            if closes.is_empty() {
                return;
            }
            if let Some(last) = closes.last() {
                assert_eq!(last["cursor"].as_str(), Some(self.cursor.as_str()));
            }
            self.seen.extend(closes);
        }
    }

    /// Drains until it has seen `n` closes in all (panics after 20 seconds): the feed waits
    /// for transactions anywhere in the cluster, the other tests' included.
    async fn drain_until(&mut self, daemon: &Daemon, n: usize) {
        let end = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            self.drain(daemon).await;
            if self.seen.len() >= n {
                return;
            }
            assert!(
                tokio::time::Instant::now() < end,
                "the feed holds {:?}, not {n} closes",
                self.job_ids()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn job_ids(&self) -> Vec<String> {
        self.seen
            .iter()
            .map(|c| c["job_id"].as_str().unwrap().to_owned())
            .collect()
    }
}

async fn register(db: &TestDb, job_ids: &[&str]) {
    let c = db.client().await;
    for id in job_ids {
        c.execute(
            "insert into sume.jobs (job_id, order_id) values ($1, 'order-' || $1)",
            &[id],
        )
        .await
        .unwrap();
    }
}

/// The close a webhook makes, written by hand so that its transaction can be held open.
const CLOSE: &str = "update sume.jobs set state = 'completed', sume_status = 'completed',
                     closed_by = 'webhook', closed_at = now() where job_id = $1";

#[tokio::test(flavor = "multi_thread")]
async fn a_close_committing_late_is_not_skipped_across_a_restart() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    register(&db, &["held", "later"]).await;
    let mut consumer = Consumer::new();
    // One close is made and held open: its transaction has its id and its feed row.
    let mut holder = db.client().await;
    let held = holder.transaction().await.unwrap();
    held.execute(CLOSE, &[&"held"]).await.unwrap();
    // A later close, by the daemon itself (a webhook through attach), commits meanwhile.
    let http = reqwest::Client::new();
    Delivery::completed("later")
        .send(&http, &daemon.url("/webhooks/sume"))
        .await;
    wait_for("later closed", Duration::from_secs(10), || async {
        job_state(&db, "later").await.as_deref() == Some("completed")
    })
    .await;
    // The consumer reads now: the later close may not be answered before the held one, which
    // a later commit could still place before it.
    consumer.drain(&daemon).await;
    assert_eq!(consumer.job_ids(), Vec::<String>::new());
    // The daemon restarts, the held close commits, the consumer resumes from its cursor.
    daemon.stop().await;
    held.commit().await.unwrap();
    let daemon = Daemon::start(config(&db.url)).await;
    consumer.drain_until(&daemon, 2).await;
    assert_eq!(consumer.job_ids(), vec!["held", "later"]);
    assert_eq!(consumer.seen[1]["closed_by"], "webhook");
    assert_eq!(consumer.seen[1]["order_id"], "order-later");
    assert_eq!(consumer.seen[1]["supersedes_give_up"], false);
    // Nothing comes twice.
    consumer.drain(&daemon).await;
    assert_eq!(consumer.seen.len(), 2);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_close_numbered_first_but_committed_last_is_still_read() {
    // What defeats a cursor on a sequence: the close numbered first commits last, after a
    // consumer has read the one numbered after it. Here the older transaction (taking its id
    // first) closes second and commits; the younger one closed first and is held.
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    register(&db, &["numbered_first", "numbered_second"]).await;
    let mut a = db.client().await;
    let mut b = db.client().await;
    let older = a.transaction().await.unwrap();
    older
        .query_one("select pg_current_xact_id()", &[])
        .await
        .unwrap();
    let younger = b.transaction().await.unwrap();
    younger.execute(CLOSE, &[&"numbered_first"]).await.unwrap();
    older.execute(CLOSE, &[&"numbered_second"]).await.unwrap();
    older.commit().await.unwrap();
    let mut consumer = Consumer::new();
    consumer.drain_until(&daemon, 1).await;
    assert_eq!(consumer.job_ids(), vec!["numbered_second"]);
    younger.commit().await.unwrap();
    consumer.drain_until(&daemon, 2).await;
    assert_eq!(
        consumer.job_ids(),
        vec!["numbered_second", "numbered_first"]
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_superseded_give_up_is_a_new_entry_and_every_close_notifies() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    let store = Store::new(&db.url, 2).unwrap();
    let mut listener = store.job_closes_listen().await.unwrap();
    register(&db, &["given_up", "by_hook"]).await;
    // A give-up, as the sweep writes it (jobs_give_up).
    db.client()
        .await
        .execute(
            "update sume.jobs set state = 'expired', closed_by = 'give_up', closed_at = now(),
                    close_reason = 'no terminal status within POLL_GIVE_UP'
             where job_id = 'given_up'",
            &[],
        )
        .await
        .unwrap();
    let http = reqwest::Client::new();
    for job in ["given_up", "by_hook"] {
        Delivery::completed(job)
            .send(&http, &daemon.url("/webhooks/sume"))
            .await;
    }
    let mut notified = Vec::new();
    while notified.len() < 3 {
        notified.push(listener.job_ids.recv().await.unwrap());
    }
    notified.sort();
    assert_eq!(notified, vec!["by_hook", "given_up", "given_up"]);
    let mut consumer = Consumer::new();
    consumer.drain_until(&daemon, 3).await;
    let given_up: Vec<&Value> = consumer
        .seen
        .iter()
        .filter(|c| c["job_id"] == "given_up")
        .collect();
    assert_eq!(given_up.len(), 2);
    assert_eq!(given_up[0]["state"], "expired");
    assert_eq!(given_up[0]["closed_by"], "give_up");
    assert_eq!(given_up[0]["supersedes_give_up"], false);
    assert_eq!(given_up[1]["state"], "completed");
    assert_eq!(given_up[1]["closed_by"], "webhook");
    assert_eq!(given_up[1]["supersedes_give_up"], true);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_list_filters_and_pages_and_refuses_bad_queries() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    register(&db, &["l1", "l2", "l3", "l4", "l5"]).await;
    let c = db.client().await;
    for id in ["l2", "l4", "l5"] {
        c.execute(CLOSE, &[&id]).await.unwrap();
    }
    let http = reqwest::Client::new();
    let get = |q: &str| {
        let url = daemon.admin_url(&format!("/v1/jobs?{q}"));
        let http = http.clone();
        async move {
            let r = http.get(url).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let ids = |v: &Value| -> Vec<String> {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["job_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (s, page) = get("state=completed&limit=2").await;
    assert_eq!(s, 200);
    assert_eq!(ids(&page), vec!["l2", "l4"]);
    assert_eq!(page["next_after"], "l4");
    let (_, page) = get("state=completed&limit=2&after=l4").await;
    assert_eq!(ids(&page), vec!["l5"]);
    assert_eq!(page["next_after"], Value::Null);
    let (_, page) = get("state=open").await;
    assert_eq!(ids(&page), vec!["l1", "l3"]);
    let (_, page) = get("order_id=order-l3").await;
    assert_eq!(ids(&page), vec!["l3"]);
    let (_, page) = get("closed_by=webhook&closed_from=2000-01-01T00:00:00Z").await;
    assert_eq!(ids(&page), vec!["l2", "l4", "l5"]);
    let (_, page) = get("created_to=2000-01-01T00:00:00Z").await;
    assert_eq!(ids(&page), Vec::<String>::new());
    for bad in [
        "state=done",
        "closed_by=someone",
        "limit=0",
        "limit=100000",
        "closed_after=yesterday",
        "closed_after=0&state=open",
        "created_from=monday",
        "colour=blue",
    ] {
        let (s, body) = get(bad).await;
        assert_eq!(s, 400, "{bad}");
        assert_eq!(body["error"]["code"], "invalid_query", "{bad}");
    }
    daemon.stop().await;
}

/// A cursor no answer of this database gave (of another database, or saved before a restore)
/// once answered an empty page and came back as `next_cursor`, for good: every later close
/// went unread without a word. It is refused, 409 `cursor_ahead` (it depends on the database,
/// not on its form), and 400 `invalid_query` on `GET /v1/jobs?closed_after=`, as that route
/// always answered it; a real cursor with nothing after it is not.
#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_ahead_of_the_database_is_refused() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    register(&db, &["first"]).await;
    db.client().await.execute(CLOSE, &[&"first"]).await.unwrap();
    let mut consumer = Consumer::new();
    consumer.drain_until(&daemon, 1).await;
    let real = consumer.cursor.clone();
    let http = reqwest::Client::new();
    let read = |query: String| {
        let http = http.clone();
        let url = daemon.admin_url(&query);
        async move { http.get(url).send().await.unwrap() }
    };
    for route in ["/v1/closes?after=", "/v1/jobs?closed_after="] {
        let caught_up = read(format!("{route}{real}")).await;
        assert_eq!(caught_up.status(), 200, "{route}");
        let page: Value = caught_up.json().await.unwrap();
        assert_eq!(page["next_cursor"], real.as_str());
        for ahead in [
            "100000000-0",
            "999999999999999999-1",
            "9223372036854775807-1",
        ] {
            let r = read(format!("{route}{ahead}")).await;
            let (status, code) = match route {
                "/v1/closes?after=" => (409, "cursor_ahead"),
                _ => (400, "invalid_query"),
            };
            assert_eq!(r.status(), status, "{route}{ahead}");
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["code"], code, "{body}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("ahead of every transaction of this database"),
                "{body}"
            );
            let parameter = route.split(['?', '=']).nth(1).unwrap();
            assert!(
                message.starts_with(&format!("{parameter}={ahead}")),
                "{message}"
            );
        }
    }
    daemon.stop().await;
}

/// A cursor of transaction id 0, 1 or 2 (PostgreSQL's reserved ids, which no close carries) was
/// answered an empty page and echoed back as `next_cursor`, so a consumer kept it. It is refused
/// naming it and saying to resume from `0`, on both routes; a cursor written with leading zeros
/// reads as its numbers, and the answer's cursor is written without them.
#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_no_close_can_carry_is_refused_and_padded_ones_come_back_plain() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    register(&db, &["padded"]).await;
    db.client()
        .await
        .execute(CLOSE, &[&"padded"])
        .await
        .unwrap();
    let mut consumer = Consumer::new();
    consumer.drain_until(&daemon, 1).await;
    let real = consumer.cursor.clone();
    let http = reqwest::Client::new();
    let read = |query: String| {
        let http = http.clone();
        let url = daemon.admin_url(&query);
        async move { http.get(url).send().await.unwrap() }
    };
    for route in ["/v1/closes?after=", "/v1/jobs?closed_after="] {
        for reserved in ["0-5", "1-1", "2-9", "000-5"] {
            let r = read(format!("{route}{reserved}")).await;
            assert_eq!(r.status(), 400, "{route}{reserved}");
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["code"], "invalid_query", "{body}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains(&format!("\"{reserved}\"")), "{message}");
            assert!(message.contains("resume from 0"), "{message}");
        }
        let (xid, seq) = real.split_once('-').unwrap();
        let r = read(format!("{route}00{xid}-000{seq}")).await;
        assert_eq!(r.status(), 200, "{route}");
        let page: Value = r.json().await.unwrap();
        assert_eq!(page["closes"], serde_json::json!([]), "{page}");
        assert_eq!(page["next_cursor"], real.as_str(), "{page}");
    }
    daemon.stop().await;
}

/// `GET /v1/closes` reads from the start without `after`, with `after=0` and with `after=`
/// (what a client writing its URL from a template sends before it has a cursor), and answers
/// the page `GET /v1/jobs?closed_after=` answers; a cursor not of its form is refused naming
/// `after`, and the list's filters are no parameters of it.
#[tokio::test(flavor = "multi_thread")]
async fn the_feed_of_closes_starts_without_a_cursor_and_is_the_one_closed_after_reads() {
    let db = TestDb::new().await;
    let daemon = Daemon::start(config(&db.url)).await;
    register(&db, &["s1", "s2"]).await;
    let c = db.client().await;
    for id in ["s1", "s2"] {
        c.execute(CLOSE, &[&id]).await.unwrap();
    }
    Consumer::new().drain_until(&daemon, 2).await;
    let http = reqwest::Client::new();
    let get = |q: &str| {
        let url = daemon.admin_url(q);
        let http = http.clone();
        async move {
            let r = http.get(url).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let (status, legacy) = get("/v1/jobs?closed_after=0&limit=5").await;
    assert_eq!(status, 200);
    assert_eq!(legacy["closes"].as_array().unwrap().len(), 2, "{legacy}");
    for q in [
        "/v1/closes?limit=5",
        "/v1/closes?after=0&limit=5",
        "/v1/closes?after=&limit=5",
    ] {
        let (status, page) = get(q).await;
        assert_eq!((status, &page), (200, &legacy), "{q}");
    }
    for (bad, named) in [
        ("/v1/closes?after=yesterday", "after"),
        ("/v1/closes?after=0&state=open", "state"),
        ("/v1/closes?closed_after=0", "closed_after"),
        ("/v1/closes?limit=0", "limit"),
    ] {
        let (status, body) = get(bad).await;
        assert_eq!(status, 400, "{bad}");
        assert_eq!(body["error"]["code"], "invalid_query", "{bad}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{bad}: {message}");
    }
    daemon.stop().await;
}
