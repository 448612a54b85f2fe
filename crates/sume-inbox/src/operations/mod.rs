//! What an operator runs on demand, beside the actors: [`replay`] (a stored delivery through the
//! normal path again; the CLI, the admin API and the console call it) and [`reconciliation`]
//! (`sume-inbox reconcile`: Sume's job list against the database, after a restore or failover);
//! and how the audit log names who ran it ([`actor_name`]).

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

pub mod list_walk;
pub mod reconciliation;
pub mod replay;

/// A name for the audit log's actor (a caller's `X-Actor`; the CLI's user and host) as it may
/// be shown, trimmed: without control characters (Unicode's `Cc`) nor format characters (`Cf`:
/// the bidirectional embeddings, overrides and isolates U+202A to U+202E and U+2066 to U+2069,
/// zero-width characters, a soft hyphen, ...), which would move, reorder or hide what the
/// console and the CLI show beside it.
pub fn actor_name(s: &str) -> String {
    let shown: String = s
        .chars()
        .filter(|c| !c.is_control() && c.general_category() != GeneralCategory::Format)
        .collect();
    shown.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actors_name_is_shown_without_control_or_format_characters() {
        assert_eq!(actor_name(" ops-bot é漢 "), "ops-bot é漢");
        assert_eq!(actor_name("a\tb\u{7}"), "ab");
        let reordering = "adm\u{202E}nimda\u{202C} \u{2066}x\u{2069}\u{200B}\u{FEFF}\u{AD}";
        assert_eq!(actor_name(reordering), "admnimda x");
        assert_eq!(actor_name("\u{2067}\u{E0041}"), "");
    }
}
