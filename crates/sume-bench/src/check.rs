//! The data check that gives a step its result: every 2xx must be a stored event, and every
//! stored event a 2xx. A benchmark that loses data has no result.

use thiserror::Error;

/// The inbox does not hold what the server acknowledged.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CheckError {
    /// Fewer rows than 2xx answers: the server acknowledged events it did not store.
    #[error(
        "{step}: {lost} acknowledged event(s) are missing: {acked} answered 2xx, {stored} stored. \
         A 2xx without a durable row is data loss; this run has no result"
    )]
    Lost {
        /// The step, as its progress line names it.
        step: String,
        /// 2xx answers, warm-up included.
        acked: u64,
        /// Rows in `sume.events` after the step.
        stored: u64,
        /// `acked - stored`.
        lost: u64,
    },
    /// More rows than 2xx answers: requests that failed or timed out after their commit, so
    /// the step's counts cannot be trusted either.
    #[error(
        "{step}: {extra} event(s) stored without a 2xx ({acked} answered 2xx, {stored} stored): \
         requests timed out or failed after their commit; the counts do not add up"
    )]
    Unacknowledged {
        /// The step, as its progress line names it.
        step: String,
        /// 2xx answers, warm-up included.
        acked: u64,
        /// Rows in `sume.events` after the step.
        stored: u64,
        /// `stored - acked`.
        extra: u64,
    },
}

/// Compares the rows a step left in `sume.events` with the 2xx answers it received.
pub fn stored_matches_acked(step: &str, acked: u64, stored: u64) -> Result<(), CheckError> {
    if stored < acked {
        return Err(CheckError::Lost {
            step: step.to_owned(),
            acked,
            stored,
            lost: acked - stored,
        });
    }
    if stored > acked {
        return Err(CheckError::Unacknowledged {
            step: step.to_owned(),
            acked,
            stored,
            extra: stored - acked,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_counts_pass() {
        assert_eq!(stored_matches_acked("s", 0, 0), Ok(()));
        assert_eq!(stored_matches_acked("s", 81_234, 81_234), Ok(()));
    }

    #[test]
    fn a_missing_row_fails_loudly() {
        let err = stored_matches_acked("sume-inbox 256 conns", 1_000, 999).unwrap_err();
        assert_eq!(
            err,
            CheckError::Lost {
                step: "sume-inbox 256 conns".into(),
                acked: 1_000,
                stored: 999,
                lost: 1
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("1 acknowledged event(s) are missing"),
            "{text}"
        );
        assert!(text.contains("no result"), "{text}");
    }

    #[test]
    fn a_row_without_an_answer_fails_too() {
        let err = stored_matches_acked("s", 10, 12).unwrap_err();
        assert!(matches!(err, CheckError::Unacknowledged { extra: 2, .. }));
    }
}
