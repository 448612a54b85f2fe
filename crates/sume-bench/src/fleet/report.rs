//! The fleet benchmark's figures: one [`FleetRow`] per configuration and round, the median
//! round of each, and the section appended to docs/benchmarks.md.

use std::fmt::Write as _;
use std::time::Duration;

use super::{FleetArgs, Route};
use crate::report::{ms, thousands};
use crate::stats::Tally;

/// What the sampler saw in a measured window.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Client backends of the server (connections open), one per sample.
    pub open: Vec<u64>,
    /// Those running a statement (not idle), one per sample.
    pub running: Vec<u64>,
    /// PgBouncer's server connections, one per sample (behind PgBouncer only).
    pub bouncer_servers: Vec<u64>,
}

impl Samples {
    /// Adds one sample.
    pub fn push(&mut self, open: u64, running: u64, servers: Option<u64>) {
        self.open.push(open);
        self.running.push(running);
        if let Some(s) = servers {
            self.bouncer_servers.push(s);
        }
    }
}

/// `max / mean` of a series, `-` when empty.
fn max_mean(v: &[u64]) -> String {
    match v.iter().max() {
        None => "-".to_owned(),
        Some(max) => format!(
            "{max} / {:.1}",
            v.iter().sum::<u64>() as f64 / v.len() as f64
        ),
    }
}

/// One configuration in one round.
#[derive(Debug, Clone)]
pub struct FleetRow {
    /// Direct or through PgBouncer.
    pub route: Route,
    /// Daemon instances.
    pub instances: usize,
    /// The measured window.
    pub window: Duration,
    /// What the load counted.
    pub tally: Tally,
    /// What the sampler saw.
    pub samples: Samples,
    /// CPU µs per event: instances (summed), PostgreSQL, PgBouncer, load generator.
    pub cpu_us: Option<[f64; 4]>,
}

impl FleetRow {
    /// Divides the CPU times by the events acknowledged (warm-up included, as they were).
    pub fn new(
        route: Route,
        instances: usize,
        window: Duration,
        tally: Tally,
        samples: Samples,
        cpu: Option<[Duration; 4]>,
    ) -> FleetRow {
        let events = tally.acked_total;
        let cpu_us = cpu
            .filter(|_| events > 0)
            .map(|c| c.map(|d| d.as_secs_f64() * 1e6 / events as f64));
        FleetRow {
            route,
            instances,
            window,
            tally,
            samples,
            cpu_us,
        }
    }

    /// Durable events per second in the measured window.
    pub fn per_sec(&self) -> f64 {
        self.tally.ok_per_sec(self.window)
    }

    /// The CPU of all four per event, in µs.
    pub fn cpu_sum(&self) -> Option<f64> {
        self.cpu_us.map(|c| c.iter().sum())
    }

    /// The end of the step's progress line.
    pub fn progress(&self, stored: u64) -> String {
        format!(
            "{}/s, p99 {} ms, {} not 2xx, backends open {}; stored {stored} of {} acked",
            thousands(self.per_sec()),
            ms(self.tally.latency.quantile(0.99)),
            self.tally.not_2xx + self.tally.errors,
            max_mean(&self.samples.open),
            self.tally.acked_total
        )
    }
}

/// For each configuration, the round with the median events/s (the lower middle one for an
/// even count), in the order the configurations first ran.
pub fn median_rows(rows: Vec<FleetRow>) -> Vec<FleetRow> {
    let mut keys: Vec<(Route, usize)> = Vec::new();
    for r in &rows {
        if !keys.contains(&(r.route, r.instances)) {
            keys.push((r.route, r.instances));
        }
    }
    keys.into_iter()
        .map(|k| {
            let mut same: Vec<&FleetRow> = rows
                .iter()
                .filter(|r| (r.route, r.instances) == k)
                .collect();
            same.sort_by(|a, b| a.per_sec().total_cmp(&b.per_sec()));
            same[(same.len() - 1) / 2].clone()
        })
        .collect()
}

/// The section appended to docs/benchmarks.md.
pub struct FleetReport {
    /// The command as the reader would type it.
    pub command: String,
    /// When, UTC.
    pub date: String,
    /// CPUs, memory, kernel, PostgreSQL, revision.
    pub machine: String,
    /// The run's flags.
    pub args: FleetArgs,
    /// The median round of each configuration.
    pub rows: Vec<FleetRow>,
}

impl FleetReport {
    /// Heading, command, machine, table and the reading of it.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let a = &self.args;
        let _ = writeln!(s, "### {}: the fleet\n", self.date);
        let _ = writeln!(s, "`{}`\n", self.command);
        let _ = writeln!(s, "Machine: {}.", self.machine);
        let settings: Vec<String> = crate::stack::daemon_settings()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(
            s,
            "Each instance: {}. Load: {} keep-alive connections spread over the instances, closed loop; \
             {} s warm-up, {} s measured; each row is the median of {} round(s) by events/s.",
            settings.join(", "),
            a.connections,
            a.warmup.as_secs_f64(),
            a.duration.as_secs_f64(),
            a.rounds
        );
        if let Some(note) = &a.note {
            let _ = writeln!(s, "Note: {note}");
        }
        s.push('\n');
        s.push_str(&self.table());
        s
    }

    /// The table alone.
    pub fn table(&self) -> String {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let mut s = String::from(
            "| route | instances | events/s | vs 1 instance | p99 ms | not 2xx | PG backends open, max / mean | running, max / mean | PgBouncer server conns, max / mean | CPU µs/event: daemons + PG + PgBouncer + load | cores / CPU per event |\n\
             |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        );
        for r in &self.rows {
            let one = self
                .rows
                .iter()
                .find(|o| o.route == r.route && o.instances == 1)
                .map(FleetRow::per_sec);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.route.label(),
                r.instances,
                thousands(r.per_sec()),
                one.filter(|o| *o > 0.0)
                    .map(|o| format!("{:.2}x", r.per_sec() / o))
                    .unwrap_or_else(|| "-".into()),
                ms(r.tally.latency.quantile(0.99)),
                r.tally.not_2xx + r.tally.errors,
                max_mean(&r.samples.open),
                max_mean(&r.samples.running),
                max_mean(&r.samples.bouncer_servers),
                r.cpu_us
                    .map(|c| format!("{:.0} + {:.0} + {:.0} + {:.0}", c[0], c[1], c[2], c[3]))
                    .unwrap_or_else(|| "-".into()),
                r.cpu_sum()
                    .filter(|s| *s > 0.0)
                    .map(|sum| format!("{}/s", thousands(cpus * 1e6 / sum)))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(route: Route, instances: usize, ok: u64) -> FleetRow {
        let tally = Tally {
            ok,
            acked_total: ok,
            sent_total: ok,
            ..Tally::default()
        };
        let mut samples = Samples::default();
        samples.push(20, 4, None);
        samples.push(30, 6, None);
        FleetRow::new(
            route,
            instances,
            Duration::from_secs(1),
            tally,
            samples,
            Some([Duration::from_millis(ok / 25); 4]),
        )
    }

    #[test]
    fn the_median_round_of_each_configuration() {
        let rows = vec![
            row(Route::Direct, 1, 100),
            row(Route::Direct, 2, 900),
            row(Route::Direct, 1, 300),
            row(Route::Direct, 2, 700),
            row(Route::Direct, 1, 200),
            row(Route::Direct, 2, 800),
        ];
        let m = median_rows(rows);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].instances, m[0].tally.ok), (1, 200));
        assert_eq!((m[1].instances, m[1].tally.ok), (2, 800));
    }

    #[test]
    fn samples_and_cpu_per_event() {
        let r = row(Route::Bouncer, 1, 1000);
        assert_eq!(max_mean(&r.samples.open), "30 / 25.0");
        assert_eq!(max_mean(&r.samples.bouncer_servers), "-");
        // 40 ms of each over 1000 events: 40 µs each, 160 in all.
        assert_eq!(r.cpu_sum().map(f64::round), Some(160.0));
    }
}
