//! `JOB_RETENTION`: closed job rows may be removed after a while. Off by default: the rows are
//! the application's record of its jobs (state, result, who closed them), and only it knows
//! how long it needs them.

use std::time::Duration;

use super::{ConfigError, SweepConfig};

/// Reads JOB_RETENTION: unset, empty or `off` (the default) keeps every job; else a duration.
pub fn parse_job_retention(raw: Option<&str>) -> Result<Option<Duration>, ConfigError> {
    match raw.map(str::trim).filter(|r| !r.is_empty()) {
        None | Some("off") | Some("never") => Ok(None),
        Some(raw) => super::parse_duration("JOB_RETENTION", raw).map(Some),
    }
}

/// A closed job is kept at least as long as the events applied to it (RETENTION) and as long
/// as a give-up may still be superseded (POLL_GIVE_UP): a job row removed before its last
/// event arrives would leave that event waiting with no row, and a later status unapplied.
pub fn check_job_retention(sweep: &SweepConfig) -> Result<(), ConfigError> {
    let Some(keep) = sweep.job_retention else {
        return Ok(());
    };
    if keep < sweep.retention {
        return Err(ConfigError::new(
            "JOB_RETENTION",
            "must be at least RETENTION (or `off`): a closed job's row outlives the events applied to it",
        ));
    }
    if keep < sweep.poll_give_up {
        return Err(ConfigError::new(
            "JOB_RETENTION",
            "must be at least POLL_GIVE_UP (or `off`): a give-up may still be superseded by Sume's own status",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_never_shorter_than_the_events() {
        assert_eq!(parse_job_retention(None), Ok(None));
        assert_eq!(parse_job_retention(Some("off")), Ok(None));
        assert_eq!(
            parse_job_retention(Some("90d")),
            Ok(Some(Duration::from_secs(90 * 86_400)))
        );
        assert_eq!(
            parse_job_retention(Some("soon")).unwrap_err().name,
            "JOB_RETENTION"
        );
        let mut sweep = SweepConfig::default();
        assert!(check_job_retention(&sweep).is_ok());
        sweep.job_retention = Some(sweep.retention / 2);
        assert_eq!(
            check_job_retention(&sweep).unwrap_err().name,
            "JOB_RETENTION"
        );
        sweep.job_retention = Some(sweep.retention);
        assert!(check_job_retention(&sweep).is_ok());
        sweep.poll_give_up = sweep.retention * 2;
        assert!(check_job_retention(&sweep).is_err());
    }
}
