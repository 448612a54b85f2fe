//! The soak's chart (docs/soak.svg): one panel per quantity, minutes on the x axis, a line per
//! table where there are several. Drawn with plotters' SVG backend, which writes text as
//! `<text>` elements: no font file and no system library is needed to draw or to read it.

use plotters::prelude::*;

use super::sample::{Reading, Sample};

/// One panel: a title and its lines (a label and a reading of a sample each).
type Panel = (&'static str, Vec<(String, Reading)>);

fn tables(read: fn(&super::sample::TableSample) -> Option<f64>) -> Vec<(String, Reading)> {
    ["events", "jobs", "job_closes"]
        .into_iter()
        .map(|t| {
            let f: Reading = Box::new(move |s| s.table(t).and_then(read));
            (format!("sume.{t}"), f)
        })
        .collect()
}

fn panels() -> Vec<Panel> {
    vec![
        (
            "daemon RSS, MiB",
            vec![(
                "RSS".to_owned(),
                Box::new(|s: &Sample| Some(s.rss_kib as f64 / 1024.0)) as Reading,
            )],
        ),
        (
            "p99 of the last window, ms",
            vec![(
                "p99".to_owned(),
                Box::new(|s: &Sample| (s.deliveries > 0).then_some(s.p99.as_secs_f64() * 1e3))
                    as Reading,
            )],
        ),
        ("live rows", tables(|t| Some(t.live as f64))),
        (
            "bytes per live row (table + indexes + TOAST)",
            tables(|t| t.bytes_per_row()),
        ),
        ("dead tuples (n_dead_tup)", tables(|t| Some(t.dead as f64))),
        (
            "schema size, MiB",
            vec![(
                "all tables of sume".to_owned(),
                Box::new(|s: &Sample| Some(s.schema_bytes() as f64 / 1048576.0)) as Reading,
            )],
        ),
    ]
}

const COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
];

/// The whole chart as SVG text; `settle` (minutes) is marked on every panel.
pub fn svg(samples: &[Sample], title: &str, settle_min: f64) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (960, 1500)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 20))?;
        let x_max = samples
            .last()
            .map_or(1.0, |s| s.at.as_secs_f64() / 60.0)
            .max(0.5);
        for (area, (caption, lines)) in root.split_evenly((6, 1)).iter().zip(panels()) {
            let points: Vec<Vec<(f64, f64)>> = lines
                .iter()
                .map(|(_, read)| {
                    samples
                        .iter()
                        .filter_map(|s| read(s).map(|v| (s.at.as_secs_f64() / 60.0, v)))
                        .collect()
                })
                .collect();
            let y_max = points
                .iter()
                .flatten()
                .map(|p| p.1)
                .fold(0.0f64, f64::max)
                .max(1e-9)
                * 1.15;
            let mut chart = ChartBuilder::on(area)
                .caption(caption, ("sans-serif", 15))
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
            chart
                .configure_mesh()
                .x_desc("minutes")
                .y_label_formatter(&|v| {
                    if v.abs() >= 1000.0 {
                        crate::report::thousands(*v)
                    } else {
                        format!("{v:.1}")
                    }
                })
                .light_line_style(WHITE.mix(0.0))
                .draw()?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(settle_min, 0.0), (settle_min, y_max)],
                BLACK.mix(0.3),
            )))?;
            for (i, ((label, _), pts)) in lines.iter().zip(points).enumerate() {
                let color = COLORS[i % COLORS.len()];
                chart
                    .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
                    .label(label.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK.mix(0.3))
                .position(SeriesLabelPosition::LowerRight)
                .draw()?;
        }
        root.present()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::sample::TableSample;
    use std::time::Duration;

    #[test]
    fn draws_every_panel_with_its_text() {
        let samples: Vec<Sample> = (1..=6)
            .map(|i| Sample {
                at: Duration::from_secs(30 * i),
                rss_kib: 40 * 1024,
                p99: Duration::from_millis(4),
                deliveries: 60_000,
                tables: vec![TableSample {
                    name: "events".into(),
                    live: 200_000,
                    dead: 5_000 * i,
                    bytes: 300_000_000,
                }],
            })
            .collect();
        let svg = svg(&samples, "soak test", 1.0).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        for text in [
            "daemon RSS, MiB",
            "dead tuples (n_dead_tup)",
            "minutes",
            "sume.events",
            "soak test",
        ] {
            assert!(svg.contains(text), "{text} is not in the chart");
        }
        assert!(svg.contains("<text"), "text is drawn as <text> elements");
        assert!(svg.contains("<polyline"), "the lines are drawn");
    }
}
