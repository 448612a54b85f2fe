//! Clients generated from the served document by mainstream generators, used by an application
//! against a running daemon: `openapi-python-client` (PyPI) and `@hey-api/openapi-ts` (npm),
//! pinned in `scripts/openapi-tools`. The generator must print no warning for a `/v1`
//! operation, and every operation and parameter of the document must come through; the client
//! is generated and built here, under target/, never committed. The application
//! (`tests/clients/app.py`, `tests/clients/app.ts`) registers a job with the application's
//! token, waits for its close with `?wait=` while this test delivers the webhook, pages the feed
//! of closes from a cursor, meets a 403 on an operator route, and with the operator's token
//! lists the dead letters and replays them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::openapi_contract::{Served, APP, OPERATOR};
use crate::support::*;

/// README's commands for the two clients install what `scripts/openapi-tools` pins and these
/// tests run, TypeScript's compiler beside `@hey-api/openapi-ts` included: without it the
/// generator fails in a fresh directory ("Cannot read properties of undefined (reading
/// 'LineFeed')"), as README's `npx @hey-api/openapi-ts@...` alone did.
#[test]
fn readmes_client_commands_install_what_the_tests_run() {
    let script = include_str!("../../../../scripts/openapi-tools");
    let readme = include_str!("../../../../README.md");
    let pin = |name: &str| {
        let line = format!("{name}=");
        let found = script.lines().find_map(|l| l.strip_prefix(line.as_str()));
        found.unwrap_or_else(|| panic!("scripts/openapi-tools pins no {name}"))
    };
    let from = readme.find("### From your application").unwrap();
    let to = readme.find("### Hearing about a close").unwrap();
    let section = &readme[from..to];
    for wanted in [
        format!(
            "pip install openapi-python-client=={}",
            pin("OPENAPI_PYTHON_CLIENT")
        ),
        format!("@hey-api/openapi-ts@{}", pin("HEY_API_OPENAPI_TS")),
        format!("typescript@{}", pin("TYPESCRIPT")),
    ] {
        assert!(
            section.contains(&wanted),
            "README's client commands lack `{wanted}`"
        );
    }
}

/// Every operation of the document: (method, path, operationId, parameter names).
fn operations(doc: &Value) -> Vec<(String, String, String, Vec<String>)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let params = op["parameters"].as_array().into_iter().flatten();
            out.push((
                method.clone(),
                path.clone(),
                op["operationId"].as_str().unwrap().to_owned(),
                params
                    .map(|p| p["name"].as_str().unwrap().to_owned())
                    .collect(),
            ));
        }
    }
    out
}

/// Runs a generator; answers what it printed, panicking when it failed.
fn run(command: &mut Command) -> String {
    let out = command.output().expect("start the generator");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?} failed:\n{text}");
    text
}

/// A fresh directory under target/ for one generated client.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("openapi-clients")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Generates the Python client into `dir/sume_inbox_client`; answers how to run the app.
fn python_client(tools: &Path, doc: &Value, doc_path: &Path, dir: &Path) -> Command {
    let venv = tools.join("venv/bin");
    let path = format!(
        "{}:{}",
        venv.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let printed = run(Command::new(venv.join("openapi-python-client"))
        .args(["generate", "--meta", "none", "--overwrite", "--path"])
        .arg(doc_path)
        .arg("--output-path")
        .arg(dir.join("sume_inbox_client"))
        .env("PATH", &path));
    for line in printed.lines().filter(|l| l.contains("WARNING")) {
        // `/metrics` answers Prometheus' text, a content type it does not read.
        assert!(
            line.trim() == "WARNING parsing GET /metrics within operator.",
            "openapi-python-client warned about an operation:\n{printed}"
        );
    }
    for (method, path, id, params) in operations(doc) {
        let tag = if doc["paths"][&path][&method]["tags"][0] == "operator" {
            "operator"
        } else {
            "application"
        };
        let file = dir.join(format!("sume_inbox_client/api/{tag}/{id}.py"));
        let code = read(&file);
        assert!(
            code.contains(&format!("\"{path}\"")),
            "{method} {path} in {}",
            file.display()
        );
        for p in params {
            assert!(
                code.contains(&format!("    {p}: ")),
                "{method} {path}: parameter {p}"
            );
        }
    }
    let mut app = Command::new(venv.join("python"));
    app.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/app.py"))
        .env("PYTHONPATH", dir);
    app
}

const TSCONFIG: &str = r#"{"compilerOptions": {"target": "es2022", "module": "commonjs",
  "lib": ["es2022", "dom", "dom.iterable"], "strict": true, "outDir": "js", "skipLibCheck": true,
  "types": []}, "include": ["app.ts", "client/**/*.ts"]}"#;

/// Generates the TypeScript client into `dir/client` and compiles it with the app; answers
/// how to run the app.
fn typescript_client(tools: &Path, doc: &Value, doc_path: &Path, dir: &Path) -> Command {
    let bin = tools.join("node/node_modules/.bin");
    let printed = run(Command::new(bin.join("openapi-ts"))
        .arg("--no-log-file")
        .arg("-i")
        .arg(doc_path)
        .arg("-o")
        .arg(dir.join("client"))
        .env("NO_COLOR", "1")
        .current_dir(dir));
    let lower = printed.to_lowercase();
    assert!(
        !lower.contains("warn") && !lower.contains("error"),
        "@hey-api/openapi-ts warned:\n{printed}"
    );
    let sdk = read(&dir.join("client/sdk.gen.ts"));
    let types = read(&dir.join("client/types.gen.ts"));
    for (method, path, id, params) in operations(doc) {
        assert!(
            sdk.contains(&format!("url: '{path}'")),
            "{method} {path} in the SDK"
        );
        let pascal: String = id
            .split('_')
            .map(|w| w[..1].to_uppercase() + &w[1..])
            .collect();
        let start = types
            .find(&format!("export type {pascal}Data = {{"))
            .unwrap_or_else(|| panic!("no {pascal}Data for {method} {path}"));
        let block = &types[start..start + types[start..].find("\n};").unwrap()];
        for p in params {
            assert!(
                block.contains(&format!(" {p}?: ")) || block.contains(&format!(" {p}: ")),
                "{method} {path}: parameter {p} in {block}"
            );
        }
    }
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/app.ts"),
        dir.join("app.ts"),
    )
    .unwrap();
    std::fs::write(dir.join("tsconfig.json"), TSCONFIG).unwrap();
    run(Command::new(bin.join("tsc"))
        .args(["-p", "."])
        .current_dir(dir));
    let mut app = Command::new("node");
    app.arg(dir.join("js/app.js"));
    app
}

/// This daemon's waiters, from its `/metrics`.
async fn waiters(served: &Served) -> i64 {
    let text = served
        .http
        .get(served.daemon.admin_url("/metrics"))
        .bearer_auth(OPERATOR)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("sume_inbox_admin_waiters "))
        .expect("sume_inbox_admin_waiters")
        .trim()
        .parse()
        .unwrap()
}

/// Three jobs closed one after the other (the feed's first entries) and a dead letter that
/// names a fourth, registered and open; answers the closed ones in order.
async fn seed(db: &TestDb, served: &Served, lang: &str) -> Vec<String> {
    let hook = served.daemon.url("/webhooks/sume");
    let c = db.client().await;
    let mut closed = Vec::new();
    for i in 1..=3 {
        let job = format!("job_{lang}_earlier_{i}");
        c.execute("insert into sume.jobs (job_id) values ($1)", &[&job])
            .await
            .unwrap();
        Delivery::completed(&job).send(&served.http, &hook).await;
        wait_for(
            &format!("{job} closed"),
            Duration::from_secs(10),
            || async { job_state(db, &job).await.as_deref() == Some("completed") },
        )
        .await;
        closed.push(job);
    }
    let dead = format!("job_{lang}_from_dead_letter");
    c.execute("insert into sume.jobs (job_id) values ($1)", &[&dead])
        .await
        .unwrap();
    readable_dead_letter(db, &format!("dl_{lang}"), &dead).await;
    closed
}

/// Runs the application; delivers its job's webhook once it waits for the close; answers the
/// lines it printed, panicking with its errors when it fails.
async fn run_app(served: &Served, app: Command, job: &str, dead: &str) -> Vec<Value> {
    let mut app = tokio::process::Command::from(app);
    app.env("SUME_INBOX_URL", served.daemon.admin_url(""))
        .env("SUME_INBOX_APP_TOKEN", APP)
        .env("SUME_INBOX_OPERATOR_TOKEN", OPERATOR)
        .env("JOB_ID", job)
        .env("ORDER_ID", format!("order-{job}"))
        .env("DEAD_LETTER_JOB", dead)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = app.spawn().expect("start the application");
    let mut errors = child.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut errors, &mut text)
            .await
            .unwrap();
        text
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    let talk = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|_| panic!("the application printed {line:?}"));
            if v["step"] == "registered" {
                wait_for("the application waits", Duration::from_secs(30), || async {
                    waiters(served).await >= 1
                })
                .await;
                let hook = served.daemon.url("/webhooks/sume");
                Delivery::completed(job).send(&served.http, &hook).await;
            }
            said.push(v);
        }
        child.wait().await.unwrap()
    };
    let status = tokio::time::timeout(Duration::from_secs(120), talk)
        .await
        .expect("the application did not finish within 120 s");
    let errors = errors.await.unwrap();
    assert!(
        status.success(),
        "the application failed ({status}):\n{errors}\nsaid {said:?}"
    );
    said
}

async fn an_application_uses_the_generated_client(lang: &str) {
    let tools = openapi_tools();
    let db = TestDb::new().await;
    let served = Served::start(&db).await;
    let earlier = seed(&db, &served, lang).await;
    let doc_path = served.write_doc(lang);
    let dir = fresh_dir(lang);
    let app = match lang {
        "python" => python_client(&tools, &served.doc, &doc_path, &dir),
        _ => typescript_client(&tools, &served.doc, &doc_path, &dir),
    };
    let job = format!("job_{lang}_app");
    let dead = format!("job_{lang}_from_dead_letter");
    let said = run_app(&served, app, &job, &dead).await;
    let steps: Vec<&str> = said.iter().map(|v| v["step"].as_str().unwrap()).collect();
    assert_eq!(
        steps,
        ["registered", "closed", "feed", "refused", "replayed"]
    );
    let [registered, closed, feed, refused, replayed] = &said[..] else {
        unreachable!()
    };
    assert_eq!(registered["state"], "open");
    assert_eq!(closed["state"], "completed");
    assert_eq!(closed["closed_by"], "webhook");
    assert_eq!(closed["outcome"], "closed");
    let mut expected = earlier;
    expected.push(job.clone());
    assert_eq!(feed["jobs"], serde_json::json!(expected));
    assert!(feed["pages"].as_i64().unwrap() >= 2, "{feed}");
    assert_eq!(refused["status"], 403);
    assert_eq!(refused["code"], "forbidden");
    assert_eq!(
        replayed["letters"],
        serde_json::json!([format!("dl_{lang}")])
    );
    // "stored and applied", or "stored; waiting for its job row" when the attach task's own
    // scan applied it first: either way it is closed below.
    let results = replayed["results"].as_array().unwrap();
    let result = results[0].as_str().unwrap();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        result.starts_with("stored") && result.ends_with(&format!("(job {dead})")),
        "{result}"
    );
    assert_eq!(replayed["job_state"], "completed");
    assert_eq!(job_state(&db, &dead).await.as_deref(), Some("completed"));
    served.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_application_uses_the_python_client_generated_from_the_document() {
    an_application_uses_the_generated_client("python").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_application_uses_the_typescript_client_generated_from_the_document() {
    an_application_uses_the_generated_client("typescript").await;
}
