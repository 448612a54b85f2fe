//! The memory limit a container or a systemd unit puts on the process (its cgroup's), against
//! what the ports' settings let strangers make it hold: a limit below that lets anyone who can
//! open connections have the process killed for memory, so the start says so.

use std::path::Path;

/// Resident memory of a ready daemon, rounded up (23 MiB ready, 37-44 MiB under load: README,
/// "The public port"; docs/benchmarks.md).
const BASE: u64 = 48 << 20;

/// What an open connection holds at most, idle or sending its head or body slowly (about
/// 25 KiB measured with thousands open: README, "The public port").
const PER_CONNECTION: u64 = 25 << 10;

/// Where cgroups are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// What the settings let the process hold: its base, every connection both ports may keep
/// open, and the body bytes MAX_BODY_MEMORY allows plus one body's copy when it is whole.
pub fn needed(connections: usize, max_body_memory: usize, max_body_bytes: usize) -> u64 {
    BASE + PER_CONNECTION * connections as u64 + max_body_memory as u64 + max_body_bytes as u64
}

/// Warns when the cgroup's memory limit is below [`needed`]; silent when there is none or it
/// cannot be read.
pub fn check(needed: u64) {
    let membership = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let files = limit_files(Path::new(CGROUP_ROOT), &membership);
    let Some(limit) = files.iter().find_map(|f| read_limit(f)) else {
        return;
    };
    if let Some(doubt) = doubt(limit, needed) {
        tracing::warn!(limit, needed, "{doubt}");
    }
}

/// The files that may hold this process's limit, in the order to read them: its own cgroup's
/// (`/proc/self/cgroup`: a unit's, or a container's seen through its cgroup namespace), cgroup
/// v2's `memory.max` then v1's `memory.limit_in_bytes`; then the mount's root, which is the
/// container's own where its cgroup is mounted there without a namespace.
fn limit_files(root: &Path, membership: &str) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let Some(path) = path.map(|p| p.trim_start_matches('/')) else {
            continue;
        };
        match controllers {
            Some("") => files.push(root.join(path).join("memory.max")),
            Some(c) if c.split(',').any(|c| c == "memory") => {
                files.push(root.join("memory").join(path).join("memory.limit_in_bytes"));
            }
            _ => {}
        }
    }
    files.push(root.join("memory.max"));
    files.push(root.join("memory/memory.limit_in_bytes"));
    files
}

/// A limit in one of the cgroup files: bytes, `max` (none), or cgroup v1's "no limit" (a
/// number near 2^63).
fn read_limit(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let limit: u64 = text.trim().parse().ok()?;
    (limit < 1 << 62).then_some(limit)
}

/// The warning for `limit` bytes against `needed`, if it is short.
fn doubt(limit: u64, needed: u64) -> Option<String> {
    (limit < needed).then(|| {
        format!(
            "the memory limit ({} MiB, the container's or the unit's) is below the {} MiB that \
             MAX_CONNECTIONS, MAX_ADMIN_CONNECTIONS, MAX_BODY_MEMORY and MAX_BODY_BYTES let \
             clients make this process hold (about 25 KiB a connection, plus the bodies): a \
             client without the secret could have it killed for memory; raise the limit or \
             lower those settings",
            limit >> 20,
            needed.div_ceil(1 << 20)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_need_about_384_mib_and_a_256_mib_limit_is_said_to_be_short() {
        let defaults = needed(10_000 + 1_100, 64 << 20, 1 << 20);
        assert_eq!(defaults.div_ceil(1 << 20), 384);
        let said = doubt(256 << 20, defaults).expect("256 MiB is short");
        assert!(
            said.contains("(256 MiB") && said.contains("384 MiB"),
            "{said}"
        );
        assert_eq!(doubt(512 << 20, defaults), None);
    }

    #[test]
    fn the_processs_own_cgroup_is_read_first_then_the_mounts_root() {
        let root = Path::new("/cg");
        let v2 = limit_files(root, "0::/system.slice/sume-inbox.service\n");
        assert_eq!(
            v2[0],
            root.join("system.slice/sume-inbox.service/memory.max")
        );
        let v1 = limit_files(root, "5:devices:/x\n4:memory:/docker/abc\n0::/\n");
        assert_eq!(v1[0], root.join("memory/docker/abc/memory.limit_in_bytes"));
        assert_eq!(v1[1], root.join("memory.max"));
        assert_eq!(
            v1[v1.len() - 2..],
            [
                root.join("memory.max"),
                root.join("memory/memory.limit_in_bytes")
            ]
        );
    }

    #[test]
    fn a_limit_is_read_in_bytes_and_none_is_no_limit() {
        let dir = std::env::temp_dir().join(format!("sume-memory-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("memory.max");
        for (text, read) in [
            ("268435456\n", Some(268_435_456)),
            ("max\n", None),
            ("9223372036854771712\n", None),
            ("", None),
        ] {
            std::fs::write(&file, text).unwrap();
            assert_eq!(read_limit(&file), read, "{text:?}");
        }
        assert_eq!(read_limit(&dir.join("absent")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
