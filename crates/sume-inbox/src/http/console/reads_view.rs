//! The overview's Sume reads: per API key, the reads the fleet took this UTC day, what is left
//! of SUME_READ_DAILY and the day's pace (what the share of the day gone by allows, and where
//! the day ends if it goes on as it went), read from `sume.rate_buckets`; and the way this
//! instance's reads went since its start (one job, or a page of a key's list).

use maud::{html, Markup};

use crate::db::KeyReadsToday;
use crate::metrics::{Metrics, ReadWay};

fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// One key's row: used, left, pace, projection, and how it stands.
fn row(r: &KeyReadsToday) -> Markup {
    let over = r.limit.is_some_and(|l| r.projected > l);
    html! {
        tr {
            td { code { (r.key_name) } }
            td { (thousands(r.used)) }
            td { @match (r.left, r.limit) {
                (Some(left), Some(limit)) => { (thousands(left)) " of " (thousands(limit)) },
                _ => { span.muted { "not recorded yet" } },
            } }
            td { @match r.pace {
                Some(p) => { (thousands(p)) " (" (format!("{:.0}%", r.day_gone * 100.0)) " of the day)" },
                None => { "–" },
            } }
            td { (thousands(r.projected)) }
            td {
                @if r.limit.is_some_and(|l| r.used >= l) { span.bad { "spent: reads wait for midnight UTC" } }
                @else if over { span.bad { "ahead of pace: spent before midnight UTC" } }
                @else if r.ahead_of_pace() { span.warn { "ahead of pace" } }
                @else { span.ok { "within pace" } }
            }
        }
    }
}

/// The section: the keys' table (or why there is none) and this instance's reads by way.
pub fn reads_today(keys: Option<&[KeyReadsToday]>, metrics: &Metrics) -> Markup {
    let (job, list) = (
        metrics.sume_reads_of(ReadWay::job),
        metrics.sume_reads_of(ReadWay::list),
    );
    html! {
        h2 #reads { "Sume reads today (UTC)" }
        @match keys {
            None => { p.bad { "Database down: the reads cannot be read." } }
            Some([]) => { p { "No read of Sume taken yet by a key a running instance holds (no SUME_API_KEYS, no sweep pass yet, or no instance heard from yet)." } }
            Some(keys) => {
                p.muted { "Reads the whole fleet took with each key since midnight UTC, against \
                    SUME_READ_DAILY. The pace is what the share of the day gone by allows; the \
                    projection, where the day ends if it goes on as it went." }
                table {
                    tr { th { "key" } th { "used" } th { "left" } th { "pace" }
                         th { "projected by midnight" } th { "standing" } }
                    @for r in keys { (row(r)) }
                }
            }
        }
        p.muted { "This instance since its start: " (thousands(job as i64)) " reads of one job, "
            (thousands(list as i64)) " pages of a key's list (each up to a hundred jobs)." }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_shows_its_day_and_its_standing() {
        let keys = [
            KeyReadsToday::new("<main>".into(), 3_000, Some(9_000), 0.25),
            KeyReadsToday::new("other".into(), 100, Some(9_000), 0.5),
        ];
        let html = reads_today(Some(&keys), &Metrics::new()).into_string();
        assert!(
            html.contains("&lt;main&gt;") && !html.contains("<main>"),
            "{html}"
        );
        assert!(html.contains("6,000 of 9,000"), "{html}");
        assert!(html.contains("2,250 (25% of the day)"), "{html}");
        assert!(
            html.contains("12,000") && html.contains("ahead of pace: spent"),
            "{html}"
        );
        assert!(html.contains("within pace"), "{html}");
        assert_eq!(thousands(-1_234_567), "-1,234,567");
    }
}
