//! The overview's chart of the fleet's last hour: inline SVG drawn on the server, one line per
//! series, with axis labels, a legend with each series' total and a table of the minutes
//! under it for screen readers and for exact numbers. No script and no `style`: colours are
//! SVG presentation attributes, which the Content-Security-Policy allows.

use maud::{html, Markup};

use crate::db::{FleetMinute, MinuteCounts};

/// The series, in [`MinuteCounts::values`]' order: label and colour.
pub const SERIES: [(&str, &str); 7] = [
    ("webhooks stored", "#1e7b34"),
    ("duplicates", "#4a90d9"),
    ("401 refused", "#b3261e"),
    ("503 answered", "#d97706"),
    ("closed by webhook", "#2456c8"),
    ("closed by poll", "#7c3aed"),
    ("given up", "#5f6b7a"),
];

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 44.0;

/// The smallest of 1, 2, 5 times a power of ten at or above `n` (at least 1).
fn nice_ceiling(n: i64) -> i64 {
    let mut step = 1;
    loop {
        for m in [1, 2, 5] {
            if m * step >= n {
                return m * step;
            }
        }
        step *= 10;
    }
}

/// Each series' total over the minutes.
pub fn totals(minutes: &[FleetMinute]) -> MinuteCounts {
    minutes
        .iter()
        .fold(MinuteCounts::default(), |sum, m| sum.combine(&m.counts, 1))
}

/// The points of series `i` over the plot.
fn points(minutes: &[FleetMinute], i: usize, top: i64) -> String {
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let step = w / (minutes.len().max(2) - 1) as f64;
    minutes
        .iter()
        .enumerate()
        .map(|(k, m)| {
            let x = LEFT + step * k as f64;
            let y = TOP + h - h * m.counts.values()[i] as f64 / top as f64;
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The chart, its legend with totals, and the table of minutes with anything counted. The last
/// of `minutes` is the current one, still being counted (instances write a minute when it
/// ends): it is in the totals and the table, not drawn, so the lines do not fall at its end.
pub fn last_hour(minutes: &[FleetMinute]) -> Markup {
    let drawn = &minutes[..minutes.len().saturating_sub(1)];
    let top = nice_ceiling(
        drawn
            .iter()
            .flat_map(|m| m.counts.values())
            .max()
            .unwrap_or(0),
    );
    let totals = totals(minutes).values();
    let (first, last) = match (drawn.first(), drawn.last()) {
        (Some(f), Some(l)) => (f.minute, l.minute),
        _ => return html! { p.muted { "No minutes to show." } },
    };
    let summary = SERIES
        .iter()
        .zip(totals)
        .map(|((label, _), n)| format!("{n} {label}"))
        .collect::<Vec<_>>()
        .join(", ");
    let base = HEIGHT - BOTTOM;
    let right = WIDTH - RIGHT;
    let middle = LEFT + (right - LEFT) / 2.0;
    let busy: Vec<&FleetMinute> = minutes.iter().filter(|m| !m.counts.is_zero()).collect();
    html! {
        svg.chart xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="chart-title"
            viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } width=(WIDTH) height=(HEIGHT) {
            title #chart-title { "The fleet's last hour, per minute, " (first.format("%H:%M")) " to "
                (last.format("%H:%M")) " UTC; with the current minute so far: " (summary) }
            @for k in 0..=2 {
                @let y = TOP + (base - TOP) * k as f64 / 2.0;
                line x1=(LEFT) x2=(right) y1=(y) y2=(y) stroke="#d9dee5" stroke-width="1" {}
                text x=(LEFT - 6.0) y=(y + 4.0) text-anchor="end" font-size="11" fill="#5f6b7a" {
                    (top * (2 - k) / 2)
                }
            }
            line x1=(LEFT) x2=(LEFT) y1=(TOP) y2=(base) stroke="#8894a4" stroke-width="1" {}
            text x=(LEFT) y=(base + 16.0) text-anchor="start" font-size="11" fill="#5f6b7a" { (first.format("%H:%M")) }
            text x=(middle) y=(base + 16.0) text-anchor="middle" font-size="11" fill="#5f6b7a" { "minute (UTC)" }
            text x=(right) y=(base + 16.0) text-anchor="end" font-size="11" fill="#5f6b7a" { (last.format("%H:%M")) }
            text x="14" y=(TOP + (base - TOP) / 2.0) text-anchor="middle" font-size="11" fill="#5f6b7a"
                transform={ "rotate(-90 14 " (TOP + (base - TOP) / 2.0) ")" } { "per minute" }
            @for (i, (_, colour)) in SERIES.iter().enumerate() {
                polyline points=(points(drawn, i, top)) fill="none" stroke=(colour)
                    stroke-width="1.8" stroke-linejoin="round" {}
            }
        }
        table.legend {
            tr { th { "series" } th { "last hour (the current minute so far included)" } }
            @for ((label, colour), n) in SERIES.iter().zip(totals) {
                tr {
                    td {
                        svg width="12" height="12" aria-hidden="true" { rect width="12" height="12" fill=(colour) {} }
                        " " (label)
                    }
                    td { (n) }
                }
            }
        }
        details {
            summary { "Minutes with anything counted (" (busy.len()) ")" }
            table {
                tr { th { "minute (UTC)" } @for (label, _) in SERIES { th { (label) } } }
                @for m in &busy {
                    tr { td { (m.minute.format("%H:%M")) } @for n in m.counts.values() { td { (n) } } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone, Utc};

    #[test]
    fn ceilings_are_round() {
        assert_eq!(
            [0, 1, 3, 7, 11, 180, 5000].map(nice_ceiling),
            [1, 1, 5, 10, 20, 200, 5000]
        );
    }

    #[test]
    fn the_chart_has_a_line_per_series_axes_and_totals() {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
        let minutes: Vec<FleetMinute> = (0..60)
            .map(|k| FleetMinute {
                minute: start + Duration::minutes(k),
                counts: MinuteCounts {
                    stored: k,
                    unauthorized: i64::from(k == 30) * 7,
                    ..MinuteCounts::default()
                },
            })
            .collect();
        let html = last_hour(&minutes).into_string();
        assert_eq!(html.matches("<polyline").count(), 7, "{html}");
        assert!(html.contains("12:00") && html.contains("12:59"), "{html}");
        assert!(
            html.contains("1770 webhooks stored, 0 duplicates, 7 401 refused"),
            "{html}"
        );
        assert!(!html.contains("style"), "no inline style: {html}");
        // The top of the scale is 58 (the last minute drawn) rounded up: 100.
        assert!(html.contains(">100</text>"), "{html}");
    }
}
