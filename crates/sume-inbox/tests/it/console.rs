//! The operator console over real HTTP: served only with ADMIN_TOKEN, the sign-in that trades
//! the token for a session cookie (never the token), its limit, CSRF on every write, the Host
//! check, the Content-Security-Policy, and every page rendering a hostile delivery inert.

use reqwest::header::{
    HeaderMap, CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE,
};
use reqwest::redirect::Policy;
use reqwest::StatusCode;
use serde_json::json;

use crate::support::*;

pub const OPERATOR: &str = "console-operator-token-0123456789";

/// A browser-less client of the console: it keeps the two cookies by hand.
pub struct Console {
    pub http: reqwest::Client,
    pub daemon: Daemon,
    pub session: Option<String>,
}

/// The `name=value` of cookie `name` among the answer's `Set-Cookie` headers, with its attributes.
fn set_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// The value of the first hidden `csrf` field of a page.
pub fn csrf_of(html: &str) -> String {
    let at = html.find(r#"name="csrf" value=""#).expect("a csrf field") + 19;
    html[at..].split('"').next().unwrap().to_owned()
}

impl Console {
    pub async fn start(db: &TestDb, token: Option<&str>) -> Console {
        let mut c = config(&db.url);
        c.admin_token = token.map(sume_wire::Secret::new);
        Console::on(c).await
    }

    /// A console, not signed in, on a daemon of `c`.
    pub async fn on(c: sume_inbox::config::Config) -> Console {
        Console {
            http: reqwest::Client::builder()
                .redirect(Policy::none())
                .build()
                .unwrap(),
            daemon: Daemon::start(c).await,
            session: None,
        }
    }

    pub async fn get(&self, path: &str) -> (StatusCode, HeaderMap, String) {
        let mut req = self.http.get(self.daemon.admin_url(path));
        if let Some(s) = &self.session {
            req = req.header(COOKIE, format!("sume_console={s}"));
        }
        let r = req.send().await.unwrap();
        (r.status(), r.headers().clone(), r.text().await.unwrap())
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> (StatusCode, HeaderMap) {
        let mut req = self.http.post(self.daemon.admin_url(path)).form(form);
        if let Some(s) = &self.session {
            req = req.header(COOKIE, format!("sume_console={s}"));
        }
        let r = req.send().await.unwrap();
        (r.status(), r.headers().clone())
    }

    /// Loads the form and posts `token` with its nonce cookie and CSRF field.
    pub async fn try_sign_in(&self, token: &str) -> (StatusCode, HeaderMap) {
        self.try_sign_in_with(&self.http, token).await
    }

    /// [`Console::try_sign_in`] through `http` (another client address, say).
    pub async fn try_sign_in_with(
        &self,
        http: &reqwest::Client,
        token: &str,
    ) -> (StatusCode, HeaderMap) {
        let r = http
            .get(self.daemon.admin_url("/console/sign-in"))
            .send()
            .await
            .unwrap();
        let pre = set_cookie(r.headers(), "sume_console_pre").expect("nonce cookie");
        let pre = pre.split(';').next().unwrap().to_owned();
        let csrf = csrf_of(&r.text().await.unwrap());
        let r = http
            .post(self.daemon.admin_url("/console/sign-in"))
            .header(COOKIE, pre)
            .form(&[("token", token), ("csrf", csrf.as_str())])
            .send()
            .await
            .unwrap();
        (r.status(), r.headers().clone())
    }

    pub async fn sign_in(&mut self) {
        let (s, h) = self.try_sign_in(OPERATOR).await;
        assert_eq!(s, StatusCode::SEE_OTHER);
        let c = set_cookie(&h, "sume_console").expect("session cookie");
        let id = c.split(';').next().unwrap()["sume_console=".len()..].to_owned();
        self.session = Some(id);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_admin_token_the_console_says_how_to_set_one() {
    let db = TestDb::new().await;
    let console = Console::start(&db, None).await;
    for path in [
        "/console/overview",
        "/console/sign-in",
        "/console/dead-letters",
    ] {
        let (s, h, body) = console.get(path).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{path}");
        assert!(body.contains("ADMIN_TOKEN"), "{path}: {body}");
        assert!(h.contains_key(CONTENT_SECURITY_POLICY));
    }
    let (s, _) = console
        .post("/console/sign-in", &[("token", ""), ("csrf", "")])
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    console.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_browser_at_the_port_finds_the_console_and_a_wrong_address_says_so() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    // The port's root leads to the console, not to the admin API's 401.
    let (s, h, _) = console.get("/").await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    assert_eq!(h[LOCATION], "/console");
    // A console address with no page: a page, signed in or not, never JSON.
    for signed_in in [false, true] {
        if signed_in {
            console.sign_in().await;
        }
        for path in [
            "/console/nope",
            "/console/jobs/x/y",
            "/console/static/other.css",
        ] {
            let (s, h, body) = console.get(path).await;
            assert_eq!(s, StatusCode::NOT_FOUND, "{path}");
            assert!(
                h[CONTENT_TYPE].to_str().unwrap().starts_with("text/html"),
                "{path}"
            );
            assert!(body.contains("No such page"), "{path}: {body}");
            assert!(h.contains_key(CONTENT_SECURITY_POLICY), "{path}");
        }
    }
    // The admin API's own unknown routes keep their JSON.
    let r = reqwest::get(console.daemon.admin_url("/v1/nope"))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    console.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn signing_in_trades_the_token_for_a_session_and_every_write_needs_its_csrf_token() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    let (s, h, _) = console.get("/console/overview").await;
    assert_eq!(
        (s, h[LOCATION].to_str().unwrap()),
        (StatusCode::SEE_OTHER, "/console/sign-in")
    );
    let (s, h, body) = console.get("/console/sign-in").await;
    assert_eq!(s, 200);
    assert_eq!(h[CONTENT_SECURITY_POLICY], sume_inbox::http::console::CSP);
    assert!(sume_inbox::http::console::CSP.contains("default-src 'none'"));
    assert!(!body.contains("<script"));
    // A wrong token, and a right one posted without the form's nonce, open nothing.
    let (s, h) = console.try_sign_in("wrong").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(set_cookie(&h, "sume_console").is_none());
    let (s, _) = console
        .post("/console/sign-in", &[("token", OPERATOR), ("csrf", "x")])
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    // The right one: a cookie holding a random id, HttpOnly and SameSite=Strict, not the token.
    let (s, h) = console.try_sign_in(OPERATOR).await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let cookie = set_cookie(&h, "sume_console").unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains(OPERATOR));
    console.sign_in().await;
    let (s, _, body) = console.get("/console/overview").await;
    assert_eq!(s, 200);
    assert!(body.contains("events waiting in the inbox"), "{body}");
    // A write without the session's CSRF token changes nothing and records nothing.
    let audited = "select count(*) from sume.audit_log where action = 'replay_dead_letters'";
    let (s, _) = console
        .post("/console/dead-letters/replay", &[("csrf", "forged")])
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(db.scalar(audited).await, 0);
    let (_, _, page) = console.get("/console/dead-letters").await;
    let csrf = csrf_of(&page);
    let (s, h) = console
        .post("/console/dead-letters/replay", &[("csrf", &csrf)])
        .await;
    assert_eq!(
        (s, h[LOCATION].to_str().unwrap()),
        (StatusCode::SEE_OTHER, "/console/dead-letters")
    );
    assert_eq!(db.scalar(audited).await, 1);
    let actor: i64 = db
        .scalar("select count(*) from sume.audit_log where actor like 'console:operator%'")
        .await;
    assert_eq!(actor, 3, "two sign-ins and the replay");
    // Another Host is refused, signed in or not (DNS rebinding).
    let r = console
        .http
        .get(console.daemon.admin_url("/console/overview"))
        .header(
            "host",
            format!("evil.example:{}", console.daemon.admin.port()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
    // Signing out ends the session on the server: the old cookie opens nothing.
    let (s, _) = console.post("/console/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let (s, _, _) = console.get("/console/overview").await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    console.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_is_limited_even_for_the_right_token() {
    let db = TestDb::new().await;
    let console = Console::start(&db, Some(OPERATOR)).await;
    let limit = sume_inbox::http::console::sessions::SIGN_IN_LIMIT;
    for _ in 0..limit {
        assert_eq!(
            console.try_sign_in("guess").await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    let (s, h) = console.try_sign_in(OPERATOR).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(h["retry-after"], "60");
    assert!(set_cookie(&h, "sume_console").is_none());
    console.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn posts_without_the_forms_nonce_count_for_nothing_and_guesses_spend_their_address_only() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    let limit = sume_inbox::http::console::sessions::SIGN_IN_LIMIT;
    // What any page the operator opens could post cross-site: no nonce cookie, and a CSRF
    // field it cannot have read (empty, or made up), with wrong tokens or even the right one.
    for i in 0..3 * limit {
        let (token, csrf) = match i % 3 {
            0 => ("guess", ""),
            1 => ("guess", "0123456789abcdef"),
            _ => (OPERATOR, "forged"),
        };
        let (s, h) = console
            .post("/console/sign-in", &[("token", token), ("csrf", csrf)])
            .await;
        assert_eq!(s, StatusCode::FORBIDDEN);
        assert!(set_cookie(&h, "sume_console").is_none());
    }
    // A post without the field at all is refused the same way (it was 422, the form's
    // shape, before its nonce was looked at).
    let (s, _) = console
        .post("/console/sign-in", &[("token", OPERATOR)])
        .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    // The operator signs in right after the flood.
    console.sign_in().await;
    for action in ["/console/dead-letters/replay", "/console/sign-out"] {
        let (s, _) = console.post(action, &[]).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{action} without its CSRF field");
    }
    // A stranger who loads the form from another address and guesses spends that address's
    // attempts, not the operator's.
    let stranger = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .redirect(Policy::none())
        .build()
        .unwrap();
    for _ in 0..limit {
        let (s, _) = console.try_sign_in_with(&stranger, "guess").await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
    }
    let (s, h) = console.try_sign_in_with(&stranger, OPERATOR).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "its minute is spent");
    assert!(set_cookie(&h, "sume_console").is_none());
    let (s, _) = console.try_sign_in(OPERATOR).await;
    assert_eq!(s, StatusCode::SEE_OTHER, "the operator's address is not");
    console.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_delivery_renders_inert_on_every_page() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    let hook = console.daemon.url("/webhooks/sume");
    let evil = "<script>alert(1)</script>";
    let mut d = Delivery::completed(evil);
    d.body =
        json!({"event": "job.completed", "job_id": evil, "status": evil, "note": evil}).to_string();
    d.event_id = Some(format!("evt{evil}"));
    assert_eq!(d.send(&console.http, &hook).await.status(), 204);
    let mut dead = Delivery::completed("none");
    dead.body = json!({"hello": evil}).to_string();
    dead.event_id = Some(evil.into());
    assert_eq!(dead.send(&console.http, &hook).await.status(), 204);
    let c = db.client().await;
    c.execute(
        "insert into sume.inbox_checks (job_id, verdict, answers, next_check_at)
         values ($1, 'orphan', $2, now())",
        &[&evil, &json!({evil: evil})],
    )
    .await
    .unwrap();
    console.sign_in().await;
    let q: String = url::form_urlencoded::byte_serialize(evil.as_bytes()).collect();
    for path in [
        "/console/overview".to_owned(),
        "/console/inbox".into(),
        "/console/set-aside".into(),
        "/console/dead-letters".into(),
        format!("/console/jobs?q={q}"),
    ] {
        let (s, h, body) = console.get(&path).await;
        assert_eq!(s, 200, "{path}");
        assert_eq!(
            h[CONTENT_SECURITY_POLICY],
            sume_inbox::http::console::CSP,
            "{path}"
        );
        assert!(
            !body.to_ascii_lowercase().contains("<script"),
            "{path}: {body}"
        );
        if path != "/console/overview" {
            assert!(
                body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
                "{path}: {body}"
            );
        }
    }
    console.daemon.stop().await;
}

/// The overview, `GET /v1/stats` and `sume-inbox stats` show each key's reads of Sume this UTC
/// day against SUME_READ_DAILY and the day's pace, and the way this instance's reads went.
#[tokio::test(flavor = "multi_thread")]
async fn the_overview_shows_each_keys_reads_today_against_the_days_allowance_and_pace() {
    use crate::sweep::{create, daemon_config, register, sim_config, sweep_config, MAIN_KEY};
    let db = TestDb::new().await;
    let sim = sume_sim::RunningSim::start(sim_config()).await.unwrap();
    let mut c = daemon_config(&db, &sim, sweep_config());
    c.sweep.daily_reads = 500;
    c.admin_token = Some(sume_wire::Secret::new(OPERATOR));
    let mut console = Console::on(c).await;
    // A job whose webhook never comes: the sweep reads it by itself and closes it.
    let http = reqwest::Client::new();
    let job = create(&http, &sim, MAIN_KEY, None, json!({"duration_ms": 20})).await;
    register(&db, &job).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while job_state(&db, &job).await.as_deref() != Some("completed") {
        assert!(
            std::time::Instant::now() < deadline,
            "the sweep closed the job"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let used: i64 = db
        .scalar("select day_used::int8 from sume.rate_buckets where key_name = 'main'")
        .await;
    assert!(used >= 2, "a key check and the job's read: {used}");
    // The reads listed are those of the keys a live instance holds: this one's heartbeat
    // (written a second after start) says it holds `main`.
    wait_for(
        "the heartbeat naming the key",
        std::time::Duration::from_secs(30),
        || async {
            db.scalar("select count(*) from sume.instances where 'main' = any(api_keys)")
                .await
                > 0
        },
    )
    .await;
    console.sign_in().await;
    let (s, _, body) = console.get("/console/overview").await;
    assert_eq!(s, 200);
    assert!(body.contains("Sume reads today (UTC)"), "{body}");
    assert!(body.contains("<code>main</code>"), "{body}");
    // The fleet's count may have grown since it was read: the day's allowance is what is
    // certain, and that used and left add up to it.
    assert!(body.contains(" of 500"), "{body}");
    assert!(body.contains("of the day)"), "{body}");
    assert!(body.contains("reads of one job"), "{body}");
    let r = console
        .http
        .get(console.daemon.admin_url("/v1/stats"))
        .bearer_auth(OPERATOR)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let stats: sume_inbox::db::Stats = r.json().await.unwrap();
    let main = stats
        .reads_today
        .iter()
        .find(|k| k.key_name == "main")
        .expect("the key's reads today");
    assert_eq!(main.limit, Some(500));
    assert!(main.used >= used, "{main:?}");
    assert_eq!(main.left, Some(500 - main.used));
    assert!(
        main.pace.is_some_and(|p| (0..=500).contains(&p)),
        "{main:?}"
    );
    let text = sume_inbox::cli::render::render_stats(&stats, false);
    assert!(
        text.contains("sume reads today .... main: ") && text.contains(" left of 500"),
        "{text}"
    );
    console.daemon.stop().await;
    sim.stop().await.unwrap();
}

/// A NUL character (`%00`), which PostgreSQL's text cannot hold, in the search, the list's
/// filters and the forms' ids: answered as a bad query (never written into the page) or as
/// finding nothing, never as the 503 of a database that is down (which it was).
#[tokio::test(flavor = "multi_thread")]
async fn a_nul_character_is_never_taken_for_a_database_down() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    console.sign_in().await;
    for (path, status) in [
        ("/console/jobs?q=job_a%00b", 400),
        ("/console/jobs?order_id=o%00", 400),
        ("/console/jobs?after=job_a%00", 400),
        ("/console/inbox?after=a%00", 200),
        ("/console/set-aside?after=a%00", 200),
        ("/console/dead-letters?after=a%00", 200),
    ] {
        let (s, _, body) = console.get(path).await;
        assert_eq!(s, status, "{path}: {body}");
        assert!(!body.contains('\0'), "{path}: a NUL in the page");
    }
    let (_, _, page) = console.get("/console/dead-letters").await;
    let csrf = csrf_of(&page);
    for (path, field) in [
        ("/console/dead-letters/drop", "id"),
        ("/console/set-aside/replay", "event_id"),
    ] {
        let (s, _) = console
            .post(path, &[("csrf", csrf.as_str()), (field, "a\u{0}b")])
            .await;
        assert_eq!(s, 404, "{path}");
    }
    console.daemon.stop().await;
}

/// Behind a TLS proxy (`X-Forwarded-Proto: https`, `Forwarded: proto=https`) the console's
/// cookies had no `Secure`, so a browser would send the session over plain HTTP to the same
/// host; they are `Secure` there now, and without such a proxy as before (the daemon speaks
/// plain HTTP, where a browser refuses a `Secure` cookie).
#[tokio::test(flavor = "multi_thread")]
async fn behind_a_tls_proxy_the_consoles_cookies_are_secure() {
    let db = TestDb::new().await;
    let console = Console::start(&db, Some(OPERATOR)).await;
    let through = |name: &'static str, value: &'static str| {
        let mut headers = HeaderMap::new();
        headers.insert(name, value.parse().unwrap());
        reqwest::Client::builder()
            .redirect(Policy::none())
            .default_headers(headers)
            .build()
            .unwrap()
    };
    for (http, secure) in [
        (through("x-forwarded-proto", "https"), true),
        (
            through("forwarded", "for=10.0.0.1;proto=https, proto=http"),
            true,
        ),
        (through("x-forwarded-proto", "http"), false),
        (console.http.clone(), false),
    ] {
        let r = http
            .get(console.daemon.admin_url("/console/sign-in"))
            .send()
            .await
            .unwrap();
        let pre = set_cookie(r.headers(), "sume_console_pre").expect("nonce cookie");
        assert_eq!(pre.ends_with("; Secure"), secure, "{pre}");
        let (s, h) = console.try_sign_in_with(&http, OPERATOR).await;
        assert_eq!(s, StatusCode::SEE_OTHER);
        let session = set_cookie(&h, "sume_console").expect("session cookie");
        assert_eq!(session.ends_with("; Secure"), secure, "{session}");
        assert!(session.contains("HttpOnly; SameSite=Strict"), "{session}");
    }
    console.daemon.stop().await;
}

/// An id longer than any stored id (511 bytes) in the drop and replay forms names nothing:
/// answered 404 before any statement, and not kept whole in the audit log (the admin API
/// refuses such ids too), where the drop form's audit entry held a megabyte of it.
#[tokio::test(flavor = "multi_thread")]
async fn an_id_longer_than_any_stored_one_in_a_form_names_nothing_and_is_not_audited() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    console.sign_in().await;
    let (_, _, page) = console.get("/console/dead-letters").await;
    let csrf = csrf_of(&page);
    let long = "d".repeat(100_000);
    for (path, field) in [
        ("/console/dead-letters/drop", "id"),
        ("/console/set-aside/replay", "event_id"),
    ] {
        let (s, _) = console
            .post(path, &[("csrf", csrf.as_str()), (field, long.as_str())])
            .await;
        assert_eq!(s, 404, "{path}");
    }
    let (audited,): (i64,) = {
        let row = db
            .client()
            .await
            .query_one(
                "select count(*) from sume.audit_log where action in ('drop_dead_letters', 'replay_event')",
                &[],
            )
            .await
            .unwrap();
        (row.get(0),)
    };
    assert_eq!(audited, 0);
    console.daemon.stop().await;
}

/// The set-aside replay form on an event that does not exist answers 404 and, as the admin
/// API's `POST /v1/events/{id}/replay` and `sume-inbox replay` do, records `replay_event` with
/// `"ok": false` in the audit log (it recorded nothing). Its page speaks the console's terms,
/// not the command's (it named `--dead-letters`).
#[tokio::test(flavor = "multi_thread")]
async fn a_replay_of_an_unknown_event_from_the_form_is_recorded_as_failed() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    console.sign_in().await;
    let (_, _, page) = console.get("/console/dead-letters").await;
    let csrf = csrf_of(&page);
    let form = [("csrf", csrf.as_str()), ("event_id", "evt_nobody")];
    let answer = console
        .http
        .post(console.daemon.admin_url("/console/set-aside/replay"))
        .header(
            COOKIE,
            format!("sume_console={}", console.session.clone().unwrap()),
        )
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
    let page = answer.text().await.unwrap();
    assert!(!page.contains("--dead-letters"), "{page}");
    assert!(page.contains("Dead letters page"), "{page}");
    let row = db
        .client()
        .await
        .query_one(
            "select actor, detail from sume.audit_log where action = 'replay_event'",
            &[],
        )
        .await
        .expect("one replay_event entry");
    let actor: String = row.get(0);
    assert!(actor.starts_with("console:operator (session "), "{actor}");
    let detail: serde_json::Value = row.get(1);
    assert_eq!(detail["event_id"], "evt_nobody");
    assert_eq!(detail["result"]["ok"], false);
    console.daemon.stop().await;
}

/// The console's `Host` check is the admin API's: the authority of an absolute-form target
/// stands for `Host`, so a foreign one is refused whatever `Host` says, and a request with two
/// `Host` headers is refused, whichever comes first (a proxy in front may have read the other).
#[tokio::test(flavor = "multi_thread")]
async fn the_consoles_host_check_holds_for_an_absolute_target_and_two_host_headers() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    console.sign_in().await;
    let session = console.session.clone().unwrap();
    let ours = console.daemon.admin.to_string();
    let port = console.daemon.admin.port();
    let cases = [
        (
            format!("GET /console/overview HTTP/1.1\r\nhost: {ours}\r\n"),
            200,
        ),
        (
            format!("GET http://evil.example:{port}/console/overview HTTP/1.1\r\nhost: {ours}\r\n"),
            421,
        ),
        (
            format!("GET http://{ours}/console/overview HTTP/1.1\r\nhost: evil.example:{port}\r\n"),
            200,
        ),
        (
            format!(
                "GET /console/overview HTTP/1.1\r\nhost: {ours}\r\nhost: evil.example:{port}\r\n"
            ),
            400,
        ),
        (
            format!(
                "GET /console/sign-in HTTP/1.1\r\nhost: evil.example:{port}\r\nhost: {ours}\r\n"
            ),
            400,
        ),
    ];
    for (head, expected) in cases {
        let request = format!("{head}cookie: sume_console={session}\r\nconnection: close\r\n\r\n");
        let mut s = crate::port::open_with(console.daemon.admin, &request).await;
        let answer = crate::port::read_until_closed(&mut s, std::time::Duration::from_secs(10))
            .await
            .expect("the admin port answers and closes");
        let status: u16 = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        assert_eq!(status, expected, "{head}{answer}");
        let csp = answer
            .to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'");
        assert!(csp, "every answer carries the policy: {answer}");
    }
    console.daemon.stop().await;
}

/// The audit log's entries the console writes (a sign-in, a replay) are of the actions and
/// actors the OpenAPI document lists for `AuditEntry`, as the API's and the CLI's are.
#[tokio::test(flavor = "multi_thread")]
async fn the_consoles_audit_entries_are_of_the_actions_and_actors_the_document_lists() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    console.sign_in().await;
    let (_, _, page) = console.get("/console/dead-letters").await;
    let csrf = csrf_of(&page);
    let (s, _) = console
        .post("/console/dead-letters/replay", &[("csrf", &csrf)])
        .await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    let http = reqwest::Client::new();
    let get = |path: &str| {
        http.get(console.daemon.admin_url(path))
            .bearer_auth(OPERATOR)
            .send()
    };
    let doc: serde_json::Value = get("/v1/openapi.json").await.unwrap().json().await.unwrap();
    let audit: serde_json::Value = get("/v1/audit").await.unwrap().json().await.unwrap();
    let schema = &doc["components"]["schemas"]["AuditEntry"]["properties"];
    let actions = schema["action"]["description"].as_str().unwrap();
    let actors = schema["actor"]["description"].as_str().unwrap();
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{audit}");
    for entry in entries {
        let action = entry["action"].as_str().unwrap();
        assert!(
            actions.contains(&format!("`{action}`")),
            "{action}: {actions}"
        );
        let actor = entry["actor"].as_str().unwrap();
        let kind = actor.split(' ').next().unwrap();
        assert!(actors.contains(&format!("`{kind}")), "{actor}: {actors}");
    }
    console.daemon.stop().await;
}

/// What the router or a form's reading refuses (a form missing its field, a query naming one
/// twice, another method) is answered as a console page with its status, not as plain text.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_form_query_or_method_is_answered_as_a_page() {
    let db = TestDb::new().await;
    let mut console = Console::start(&db, Some(OPERATOR)).await;
    console.sign_in().await;
    let (_, _, page) = console.get("/console/dead-letters").await;
    let csrf = csrf_of(&page);
    let html = |h: &HeaderMap| {
        h.get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .starts_with("text/html")
    };
    let (s, h) = console
        .post("/console/dead-letters/drop", &[("csrf", &csrf)])
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(html(&h), "{h:?}");
    let (s, h, body) = console.get("/console/jobs?q=a&q=b").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(html(&h), "{h:?}");
    assert!(body.contains("duplicate field"), "{body}");
    let (s, h) = console.post("/console/overview", &[("csrf", &csrf)]).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert!(html(&h), "{h:?}");
    assert!(h.contains_key("allow"), "{h:?}");
    assert!(h.contains_key(CONTENT_SECURITY_POLICY), "{h:?}");
    console.daemon.stop().await;
}
