//! The closed sets of text the tables hold (a job's state and closer, an event's outcome, an
//! inbox check's verdict, an observation's source), declared once: the admin API and the
//! console check their filters against them, and the admin API's document lists them as enums
//! (each `*Name` type below stands for its `String` field there).

use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;

/// The states a job row holds (`sume.jobs.state`).
pub const JOB_STATES: [&str; 5] = ["open", "completed", "failed", "canceled", "expired"];
/// What closed a job (`sume.jobs.closed_by`).
pub const CLOSERS: [&str; 3] = ["webhook", "poll", "give_up"];
/// What applying an event did (`sume.events.outcome`; `Outcome::as_str`).
pub const OUTCOMES: [&str; 4] = ["closed", "status", "ignored", "disagreement"];
/// An inbox check's verdict (`sume.inbox_checks.verdict`: `pending`, then `Verdict::as_str`).
pub const VERDICTS: [&str; 3] = ["pending", "foreign", "orphan"];
/// Who saw a status (`sume.disagreements.source`; `Source::as_str`).
pub const SOURCES: [&str; 2] = ["webhook", "poll"];

fn one_of(values: &[&str], what: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.iter().copied()))
        .description(Some(what))
        .into()
}

/// Declares a document-only type named `$name` in the document, a string among `$values`.
macro_rules! value_name {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $values:expr, $what:literal) => {
        $(#[$doc])*
        pub struct $ty;

        impl utoipa::PartialSchema for $ty {
            fn schema() -> RefOr<Schema> {
                one_of(&$values, $what)
            }
        }

        impl utoipa::ToSchema for $ty {
            fn name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }
        }
    };
}

value_name!(
    /// [`JOB_STATES`] in the document.
    JobStateName, "JobState", JOB_STATES,
    "A job's state: `open`, or the terminal state it closed in."
);
value_name!(
    /// [`CLOSERS`] in the document.
    CloserName, "ClosedBy", CLOSERS, "What closed a job."
);
value_name!(
    /// [`OUTCOMES`] in the document.
    OutcomeName, "EventOutcome", OUTCOMES,
    "What applying an event did: `closed` (it closed the job), `status` (an in-flight status \
     of the open job), `ignored` (nothing to do) or `disagreement` (a terminal state other \
     than the job's)."
);
value_name!(
    /// [`VERDICTS`] in the document.
    VerdictName, "CheckVerdict", VERDICTS,
    "An inbox check's verdict: `pending` (asked, not concluded), `foreign` (every key the fleet \
     holds answered 404) or `orphan` (a key reads the job, and no row holds it)."
);
value_name!(
    /// [`SOURCES`] in the document.
    SourceName, "ObservationSource", SOURCES,
    "Who saw a status: a `webhook` or a `poll`."
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::inbox_checks::Verdict;
    use crate::decisions::job_fold::{Outcome, Source};

    /// The lists hold what the code writes.
    #[test]
    fn the_lists_hold_what_the_code_writes() {
        let outcomes = [
            Outcome::Closed,
            Outcome::Status,
            Outcome::Ignored,
            Outcome::Disagreement,
        ];
        assert_eq!(outcomes.map(Outcome::as_str), OUTCOMES);
        assert_eq!([Source::Webhook, Source::Poll].map(Source::as_str), SOURCES);
        let verdicts = [Verdict::Foreign, Verdict::Orphan].map(Verdict::as_str);
        assert_eq!(["pending", verdicts[0], verdicts[1]], VERDICTS);
        for closer in [Source::Webhook.as_str(), Source::Poll.as_str(), "give_up"] {
            assert!(CLOSERS.contains(&closer), "{closer}");
        }
    }
}
