//! Requests generated from the served document by a tool outside the project, Schemathesis
//! (PyPI, pinned in `scripts/openapi-tools`), as a new user would point it at the daemon: its
//! examples, coverage (each bound and pattern's edges, and requests the document refuses) and
//! fuzzing phases over every operation, with a fixed seed and a bounded number of examples
//! each, against a daemon with both tokens and a database seeded as the contract test seeds it.
//! Its checks: no server error, every status and content type documented, every body of its
//! schema, and nothing the document allows refused (`positive_data_acceptance`: a 400 or 422
//! to a request of the document's own schemas). Its JSON report is read, not only its exit
//! status: every operation tested, no phase errored, no pattern it could not read.
//!
//! The daemon holds no Sume API keys, so a registration may name any key: a name no instance
//! holds is the one refusal that depends on the fleet (422 `unknown_api_key`, documented, and
//! tested in `registration.rs`). MAX_WAIT is 200 ms, so a generated `wait` on an open job
//! ends soon (a longer one waits MAX_WAIT). The operations that write (registration, replay,
//! drop) answer each request by what it says and the rows it finds, whatever came before, so
//! their order cannot change a verdict.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::openapi_check::Document;
use crate::openapi_contract::{seed, Served, OPERATOR};
use crate::support::*;

/// The seed of every run: the same requests each time. Change it to explore others.
const SEED: &str = "41";

/// Examples per operation and phase: enough for every bound and pattern's edges (the coverage
/// phase makes those whatever this says) and a spread of fuzzed values, in well under a minute.
const EXAMPLES: &str = "25";

/// The checks run on every answer.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_schema_conformance,positive_data_acceptance";

#[tokio::test(flavor = "multi_thread")]
async fn requests_generated_from_the_document_are_answered_as_it_says() {
    let tools = openapi_tools();
    let schemathesis = tools.join("venv/bin/schemathesis");
    assert!(
        schemathesis.is_file(),
        "SCHEMATHESIS MISSING: {} is not there; run scripts/openapi-tools ensure",
        schemathesis.display()
    );
    let db = TestDb::new().await;
    let mut c = config(&db.url);
    c.wait.max_wait = Duration::from_millis(200);
    c.wait.poll_interval = Duration::from_millis(100);
    let served = Served::start_with(c).await;
    seed(&db, &served).await;
    let doc_path = served.write_doc("fuzz");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("openapi-fuzz");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.json");
    let mut command = Command::new(&schemathesis);
    command
        .arg("run")
        .arg(&doc_path)
        .args(["--url", served.daemon.admin_url("").trim_end_matches('/')])
        .args(["--header", &format!("Authorization: Bearer {OPERATOR}")])
        .args(["--checks", CHECKS])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--seed", SEED, "--max-examples", EXAMPLES])
        .args(["--generation-database", "none"])
        // One worker: the tool's threads once raced in Python's parser (a "Runtime Error" of
        // the tool, no answer of the daemon's), and the cores are shared anyway.
        .args(["--workers", "1", "--request-timeout", "10", "--no-color"])
        .args(["--report", "json", "--report-json-path"])
        .arg(&report)
        .current_dir(&dir);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("run schemathesis");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = std::fs::read(&report)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_else(|| panic!("schemathesis wrote no report:\n{printed}"));
    assert!(
        out.status.success() && report["exit_code"] == 0,
        "schemathesis found answers the document does not allow:\n{printed}"
    );
    let operations = Document::new(served.doc.clone()).operations().len();
    let counts = &report["operations"];
    assert_eq!(counts["total"], operations, "{counts}\n{printed}");
    assert_eq!(counts["tested"], operations, "{counts}\n{printed}");
    for phase in ["examples", "coverage", "fuzzing"] {
        let status = &report["phases"][phase]["status"];
        assert_eq!(status, "success", "the {phase} phase: {status}\n{printed}");
    }
    assert_eq!(report["seed"].to_string(), SEED, "{printed}");
    let cases = &report["test_cases"];
    assert_eq!(cases["errored"], 0, "{cases}\n{printed}");
    assert!(
        cases["generated"].as_u64() > Some(10 * operations as u64),
        "{cases}"
    );
    // A pattern the tool cannot read would be generated around, so a document's form would go
    // untested.
    let unread = &report["warnings"]["unsupported_regex"];
    assert_eq!(unread, &serde_json::json!([]), "{printed}");
    served.daemon.stop().await;
}
