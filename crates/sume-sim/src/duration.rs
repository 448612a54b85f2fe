//! Durations as the simulator's flags and JSON spell them.
//!
//! Every duration knob is written the humantime way (`250ms`, `30s`, `2m`); a job-duration knob
//! is a range `MIN..MAX` (or one value, for a fixed duration) from which each job draws
//! uniformly. The `serde_human` module lets `PATCH /sim/faults` read and write durations the
//! same way (a JSON number counts as milliseconds).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::Rng;
use thiserror::Error;

/// Why a duration or range flag could not be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Not a humantime duration (nor `0`); holds the text as given, trimmed.
    #[error("{0:?} is not a duration (write it like 250ms, 30s or 2m)")]
    Unreadable(String),
    /// `MIN..MAX` with `MIN` above `MAX`; holds the range as given.
    #[error("range {0:?} has its minimum above its maximum")]
    Inverted(String),
    /// A job's duration past 30 days: its times would not be dates.
    #[error("range {0:?} goes past 30 days, the longest job the simulator runs")]
    TooLong(String),
}

/// The longest job duration a range may give (a job's times are dates).
pub const MAX_JOB_DURATION: Duration = Duration::from_secs(30 * 86_400);

/// Parses one humantime duration, `0` included.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s).map_err(|_| DurationError::Unreadable(s.to_owned()))
}

/// A uniform distribution of durations, `MIN..MAX` inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationRange {
    /// The shortest draw.
    pub min: Duration,
    /// The longest draw, included; equal to `min` for a fixed duration.
    pub max: Duration,
}

impl DurationRange {
    /// The range `min..=max`. Unlike parsing, this does not refuse `min > max`; such a range
    /// always draws `min`.
    pub const fn new(min: Duration, max: Duration) -> DurationRange {
        DurationRange { min, max }
    }

    /// A range of milliseconds, for building test configs tersely.
    pub const fn millis(min: u64, max: u64) -> DurationRange {
        DurationRange::new(Duration::from_millis(min), Duration::from_millis(max))
    }

    /// One draw. A range whose ends are equal always answers that value.
    pub fn sample(&self, rng: &mut impl Rng) -> Duration {
        if self.max <= self.min {
            return self.min;
        }
        let span = (self.max - self.min).as_micros() as u64;
        self.min + Duration::from_micros(rng.gen_range(0..=span))
    }
}

impl FromStr for DurationRange {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (min, max) = match s.split_once("..") {
            Some((a, b)) => (parse_duration(a)?, parse_duration(b)?),
            None => {
                let d = parse_duration(s)?;
                (d, d)
            }
        };
        if min > max {
            return Err(DurationError::Inverted(s.to_owned()));
        }
        if max > MAX_JOB_DURATION {
            return Err(DurationError::TooLong(s.to_owned()));
        }
        Ok(DurationRange { min, max })
    }
}

impl fmt::Display for DurationRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (
            humantime::format_duration(self.min),
            humantime::format_duration(self.max),
        );
        if self.min == self.max {
            write!(f, "{a}")
        } else {
            write!(f, "{a}..{b}")
        }
    }
}

/// Serde for a `Duration` as a humantime string (`"250ms"`); reads a number as milliseconds.
pub mod serde_human {
    use std::time::Duration;

    use serde::{de, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Millis(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Millis(ms) => Ok(Duration::from_millis(ms)),
            Raw::Text(t) => super::parse_duration(&t).map_err(de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ranges_and_single_values() {
        let r: DurationRange = "20ms..200ms".parse().unwrap();
        assert_eq!(r, DurationRange::millis(20, 200));
        let fixed: DurationRange = "1s".parse().unwrap();
        assert_eq!(fixed, DurationRange::millis(1000, 1000));
        assert_eq!(
            "0..5ms".parse::<DurationRange>().unwrap().min,
            Duration::ZERO
        );
        assert!(matches!(
            "2s..1s".parse::<DurationRange>(),
            Err(DurationError::Inverted(_))
        ));
        assert!(matches!(
            "soon".parse::<DurationRange>(),
            Err(DurationError::Unreadable(_))
        ));
        assert_eq!(r.to_string(), "20ms..200ms");
    }

    #[test]
    fn samples_stay_in_range() {
        let r = DurationRange::millis(20, 30);
        let mut rng = rand::thread_rng();
        for _ in 0..1000 {
            let d = r.sample(&mut rng);
            assert!(d >= r.min && d <= r.max, "{d:?}");
        }
        assert_eq!(
            DurationRange::millis(7, 7).sample(&mut rng),
            Duration::from_millis(7)
        );
    }
}
