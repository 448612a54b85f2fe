//! What the soak's section says beside the samples: how it ran (settings, the application's
//! mix, the verdicts' rule), its totals, the daemon's counters, the verdicts and the chart's
//! link.

use std::sync::atomic::Ordering;

use super::report::SoakReport;
use super::sample::Sample;
use super::traffic::{self, Shared};
use super::{verdict, SoakArgs};
use crate::run::context;

/// The daemon's counters that say what attach, the sweep and retention did.
pub(super) async fn counters(admin: std::net::SocketAddr) -> Vec<String> {
    let Some(text) = crate::load::get_text(admin, "/metrics").await else {
        return vec!["(the daemon's /metrics did not answer)".into()];
    };
    const NAMES: [&str; 5] = [
        "sume_inbox_jobs_closed_total",
        "sume_inbox_foreign_events_set_aside_total",
        "sume_inbox_retention_removed_rows_total",
        "sume_inbox_sume_requests_total",
        "sume_inbox_orphans_found_total",
    ];
    text.lines()
        .filter(|l| NAMES.iter().any(|n| l.starts_with(n)))
        .map(str::to_owned)
        .collect()
}

pub(super) async fn build_report(
    args: &SoakArgs,
    db: &tokio_postgres::Client,
    shared: &Shared,
    samples: Vec<Sample>,
    counters: Vec<String>,
    settings: &[(String, String)],
) -> anyhow::Result<SoakReport> {
    let settle = args.settle();
    let span = args.span.max(args.sample_every);
    let verdicts = verdict::all()
        .iter()
        .map(|series| {
            verdict::judge(&samples, series, settle, span, args.tolerance / 100.0).ok_or_else(
                || {
                    format!(
                        "no verdict for {}: no sample in the reference span or at the end",
                        series.name
                    )
                },
            )
        })
        .collect();
    let setup = setup_lines(args, settings, settle, span);
    let totals = format!(
        "Deliveries: {} sent, {} answered 2xx, {} not; jobs registered: {} ({} for the poll).",
        shared.sent.load(Ordering::Relaxed),
        shared.acked.load(Ordering::Relaxed),
        shared.failed.load(Ordering::Relaxed),
        shared.registered.load(Ordering::Relaxed),
        shared.polled_jobs.load(Ordering::Relaxed),
    );
    Ok(SoakReport {
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        command: context::command_line_of("soak", "SOAK_ARGS"),
        machine: context::machine(db).await,
        setup,
        totals,
        failed: shared.failed.load(Ordering::Relaxed),
        counters,
        samples,
        verdicts,
        chart: chart_link(&args.out, &args.svg),
    })
}

/// How the soak was set up, a line each: the load, the application, the daemon, the verdicts.
fn setup_lines(
    args: &SoakArgs,
    settings: &[(String, String)],
    settle: std::time::Duration,
    span: std::time::Duration,
) -> Vec<String> {
    let shown: Vec<String> = settings
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "SUME_API_URL" | "SUME_API_KEYS" | "LIBC_FATAL_STDERR_"
            )
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let setup = vec![
        format!(
            "Load: {}/s signed deliveries over {} keep-alive connections, open loop (latency from the intended send time), for {}; a sample every {}.",
            crate::report::thousands(args.rate),
            args.connections,
            humantime::format_duration(args.duration),
            humantime::format_duration(args.sample_every),
        ),
        format!(
            "Application: 1 job in {} registered about 200 ms before its webhook, 1 in {} never (the inbox check sets its event aside), the rest 100-300 ms after; one job every 2 s created at the simulator and registered, with no webhook (the poll closes it after POLL_AFTER).",
            traffic::BEFORE_EVERY,
            traffic::NEVER_EVERY
        ),
        format!(
            "Daemon: sume-soak-daemon (`sume-inbox serve` whose RETENTION and JOB_RETENTION are replaced by SOAK_RETENTION once checked), {}, the rest as shipped.",
            shown.join(", ")
        ),
        format!(
            "Verdicts: the largest sample of the {} up to {} against the largest of the last {}; flat when it grew by at most {}% or the series' floor.",
            humantime::format_duration(span),
            humantime::format_duration(settle),
            humantime::format_duration(span),
            args.tolerance
        ),
    ];
    match &args.note {
        Some(n) => setup.into_iter().chain([format!("Note: {n}")]).collect(),
        None => setup,
    }
}

/// The chart's path as a link from --out's directory (both under the same root here).
fn chart_link(out: &std::path::Path, svg: &std::path::Path) -> Option<String> {
    let dir = out.parent().unwrap_or(std::path::Path::new(""));
    svg.strip_prefix(dir).ok().map(|p| p.display().to_string())
}
