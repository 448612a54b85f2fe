//! A statement the server refused for want of a privilege (SQLSTATE 42501): a role never
//! granted its rights, or granted them before a migration added a table (README "Least
//! privilege"). Waiting cannot end it, and the database is not down: wherever it is met (a log
//! line, an admin API answer, a command's error) it is said as what it is, with the grants that
//! end it.

use tokio_postgres::error::SqlState;

use super::{pg_message, DbError};

/// What follows the server's words of such a refusal: the grants README's "Least privilege"
/// gives the daemons' role, which the schema's owner gives.
pub const GRANTS_TO_GIVE: &str = "the database role lacks a grant: as the schema's owner, \
     `grant usage on schema sume to ROLE; grant select, insert, update, delete on all tables in \
     schema sume to ROLE;` with ROLE the role of DATABASE_URL, and again after each migration \
     that adds a table (README \"Least privilege\")";

/// Whether `source` is the server's refusal for want of a privilege.
pub fn is_denied(source: &tokio_postgres::Error) -> bool {
    source.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE)
}

/// A statement's failure in words: the server's, and for a refusal for want of a privilege,
/// the grants that end it.
pub(super) fn statement_words(source: &tokio_postgres::Error) -> String {
    if is_denied(source) {
        format!("{}: {GRANTS_TO_GIVE}", pg_message(source))
    } else {
        pg_message(source)
    }
}

impl DbError {
    /// The role may not do what was asked (a statement refused for want of a privilege, or an
    /// operator's write that could not be audited): the error's words say what to grant.
    pub fn is_denied(&self) -> bool {
        match self {
            DbError::Query { source, .. } => is_denied(source),
            DbError::AuditUnwritable => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_grants_named_are_readmes() {
        let readme = include_str!("../../../../README.md");
        for grant in [
            "grant usage on schema sume to ",
            "grant select, insert, update, delete on all tables in schema sume to ",
        ] {
            assert!(super::GRANTS_TO_GIVE.contains(grant));
            assert!(readme.contains(grant), "{grant}");
        }
    }
}
