//! A small W3C WebDriver client over reqwest, enough to drive headless Chromium through
//! chromedriver from the test suite: navigate, find, type, click, read, screenshot. The browser
//! and its driver come from `scripts/chromium` (Debian's packages, installed when missing);
//! when they cannot be had, the test fails saying so rather than passing without a browser.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

use crate::support::wait_for;

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver, running as a child process for one test; killed on drop.
pub struct Driver {
    child: Child,
    url: String,
    http: reqwest::Client,
    _profile: TempDir,
}

/// A browser session of a [`Driver`].
pub struct Browser<'a> {
    driver: &'a Driver,
    session: String,
}

/// A directory removed on drop: the browser's fresh profile.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The paths of chromium and chromedriver, installing them when missing; panics loudly when
/// that is impossible, so a machine without a browser never passes the test silently.
fn binaries() -> (String, String) {
    if let (Ok(b), Ok(d)) = (std::env::var("CHROMIUM"), std::env::var("CHROMEDRIVER")) {
        return (b, d);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/chromium");
    let out = Command::new(&script)
        .arg("ensure")
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "BROWSER TEST CANNOT RUN: {} failed to start: {e}",
                script.display()
            )
        });
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    match (out.status.success(), text.split_once(' ')) {
        (true, Some((b, d))) => (b.to_owned(), d.to_owned()),
        _ => panic!(
            "BROWSER TEST CANNOT RUN: headless Chromium and chromedriver could not be installed \
             (scripts/chromium ensure). Install Debian's chromium and chromium-driver."
        ),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Driver {
    /// Starts chromedriver on a free loopback port and waits for it to be ready.
    pub async fn start() -> Driver {
        let (_, driver) = binaries();
        let port = free_port();
        let child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("BROWSER TEST CANNOT RUN: {driver}: {e}"));
        let profile = std::env::temp_dir().join(format!("sume-console-chromium-{port}"));
        let d = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            _profile: TempDir(profile),
        };
        let status = format!("{}/status", d.url);
        wait_for("chromedriver ready", Duration::from_secs(30), || async {
            match d.http.get(&status).send().await {
                Ok(r) => r
                    .json::<Value>()
                    .await
                    .is_ok_and(|v| v["value"]["ready"] == true),
                Err(_) => false,
            }
        })
        .await;
        d
    }

    /// A new headless browser with a fresh profile (`--no-sandbox`: the tests may run as root).
    pub async fn browser(&self) -> Browser<'_> {
        let (chromium, _) = binaries();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900",
                format!("--user-data-dir={}", self._profile.0.display()),
            ]}
        }}});
        let v = self
            .call(reqwest::Method::POST, "/session", Some(caps))
            .await;
        let session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_owned();
        let b = Browser {
            driver: self,
            session,
        };
        b.cmd(reqwest::Method::POST, "timeouts", json!({"implicit": 5000}))
            .await;
        b
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("webdriver {path}: {e}"))
    }

    async fn try_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Value> {
        let mut req = self.http.request(method, format!("{}{path}", self.url));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req
            .send()
            .await
            .expect("webdriver")
            .json()
            .await
            .expect("webdriver json");
        if v["value"].get("error").is_some() {
            return Err(v["value"].clone());
        }
        Ok(v["value"].clone())
    }
}

impl Browser<'_> {
    async fn cmd(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let body = (method != reqwest::Method::GET).then_some(body);
        let path = format!("/session/{}/{path}", self.session);
        self.driver.call(method, &path, body).await
    }

    /// Opens `url` and waits for it to load.
    pub async fn goto(&self, url: &str) {
        self.cmd(reqwest::Method::POST, "url", json!({"url": url}))
            .await;
    }

    /// The current address.
    pub async fn url(&self) -> String {
        self.cmd(reqwest::Method::GET, "url", json!({}))
            .await
            .as_str()
            .unwrap()
            .to_owned()
    }

    async fn find(&self, css: &str) -> String {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_owned()
    }

    /// Types `text` into the element `css`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        self.cmd(
            reqwest::Method::POST,
            &format!("element/{e}/value"),
            json!({"text": text}),
        )
        .await;
    }

    /// Clicks the element `css` (a submit button waits for the next page).
    pub async fn click(&self, css: &str) {
        let e = self.find(css).await;
        self.cmd(
            reqwest::Method::POST,
            &format!("element/{e}/click"),
            json!({}),
        )
        .await;
    }

    /// The visible text of the element `css`.
    pub async fn text(&self, css: &str) -> String {
        let e = self.find(css).await;
        let v = self
            .cmd(
                reqwest::Method::GET,
                &format!("element/{e}/text"),
                json!({}),
            )
            .await;
        v.as_str().unwrap_or_default().to_owned()
    }

    /// Waits until the text of `css` contains `wanted` (the page after a submit may still be
    /// loading: a vanished element is looked for again); panics with the last text after 20 s.
    pub async fn wait_text(&self, css: &str, wanted: &str) -> String {
        let last = std::sync::Mutex::new(String::new());
        let what = format!("{css} to contain {wanted:?}");
        wait_for(&what, Duration::from_secs(20), || async {
            let path = format!("/session/{}/element", self.session);
            let found = self
                .driver
                .try_call(
                    reqwest::Method::POST,
                    &path,
                    Some(json!({"using": "css selector", "value": css})),
                )
                .await;
            let Some(e) = found
                .ok()
                .and_then(|v| v[ELEMENT].as_str().map(str::to_owned))
            else {
                return false;
            };
            let path = format!("/session/{}/element/{e}/text", self.session);
            let text = self
                .driver
                .try_call(reqwest::Method::GET, &path, None)
                .await;
            let text = text
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let ok = text.contains(wanted);
            *last.lock().unwrap() = text;
            ok
        })
        .await;
        last.into_inner().unwrap()
    }

    /// Saves a PNG of the window as `dir/name`.
    pub async fn screenshot(&self, dir: &Path, name: &str) {
        let v = self
            .cmd(reqwest::Method::GET, "screenshot", json!({}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("screenshot"))
            .expect("screenshot base64");
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), png).unwrap();
    }

    /// Ends the session (the driver ends with its [`Driver`]).
    pub async fn close(self) {
        let path = format!("/session/{}", self.session);
        self.driver.call(reqwest::Method::DELETE, &path, None).await;
    }
}
