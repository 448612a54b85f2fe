//! The settings written outside the code agree with their declarations: the systemd example's
//! defaults, the Kubernetes ConfigMap, the compose file, and the other crates that name a
//! setting. (README's tables are written from the declarations: `config::docs`.)

use sume_inbox::config::declared;
use sume_inbox::config::{Config, Setting, Values};

fn repo_file(path: &str) -> String {
    let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn setting(name: &str, file: &str) -> &'static Setting {
    declared::find(name).unwrap_or_else(|| panic!("{file} sets {name}, which is not a setting"))
}

/// `name=value` read as the daemon would, with the settings it cannot start without.
fn readable(name: &str, value: &str, file: &str) {
    let s = setting(name, file);
    if s.flag.is_none() {
        return; // read before the command line (WORKER_THREADS) or by a library (RUST_LOG)
    }
    let mut values = Values::defaults()
        .with(&declared::DATABASE_URL, "postgres://u@localhost/x")
        .with(&declared::SUME_WEBHOOK_SECRET, "whsec_x")
        .with(&declared::ADMIN_TOKEN, "a-token-of-sixteen-chars");
    values = values.with(s, value);
    if let Err(e) = Config::read(&values) {
        panic!("{file}: {name}={value} is refused: {e}");
    }
}

/// The systemd example: every commented `#NAME=value` is "the default shown", so it must be
/// the declared default; every active line must be a setting the daemon reads.
#[test]
fn the_systemd_example_shows_the_declared_defaults() {
    let file = "deploy/systemd/sume-inbox.env.example";
    let text = repo_file(file);
    let mut defaults_shown = 0;
    for line in text.lines() {
        let (commented, line) = match line.strip_prefix('#') {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            continue;
        }
        let s = setting(name, file);
        if commented {
            assert_eq!(
                Some(value),
                s.default,
                "{file}: #{name}={value} is not its default"
            );
            defaults_shown += 1;
        } else {
            readable(name, value, file);
        }
    }
    assert!(defaults_shown >= 10, "{file}: the defaults were not found");
}

/// The ConfigMap: every key a setting, every value readable, and each equal to its default but
/// where a cluster needs another (the admin port reachable by the Service, JSON logs).
#[test]
fn the_kubernetes_config_map_sets_declared_settings() {
    let file = "deploy/k8s/configmap.yaml";
    let text = repo_file(file);
    let data = text.split("\ndata:\n").nth(1).expect("a data: section");
    let cluster_values = ["ADMIN_ADDR", "LOG_FORMAT"];
    let mut keys = 0;
    for line in data
        .lines()
        .filter(|l| l.starts_with("  ") && !l.trim_start().starts_with('#'))
    {
        let (name, value) = line.trim().split_once(": ").expect("key: value");
        let value = value.trim_matches('"');
        readable(name, value, file);
        let s = setting(name, file);
        if !cluster_values.contains(&name) {
            assert_eq!(Some(value), s.default, "{file}: {name} is not its default");
        }
        keys += 1;
    }
    assert!(keys >= 5, "{file}: no settings found");
}

/// The compose file's daemon and migration services (those built from the sume-inbox image) set
/// only settings, and `_FILE` variables only of secrets.
#[test]
fn the_compose_file_sets_declared_settings() {
    let file = "docker-compose.yml";
    let text = repo_file(file);
    let services = text.split("\nservices:\n").nth(1).expect("services:");
    let mut seen = 0;
    for service in services
        .split("\n\n")
        .filter(|b| b.contains("*sume-inbox-image"))
    {
        let Some(env) = service.split("    environment:\n").nth(1) else {
            continue;
        };
        for line in env.lines().take_while(|l| l.starts_with("      ")) {
            let line = line.trim();
            if line.starts_with('#') {
                continue;
            }
            let (name, _) = line.split_once(':').expect("NAME: value");
            let (name, from_file) = match name.strip_suffix("_FILE") {
                Some(name) => (name, true),
                None => (name, false),
            };
            let s = setting(name, file);
            assert!(
                !from_file || s.secret,
                "{file}: {name} is not a secret: it has no _FILE"
            );
            seen += 1;
        }
    }
    assert!(
        seen >= 10,
        "{file}: the daemons' environment was not found ({seen})"
    );
}
