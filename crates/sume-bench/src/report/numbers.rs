//! How the report writes numbers: thousands separators, milliseconds with the precision that
//! matters, MiB and ratios. Shared by the table, the notes, the targets and the progress lines.

use std::time::Duration;

/// 12345.6 -> "12,346".
pub fn thousands(x: f64) -> String {
    let n = x.round() as u64;
    let digits = n.to_string();
    let first = match digits.len() % 3 {
        0 => 3,
        r => r,
    };
    let mut out = digits[..first].to_owned();
    for group in digits.as_bytes()[first..].chunks(3) {
        out.push(',');
        out.push_str(std::str::from_utf8(group).expect("ASCII digits"));
    }
    out
}

/// Milliseconds, with precision where it matters: 0.84, 12.3, 151.
pub fn ms(d: Duration) -> String {
    let x = d.as_secs_f64() * 1000.0;
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

pub(super) fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

pub(super) fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(ms(Duration::from_micros(840)), "0.84");
        assert_eq!(ms(Duration::from_micros(12_340)), "12.3");
        assert_eq!(ms(Duration::from_micros(151_000)), "151");
    }
}
