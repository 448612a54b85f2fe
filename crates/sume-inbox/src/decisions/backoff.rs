//! How far apart the asks about one job or one inbox check are: `first * 2^attempts`, capped,
//! then jittered by ±20% so that work scheduled together spreads out.

use std::time::Duration;

use rand::Rng;

/// The wait before poll number `attempts + 1`: `first * 2^attempts`, capped, jittered ±20%.
pub fn backoff(attempts: i32, first: Duration, cap: Duration) -> Duration {
    jitter(backoff_base(attempts, first, cap))
}

/// [`backoff`] before the jitter: `first * 2^attempts`, capped.
pub fn backoff_base(attempts: i32, first: Duration, cap: Duration) -> Duration {
    let exp = attempts.clamp(0, 30) as u32;
    first.saturating_mul(2u32.saturating_pow(exp)).min(cap)
}

/// ±20%, so that work scheduled together spreads out.
pub fn jitter(d: Duration) -> Duration {
    d.mul_f64(rand::thread_rng().gen_range(0.8..1.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_jitters() {
        let first = Duration::from_secs(120);
        let cap = Duration::from_secs(1800);
        for _ in 0..100 {
            let b0 = backoff(0, first, cap);
            assert!(b0 >= Duration::from_secs(96) && b0 <= Duration::from_secs(144));
            let b2 = backoff(2, first, cap);
            assert!(b2 >= Duration::from_secs(384) && b2 <= Duration::from_secs(576));
            let b9 = backoff(9, first, cap);
            assert!(b9 >= Duration::from_secs(1440) && b9 <= Duration::from_secs(2160));
            assert!(backoff(i32::MAX, first, cap) <= Duration::from_secs(2160));
        }
        assert_eq!(backoff_base(-3, first, cap), first);
        assert_eq!(backoff_base(1, first, cap), Duration::from_secs(240));
    }
}
