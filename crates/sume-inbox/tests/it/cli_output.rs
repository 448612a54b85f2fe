//! The commands' output when standard output cannot take it, run as the binary: a pipe whose
//! reader went away before anything was written (`| head`) ends the command quietly with 0; a
//! full device (`/dev/full`) ends it with 1 and one line saying so; never a panic.

use std::process::{Command, Stdio};

use sume_sim::RunningSim;

use crate::support::*;
use crate::sweep::{sim_config, MAIN_KEY};

/// Where the command's standard output goes.
#[derive(Debug, Clone, Copy)]
enum Out {
    /// A pipe whose read end is closed before the command starts.
    Closed,
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
}

/// Runs `sume-inbox ARGS` with `env`, its standard output `out`: (exit code, stderr).
fn run(args: &[&str], env: &[(&str, &str)], out: Out) -> (Option<i32>, String) {
    let stdout = match out {
        Out::Closed => {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            Stdio::from(writer)
        }
        Out::Full => Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        ),
    };
    let done = Command::new(env!("CARGO_BIN_EXE_sume-inbox"))
        .args(args)
        .envs(env.iter().copied())
        .env("LOG_FORMAT", "pretty")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        done.status.code(),
        String::from_utf8_lossy(&done.stderr).into_owned(),
    )
}

/// Both ways, for one command: 0 and nothing said for the closed pipe, 1 and the reason for
/// the full device.
fn check(args: &[&str], env: &[(&str, &str)]) {
    let (code, err) = run(args, env, Out::Closed);
    assert_eq!(code, Some(0), "{args:?} into a closed pipe: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("standard output"),
        "{args:?} into a closed pipe: {err}"
    );
    let (code, err) = run(args, env, Out::Full);
    assert_eq!(code, Some(1), "{args:?} into /dev/full: {err}");
    assert!(!err.contains("panicked"), "{args:?} into /dev/full: {err}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("sume-inbox: cannot write to standard output: No space left on device"),
        "{args:?} into /dev/full: {err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reader_gone_ends_a_command_quietly_and_a_full_device_with_one_line() {
    let db = TestDb::new().await;
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("SUME_WEBHOOK_SECRET", SECRET),
    ];
    check(&["migrate"], &env);
    db.client()
        .await
        .batch_execute("insert into sume.jobs (job_id) values ('job_x')")
        .await
        .unwrap();
    for args in [
        &["stats"][..],
        &["stats", "--json"],
        &["jobs", "show", "job_x"],
        &["jobs", "show", "job_x", "--json"],
        &["inbox", "ls"],
        &["dead-letters", "ls", "--json"],
        &["audit", "ls"],
        &["replay", "--dead-letters"],
        &["dead-letters", "drop", "dl_nobody"],
    ] {
        check(args, &env);
    }
    let sim = RunningSim::start(sim_config()).await.unwrap();
    let keys = format!("main:{MAIN_KEY}");
    let api = sim.api_url();
    let with_sume = [
        ("DATABASE_URL", db.url.as_str()),
        ("SUME_API_URL", api.as_str()),
        ("SUME_API_KEYS", keys.as_str()),
    ];
    check(&["reconcile", "--since", "1h", "--json"], &with_sume);
    check(&["reconcile", "--since", "1h"], &with_sume);
    let daemon = Daemon::start(config(&db.url)).await;
    let listen = daemon.webhook.to_string();
    check(&["healthcheck"], &[("LISTEN_ADDR", listen.as_str())]);
    daemon.stop().await;
}
