//! A statement the server refused for want of a privilege (SQLSTATE 42501): a role never
//! granted its rights, or granted them before a migration added a table (README "Least
//! privilege"). Waiting cannot end it, and the database is not down: wherever it is met (a log
//! line, an admin API answer, a command's error) it is said as what it is, with the grants that
//! end it.

use tokio_postgres::error::SqlState;

use super::{pg_message, DbError};

/// What follows the server's words of such a refusal: the grants README's "Least privilege"
/// gives the daemons' role, which the schema's owner gives, to `role` when the role refused is
/// known (quoted as SQL writes it), else to `ROLE`, said to be the role of DATABASE_URL.
pub fn grants_to_give(role: Option<&str>) -> String {
    let (who, to, which) = match role {
        Some(role) => (format!("the role {role}"), role, ""),
        None => (
            "the database role".to_owned(),
            "ROLE",
            " with ROLE the role of DATABASE_URL,",
        ),
    };
    format!(
        "{who} lacks a grant: as the schema's owner, `grant usage on schema sume to {to}; grant \
         select, insert, update, delete on all tables in schema sume to {to};`{which} and again \
         after each migration that adds a table (README \"Least privilege\")"
    )
}

/// The role `url` connects as, for the words of a refusal: `current_user` as the server names
/// it (quoted as SQL writes it), read over a connection of its own in the simple protocol
/// (which any pooler passes), else the URL's user; `None` when neither can be told.
pub async fn role_of(url: &str) -> Option<String> {
    use tokio_postgres::SimpleQueryMessage;
    let asked = match super::reach::connect(url).await {
        Ok(client) => client
            .simple_query("select quote_ident(current_user)")
            .await
            .ok()
            .and_then(|messages| {
                messages.into_iter().find_map(|m| match m {
                    SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                    _ => None,
                })
            }),
        Err(_) => None,
    };
    asked.or_else(|| {
        let target = super::target(url).ok()?;
        target.config.get_user().map(str::to_owned)
    })
}

/// Whether `source` is the server's refusal for want of a privilege.
pub fn is_denied(source: &tokio_postgres::Error) -> bool {
    source.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE)
}

/// A statement's failure in words: the server's, and for a refusal for want of a privilege,
/// the grants that end it.
pub(super) fn statement_words(source: &tokio_postgres::Error) -> String {
    if is_denied(source) {
        format!("{}: {}", pg_message(source), grants_to_give(None))
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

    /// This refusal for want of a privilege in words naming `role`, the role the server
    /// refused, with the grants that end it written for that role; `None` for any other
    /// failure.
    pub fn denied_to(&self, role: &str) -> Option<String> {
        match self {
            DbError::Query { statement, source } if is_denied(source) => Some(format!(
                "{statement}: {}: retrying cannot fix this; {}",
                pg_message(source),
                grants_to_give(Some(role))
            )),
            DbError::AuditUnwritable => Some(format!(
                "the role {role} may not write the audit log (insert on sume.audit_log): \
                 retrying cannot fix this; grant it, as README's \"Least privilege\" lists; \
                 nothing was done"
            )),
            _ => None,
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
            assert!(super::grants_to_give(None).contains(grant));
            assert!(readme.contains(grant), "{grant}");
        }
    }
}
