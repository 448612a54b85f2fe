//! A command the database refused for want of a privilege (SQLSTATE 42501) says which role it
//! refused: the grants it lacks are written for that role.

use super::CliError;
use crate::config::declared::DATABASE_URL;
use crate::db::{grants, reach, DbError};

/// `e`, a command's failure on the database behind `database_url`: a refusal for want of a
/// privilege (SQLSTATE 42501, or an audit log it may not write) said as [`DbError::Refused`],
/// naming the setting, the target and the role the server refused ([`grants::role_of`]), with
/// the grants written for that role (still exit 78). Any other failure as it is.
pub(super) async fn naming_role(database_url: &str, e: CliError) -> CliError {
    let CliError::Db(db) = &e else {
        return e;
    };
    if !db.is_denied() {
        return e;
    }
    let Some(role) = grants::role_of(database_url).await else {
        return e;
    };
    match db.denied_to(&role) {
        Some(problem) => DbError::Refused {
            setting: DATABASE_URL.name,
            target: reach::redacted(database_url),
            problem,
        }
        .into(),
        None => e,
    }
}
