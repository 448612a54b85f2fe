//! How the demo sets up the simulator and the daemons: the faults the simulator injects (early,
//! duplicated and dropped deliveries, failed jobs, 429s) and the compressed timings that fit
//! what production spreads over hours into a minute.

use std::time::Duration;

use sume_sim::{DurationRange, Faults, RunningSim, SimConfig, TEST_WEBHOOK_SECRET};
use sume_wire::Secret;

use sume_inbox::config::{ApiKey, Config, Rate, SweepConfig};

use super::{DemoArgs, APP_KEY, APP_KEY_NAME, OTHER_KEY};

pub(super) fn sim_config(args: &DemoArgs) -> SimConfig {
    let mut c = SimConfig::for_tests()
        .with_key(APP_KEY_NAME, APP_KEY, "mem_app", "ws_demo")
        .with_key("other", OTHER_KEY, "mem_other", "ws_other");
    c.timing.duration_short = DurationRange::millis(50, 400);
    c.timing.long_fraction = 0.1;
    c.timing.duration_long = DurationRange::millis(1_000, 3_000);
    // Sume's 120 reads a minute, compressed to 5 seconds.
    c.limits.reads_per_window = 60;
    c.limits.rate_window = Duration::from_secs(5);
    c.limits.creates_per_window = (args.jobs + args.foreign_jobs).max(10) as u32 * 2;
    c.delivery.webhook_backoff_base = Duration::from_millis(50);
    c.delivery.webhook_backoff_cap = Duration::from_secs(1);
    c.delivery.webhook_timeout = Duration::from_secs(10);
    c.delivery.duplicate_delay = Duration::from_millis(100);
    c.delivery.late_delay = Duration::from_millis(100);
    c.faults = Faults {
        early: 0.3,
        duplicate: 0.15,
        drop: 0.08,
        late_nonterminal: 0.05,
        failed: 0.06,
        canceled: 0.02,
        expired: 0.02,
        status_429: 0.03,
        status_429_retry_after: Duration::from_secs(1),
        ..Faults::none()
    };
    c
}

pub(super) fn daemon_config(database_url: &str, sim: &RunningSim) -> Config {
    let mut c = Config::local(database_url, TEST_WEBHOOK_SECRET);
    c.db_pool_size = 8;
    c.sume_api_url = sim.api_url();
    c.api_keys = vec![ApiKey {
        name: APP_KEY_NAME.to_owned(),
        key: Secret::new(APP_KEY),
    }];
    c.attach.scan_interval = Duration::from_secs(1);
    // Compressed time: a demo minute holds what production spreads over hours.
    c.sweep = SweepConfig {
        interval: Duration::from_millis(250),
        inbox_grace: Duration::from_secs(2),
        poll_after: Duration::from_secs(1),
        poll_max_interval: Duration::from_secs(2),
        poll_give_up: Duration::from_secs(300),
        lease: Duration::from_secs(10),
        read_rate: Rate {
            count: 50,
            per: Duration::from_secs(5),
        },
        request_timeout: Duration::from_secs(2),
        ..SweepConfig::default()
    };
    c.shutdown_timeout = Duration::from_secs(5);
    c
}
