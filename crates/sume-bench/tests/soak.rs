//! The soak's smoke run, inside `make test`: the same code as `make soak` (`sume-bench soak`)
//! for a few seconds at a low rate, against the debug `sume-soak-daemon`, a PostgreSQL cluster
//! of its own and the simulator. It checks that the pieces meet (deliveries stored and
//! answered, jobs registered and closed, every table sampled, every series judged, the chart
//! drawn); whether the series stay flat is `make soak`'s question, over ten minutes.

use std::path::PathBuf;
use std::time::Duration;

use sume_bench::soak::{self, SoakArgs};

fn soak_daemon_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sume-soak-daemon"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_soak_samples_judges_and_draws_every_series() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("soak-{}", std::process::id()));
    let args = SoakArgs {
        duration: Duration::from_secs(12),
        rate: 200.0,
        connections: 4,
        sample_every: Duration::from_secs(2),
        settle: Duration::from_secs(4),
        span: Duration::from_secs(2),
        tolerance: 20.0,
        retention: Duration::from_secs(3),
        daemon_bin: Some(soak_daemon_bin()),
        devpg: root.join("scripts/devpg"),
        work_dir: work.clone(),
        svg: work.join("soak.svg"),
        out: work.join("benchmarks.md"),
        no_append: true,
        note: None,
    };
    let report = soak::soak(&args).await.expect("the soak ran to its end");
    println!("{}", report.markdown());

    assert_eq!(report.samples.len(), 6, "a sample every 2 s for 12 s");
    assert_eq!(report.failed, 0, "every delivery answered 2xx");
    let most = |table: &str| {
        report
            .samples
            .iter()
            .filter_map(|s| s.table(table).map(|t| t.live))
            .max()
            .unwrap_or(0)
    };
    assert!(most("events") > 0, "events were stored");
    assert!(most("job_closes") > 0, "registered jobs were closed");
    assert!(
        report.verdicts.iter().all(Result::is_ok),
        "every series has a verdict: {:?}",
        report.verdict_lines()
    );
    soak::publish(&args, &report).ok();
    let svg = std::fs::read_to_string(&args.svg).expect("the chart was written");
    assert!(svg.contains("daemon RSS, MiB") && svg.contains("<polyline"));
    let _ = std::fs::remove_dir_all(&work);
}
