//! A small measured run for the report's tests: a daemon and a baseline at 256 connections, a
//! fixed-rate step, a ceiling and a sweep.

use std::time::Duration;

use super::{Context, CpuCost, Report, Row, Server};
use crate::ceiling::Ceiling;
use crate::load::Mode;
use crate::stack::Memory;
use crate::stats::Tally;

pub fn row(server: Server, mode: Mode, connections: usize, ok: u64, p99_us: u64) -> Row {
    let mut tally = Tally {
        ok,
        acked_total: ok,
        sent_total: ok,
        ..Tally::default()
    };
    for _ in 0..99 {
        tally.latency.record_micros(p99_us / 2);
    }
    tally.latency.record_micros(p99_us);
    tally.latency.record_micros(p99_us);
    Row {
        server,
        label: server.label().to_owned(),
        mode,
        connections,
        window: Duration::from_secs(10),
        tally,
        memory: Some(Memory {
            peak_kib: 40 * 1024,
            now_kib: 30 * 1024,
        }),
        cpu: CpuCost::per_event(
            Duration::from_millis(ok),
            Duration::from_millis(2 * ok),
            Duration::from_micros(500 * ok),
            ok,
        ),
        per_commit: Some(12.5),
    }
}

pub fn report() -> Report {
    Report {
        context: Context {
            command: "make bench".into(),
            date: "2025-01-01 12:00 UTC".into(),
            cpus: 2,
            cpu_model: "Test CPU".into(),
            settings: vec![("INGEST_WRITERS".into(), "2".into())],
            warmup: Duration::from_secs(3),
            duration: Duration::from_secs(10),
            ..Context::default()
        },
        rows: vec![
            row(Server::Daemon, Mode::Closed, 256, 60_000, 40_000),
            row(Server::Baseline, Mode::Closed, 256, 15_000, 90_000),
            row(Server::Daemon, Mode::Rate(1000.0), 64, 10_000, 12_000),
            row(Server::Baseline, Mode::Rate(1000.0), 64, 10_000, 3_000),
        ],
        ceiling: Some(Ceiling {
            rows: 200_000,
            elapsed: Duration::from_secs(10),
            batch: 1000,
            connections: 2,
        }),
        attach: vec![attach(None, 25.0), attach(Some(500.0), 8.0)],
        sweep: Some(crate::stages::SweepResult {
            due: 10_000,
            closed_beside: 1_000_000,
            pass_empty: Duration::from_millis(2000),
            pass_beside_closed: Duration::from_millis(3200),
            closed_by_pass: 10_000,
        }),
    }
}

fn attach(rate: Option<f64>, p99_ms: f64) -> crate::stages::AttachResult {
    crate::stages::AttachResult {
        jobs: 10_000,
        connections: 8,
        rate,
        total: Duration::from_secs(3),
        registered_in: Duration::from_secs(3),
        p50_ms: p99_ms / 4.0,
        p99_ms,
        max_ms: p99_ms * 2.0,
    }
}
