//! The `sume-dev` binary's command line: `sign` prints what the daemon verifies, with the secret
//! taken from a file as the daemon takes it; every tool is listed.

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
