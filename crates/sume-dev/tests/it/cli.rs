//! The `sume-dev` binary's command line: `sign` prints what the daemon verifies, with the secret
//! taken from a file as the daemon takes it; the simulator takes its secrets from files too;
//! every tool is listed.

use std::process::Command;

fn sume_dev(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sume-dev"));
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run sume-dev")
}

#[test]
fn help_lists_every_tool() {
    let out = sume_dev(&["--help"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for tool in ["sim", "demo", "sign"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{tool} "))),
            "{tool} missing from: {text}"
        );
    }
}

#[test]
fn sign_reads_the_secret_from_a_file() {
    let dir = std::env::temp_dir().join(format!("sume-dev-secret-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hook");
    std::fs::write(&file, "whsec_from_file\n").unwrap();
    let sign = |env: &[(&str, &str)]| {
        sume_dev(
            &["sign", "--job-id", "job_1", "--timestamp", "1700000000"],
            env,
        )
    };
    let out = sign(&[("SUME_WEBHOOK_SECRET_FILE", file.to_str().unwrap())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let body = text.trim_end().rsplit('\n').next().unwrap();
    let sig = text
        .lines()
        .find_map(|l| l.strip_prefix("x-sume-signature: "))
        .unwrap();
    assert_eq!(
        sig,
        sume_wire::signature_header(
            &[sume_wire::Secret::new("whsec_from_file")],
            1_700_000_000,
            body.as_bytes()
        ),
        "the file's content, without its newline, is the secret"
    );
    let both = sign(&[
        ("SUME_WEBHOOK_SECRET_FILE", file.to_str().unwrap()),
        ("SUME_WEBHOOK_SECRET", "x"),
    ]);
    assert!(!both.status.success());
    assert!(String::from_utf8_lossy(&both.stderr).contains("SUME_WEBHOOK_SECRET_FILE are both set"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sign_prints_a_command_that_the_daemon_accepts() {
    let out = sume_dev(
        &[
            "sign",
            "--secret",
            "s",
            "--job-id",
            "job_1",
            "--curl",
            "http://127.0.0.1:8080/webhooks/sume",
        ],
        &[],
    );
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("curl "), "{text}");
    assert!(text.contains("x-sume-signature: v1="));
}

#[tokio::test]
async fn sim_reads_its_secrets_from_files() {
    let dir = std::env::temp_dir().join(format!("sume-dev-sim-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (hook, keys) = (dir.join("hook"), dir.join("keys"));
    std::fs::write(&hook, "whsec_sim_from_file\n").unwrap();
    std::fs::write(
        &keys,
        "main=sk_from_file@mem_a/ws_a\nother=sk_other@mem_b/ws_a\n",
    )
    .unwrap();
    let files = [
        ("SIM_WEBHOOK_SECRET_FILE", hook.to_str().unwrap()),
        ("SIM_KEYS_FILE", keys.to_str().unwrap()),
    ];
    // Refused at start, naming the variable: both forms at once, or an unreadable file.
    let both = sume_dev(&["sim"], &[files[0], files[1], ("SIM_WEBHOOK_SECRET", "x")]);
    assert_eq!(both.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&both.stderr).contains("SIM_WEBHOOK_SECRET_FILE"));
    let missing = sume_dev(
        &["sim"],
        &[("SIM_WEBHOOK_SECRET_FILE", "/nonexistent/hook")],
    );
    assert_eq!(missing.status.code(), Some(78));
    // With nothing but the two files it starts (no secret would refuse it) and knows the keys.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sume-dev"))
        .args(["sim", "--listen", &listen])
        .env_clear()
        .envs(files)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let url = format!("http://{listen}/v1/jobs");
    let mut status = None;
    for _ in 0..200 {
        if let Ok(r) = http.get(&url).bearer_auth("sk_from_file").send().await {
            status = Some(r.status().as_u16());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let unknown = http
        .get(&url)
        .bearer_auth("whsec_sim_from_file")
        .send()
        .await;
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(status, Some(200), "the key of SIM_KEYS_FILE reads");
    assert_eq!(unknown.unwrap().status(), 401);
}
