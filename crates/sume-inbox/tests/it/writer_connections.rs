//! The ingest writers' connections: taken out of DB_POOL_SIZE (the instance opens no more
//! connections than it says), planning each statement once (`plan_cache_mode =
//! force_generic_plan`, the plan tests/it/plans_from_empty.rs checks), while the rest of the
//! pool keeps PostgreSQL's choice; none where the pool would be left with fewer than two, nor
//! behind a transaction-mode pooler, where a session setting would outlive the client.

use sume_inbox::db::{Conn, Session, Store};

use crate::support::*;

async fn plan_cache_mode(conn: &Conn) -> String {
    conn.raw()
        .query_one("show plan_cache_mode", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn the_writers_plan_once_on_connections_taken_out_of_the_pool() {
    let db = TestDb::new().await;
    let store = Store::new(&db.url, 6)
        .unwrap()
        .with_writer_connections(&db.url, 2)
        .unwrap();
    assert!(store.writers_apart());
    assert_eq!(
        store.pool().status().max_size,
        4,
        "the shared pool gave two"
    );
    assert_eq!(store.pools_status().max_size, 6, "DB_POOL_SIZE in all");

    let writer = store.for_writers().conn().await.unwrap();
    assert_eq!(plan_cache_mode(&writer).await, "force_generic_plan");
    let shared = store.conn().await.unwrap();
    assert_eq!(plan_cache_mode(&shared).await, "auto");
    drop((writer, shared));

    let behind = store.behind_pooler(None);
    assert!(!behind.writers_apart());
    assert_eq!(
        behind.pool().status().max_size,
        6,
        "the pool gets them back"
    );
    let conn = behind.for_writers().conn().await.unwrap();
    assert_eq!(plan_cache_mode(&conn).await, "auto");
}

#[tokio::test]
async fn a_small_pool_is_shared_with_the_writers() {
    let db = TestDb::new().await;
    let store = Store::new(&db.url, 3)
        .unwrap()
        .with_writer_connections(&db.url, 2)
        .unwrap();
    assert!(!store.writers_apart(), "two writers would leave one");
    assert_eq!(store.pool().status().max_size, 3);
    let conn = store.for_writers().conn().await.unwrap();
    assert_eq!(plan_cache_mode(&conn).await, "auto");

    let behind = Store::new(&db.url, 16)
        .unwrap()
        .behind_pooler(None)
        .with_writer_connections(&db.url, 2)
        .unwrap();
    assert!(!behind.writers_apart(), "behind a transaction-mode pooler");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_daemon_opens_no_more_than_its_pool_and_two_listeners() {
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.db_pool_size = 4;
    let daemon = Daemon::start(c).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/webhooks/sume");
    let sends = (0..64).map(|i| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            Delivery::completed(&format!("job_w{i}"))
                .send(&http, &url)
                .await
        }
    });
    for answer in futures_util::future::join_all(sends).await {
        assert_eq!(answer.status(), 204);
    }
    let c = db.client().await;
    let count = |sql: &'static str| {
        let c = &c;
        async move { c.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    let open = count("select count(*) from pg_stat_activity where application_name = 'sume-inbox' and datname = current_database()").await;
    assert!(open <= 4 + 2, "{open} connections for DB_POOL_SIZE=4");
    let stored = count("select count(*) from sume.events where job_id like 'job_w%'").await;
    assert_eq!(stored, 64);
    daemon.stop().await;
}
