//! The submit client's own guarantees, against the simulator and a daemon: one job per order
//! however often it is created, and errors that name the step that failed.

use sume_dev::submit::{AdminApi, Registration, Submission, SubmitClient, SubmitError};
use sume_wire::Secret;

use super::harness::{sim_config, Env, KEY_NAME};

#[tokio::test(flavor = "multi_thread")]
async fn one_order_makes_one_job_and_failures_name_their_step() {
    let env = Env::start(sim_config()).await;
    let client = &env.client;

    // The order id is the Idempotency-Key: creating twice answers the same job.
    let order = Submission::new("order-idem", "a fox at dawn");
    let first = client.create_job(&order).await.expect("create");
    assert_eq!(client.create_job(&order).await.expect("replay"), first);
    let submitted = client.submit(&order).await.expect("submit");
    assert_eq!(submitted.job_id, first);
    assert_eq!(
        submitted.registration,
        Registration::InTransaction { inserted: true }
    );
    // Submitting a committed order again is refused by the order table, not a second job.
    match client.submit(&order).await {
        Err(SubmitError::Db { statement, .. }) => assert_eq!(statement, "orders_insert"),
        other => panic!("a second commit of one order: {other:?}"),
    }

    // An unknown key: the create call is refused, and nothing is committed.
    let mut config = client.config().clone();
    config.api_key = Secret::new("sk_nobody");
    let db = env.db.client().await;
    let pool = sume_inbox::db::Store::new(&env.db.url, 2)
        .unwrap()
        .pool()
        .clone();
    let stranger = SubmitClient::new(config, pool).unwrap();
    match stranger.submit(&Submission::new("order-x", "x")).await {
        Err(SubmitError::Refused { status: 401, .. }) => {}
        other => panic!("an unknown key: {other:?}"),
    }
    let orders: i64 = db
        .query_one(
            "select count(*) from public.orders where order_id = 'order-x'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(orders, 0);

    // The admin API: a repeat answers 200, another order for the same job is a conflict.
    let admin = AdminApi::new(env.daemons[0].admin_url(""));
    let again = client
        .register_via_admin(&admin, &first, "order-idem")
        .await
        .expect("repeat registration");
    assert!(matches!(again, Registration::Admin { created: false, .. }));
    match client
        .register_via_admin(&admin, &first, "order-other")
        .await
    {
        Err(SubmitError::Conflict { existing, .. }) => {
            assert_eq!(existing["order_id"], "order-idem");
            assert_eq!(existing["api_key"], KEY_NAME);
        }
        other => panic!("a conflicting registration: {other:?}"),
    }
    env.stop().await;
}
