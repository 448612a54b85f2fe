//! What a process uses, read from `/proc`: resident memory, CPU time of one process and of a
//! whole PostgreSQL cluster (the postmaster, its live children and those that have exited).

use std::time::Duration;

/// Resident memory of a process, in KiB, from `/proc/PID/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// Peak resident set (VmHWM) since the process started.
    pub peak_kib: u64,
    /// Resident set now (VmRSS).
    pub now_kib: u64,
}

/// The memory of process `pid`; fails when it has exited or `/proc` cannot be read.
pub fn memory(pid: u32) -> anyhow::Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(parse_memory(&status))
}

fn parse_memory(status: &str) -> Memory {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Memory {
        peak_kib: field("VmHWM:"),
        now_kib: field("VmRSS:"),
    }
}

/// CPU time (user + system) a process has used, from `/proc/PID/stat`; with `children`, also
/// that of its children it has waited for (PostgreSQL's exited backends and workers).
pub fn cpu_time(pid: u32, children: bool) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, ticks) = parse_stat(&stat, children)?;
    Some(ticks_to_duration(ticks))
}

/// The CPU time of a PostgreSQL cluster: the postmaster, every live child, and every child that
/// has exited (counted in the postmaster's children times).
pub fn cluster_cpu_time(postmaster: u32) -> Option<Duration> {
    let mut ticks = 0;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if pid == postmaster {
            ticks += parse_stat(&stat, true).map_or(0, |(_, t)| t);
            found = true;
        } else if let Some((ppid, t)) = parse_stat(&stat, false) {
            if ppid == postmaster {
                ticks += t;
            }
        }
    }
    found.then(|| ticks_to_duration(ticks))
}

fn ticks_to_duration(ticks: u64) -> Duration {
    // SAFETY: sysconf only reads a configuration value.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / per_sec)
}

/// `(ppid, utime + stime [+ cutime + cstime])` in clock ticks. The command name (field 2) may
/// hold spaces and parentheses, so fields are counted from its closing parenthesis.
fn parse_stat(stat: &str, children: bool) -> Option<(u32, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    let ppid = num(1)? as u32;
    let mut ticks = num(11)? + num(12)?;
    if children {
        ticks += num(13)? + num(14)?;
    }
    Some((ppid, ticks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_status() {
        let status =
            "Name:\tsume-inbox\nVmPeak:\t  900000 kB\nVmHWM:\t   45312 kB\nVmRSS:\t   40100 kB\n";
        assert_eq!(
            parse_memory(status),
            Memory {
                peak_kib: 45_312,
                now_kib: 40_100
            }
        );
        assert_eq!(parse_memory(""), Memory::default());
    }

    #[test]
    fn reads_cpu_times_from_proc_stat() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime ...
        let stat = "4242 (postgres: a) b) S 4000 4000 4000 0 -1 4194560 10 0 0 0 150 50 7 3 20 0 1";
        assert_eq!(parse_stat(stat, false), Some((4000, 200)));
        assert_eq!(parse_stat(stat, true), Some((4000, 210)));
        assert_eq!(parse_stat("garbage", false), None);
        let me = cpu_time(std::process::id(), false).unwrap();
        assert!(me < Duration::from_secs(3_600));
    }

    #[test]
    fn reads_our_own_memory() {
        let m = memory(std::process::id()).unwrap();
        assert!(m.peak_kib >= m.now_kib && m.now_kib > 0, "{m:?}");
    }
}
