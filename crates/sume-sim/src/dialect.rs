//! How each kind of job spells its statuses.
//!
//! Sume's docs: "`queued`, `running`, `processing` are in flight; `completed`, `failed`,
//! `canceled`, `expired` are terminal (avatar objects say `ready` for success). Clients in the
//! wild also see `succeeded`/`success`, `cancelled`, `error`/`errored`: accept them." So the
//! simulator sends every one of them, each kind of job its own dialect. Which kind says what is
//! this project's assumption (except `ready` for avatars); video generations, ad videos and
//! the rest of the documented defaults keep the canonical spellings.
//!
//! | kind | in flight | completed | failed | canceled | expired |
//! | --- | --- | --- | --- | --- | --- |
//! | `video_generation`, `ad_video` | `queued`, `running` | `completed` | `failed` | `canceled` | `expired` |
//! | `avatar` | `queued`, `running` | `ready` | `failed` | `canceled` | `expired` |
//! | `image_generation` | `queued`, `processing` | `succeeded` | `error` | `cancelled` | `expired` |
//! | `face_swap` | `queued`, `processing` | `success` | `errored` | `cancelled` | `expired` |
//! | `reference_analysis`, `avatar_video` | `queued`, `processing` | `completed` | `failed` | `canceled` | `expired` |

use crate::job::{Kind, Outcome};

/// The status of a job of `kind` between `queued` and its end.
pub fn working(kind: Kind) -> &'static str {
    match kind {
        Kind::VideoGeneration | Kind::AdVideo | Kind::Avatar => "running",
        Kind::ImageGeneration | Kind::FaceSwap | Kind::ReferenceAnalysis | Kind::AvatarVideo => {
            "processing"
        }
    }
}

/// The terminal status of a job of `kind` that ends with `outcome`.
pub fn terminal(kind: Kind, outcome: Outcome) -> &'static str {
    match (kind, outcome) {
        (Kind::Avatar, Outcome::Completed) => "ready",
        (Kind::ImageGeneration, Outcome::Completed) => "succeeded",
        (Kind::ImageGeneration, Outcome::Failed) => "error",
        (Kind::FaceSwap, Outcome::Completed) => "success",
        (Kind::FaceSwap, Outcome::Failed) => "errored",
        (Kind::ImageGeneration | Kind::FaceSwap, Outcome::Canceled) => "cancelled",
        (_, outcome) => outcome.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_documented_spelling_is_sent_by_some_kind() {
        let outcomes = [
            Outcome::Completed,
            Outcome::Failed,
            Outcome::Canceled,
            Outcome::Expired,
        ];
        let mut seen: BTreeSet<&str> = BTreeSet::from(["queued"]);
        for kind in Kind::ALL {
            seen.insert(working(kind));
            for outcome in outcomes {
                seen.insert(terminal(kind, outcome));
            }
        }
        let documented = BTreeSet::from([
            "queued",
            "running",
            "processing",
            "completed",
            "ready",
            "succeeded",
            "success",
            "failed",
            "error",
            "errored",
            "canceled",
            "cancelled",
            "expired",
        ]);
        assert_eq!(seen, documented);
    }
}
