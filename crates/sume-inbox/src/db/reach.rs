//! Reaching the server, as an operator reads the failure: which setting, which target (user,
//! hosts, ports, database; never the password), the server's own words, and whether waiting can
//! help. A wrong password, an unknown role or database, a host name that does not exist, TLS
//! asked of a server without it, a certificate that does not verify, a password the server asks
//! for and the URL lacks, or a role that may not create the schema is permanent: the daemon
//! stops at once with exit 78 instead of retrying for half a minute.

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

use super::hosts::{each_host, host_count, host_port, HostErrors};
use super::{pg_message, DbError};

/// The target of a URL without its password: `postgres://user@host:5432,host2:5432/db`.
pub fn redacted(url: &str) -> String {
    // Without the TLS keywords this crate reads itself (`verify-full`, `sslrootcert`), which
    // tokio-postgres's parser refuses.
    let plain = super::tls::split_tls_params(url).map(|(rest, _, _)| rest);
    let Some(config) = plain
        .ok()
        .and_then(|u| u.parse::<tokio_postgres::Config>().ok())
    else {
        return "(an unreadable URL)".into();
    };
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let hosts: Vec<String> = (0..config.get_hosts().len())
        .map(|i| host_port(&config, i))
        .collect();
    let db = config.get_dbname().unwrap_or("");
    format!("postgres://{user}{}/{db}", hosts.join(","))
}

/// What the connection's own words (no SQLSTATE) say of a refusal waiting cannot fix, with
/// its hint: the host name does not exist, TLS was asked of a server without it, the server
/// asks for a password the URL lacks, its certificate does not verify (an unknown issuer, a
/// name it does not hold: at start only, where this is read), or the URL asks for what the
/// client cannot do.
fn permanent_without_code(e: &tokio_postgres::Error) -> Option<&'static str> {
    let text = format!("{} {e:?}", pg_message(e)).to_ascii_lowercase();
    if text.contains("name or service not known") || text.contains("nodename nor servname") {
        Some("check the host name")
    } else if text.contains("server does not support tls") {
        Some("the server offers no TLS: enable ssl on it, or on a trusted network lower sslmode (prefer, disable)")
    } else if text.contains("password missing") {
        Some("the server asks for a password and the URL has none: write postgres://user:PASSWORD@host/db")
    } else if text.contains("invalid peer certificate") {
        Some("the server's certificate does not verify: check sslrootcert (the CA that signed it), that the URL's host is a name the certificate holds, or with sslmode=verify-ca check the CA only")
    } else if text.contains("invalid configuration") {
        Some("check the URL")
    } else {
        None
    }
}

/// Whether a connection error is one waiting cannot fix: the server refused who we are or what
/// we asked for, or the host name does not exist.
pub fn is_permanent(e: &tokio_postgres::Error) -> bool {
    if let Some(code) = e.code() {
        return [
            SqlState::INVALID_PASSWORD,
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            SqlState::INVALID_CATALOG_NAME,
            SqlState::INSUFFICIENT_PRIVILEGE,
        ]
        .contains(code);
    }
    permanent_without_code(e).is_some()
}

/// The hint that goes with a permanent failure.
fn hint(e: &tokio_postgres::Error) -> &'static str {
    match e.code() {
        Some(c) if *c == SqlState::INVALID_PASSWORD => "check the user and password",
        Some(c) if *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            "check the user, and pg_hba.conf for this client"
        }
        Some(c) if *c == SqlState::INVALID_CATALOG_NAME => {
            "check the database name, or create the database"
        }
        Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => "grant the role CONNECT on it",
        _ => permanent_without_code(e).unwrap_or("check the host name"),
    }
}

/// The server's or the network's words of `e`, and, when waiting cannot help, that it cannot
/// and what to check.
fn problem_of(e: &tokio_postgres::Error) -> String {
    match is_permanent(e) {
        true => format!("{}: retrying cannot fix this; {}", pg_message(e), hint(e)),
        false => pg_message(e),
    }
}

/// A failure to reach the server behind `setting`'s URL, as [`DbError::Unreachable`].
pub fn unreachable(setting: &'static str, url: &str, e: &tokio_postgres::Error) -> DbError {
    DbError::Unreachable {
        setting,
        target: redacted(url),
        problem: problem_of(e),
        permanent: is_permanent(e),
    }
}

/// A failure to reach any host of `setting`'s URL (each host tried, and its error), as
/// [`DbError::Unreachable`]: every host's words, in the order tried, so that a host that
/// refused who we are (a wrong password) is not hidden behind a later one that was only not
/// there; and permanent only when every host's failure is: while one host is only not there
/// (a primary restarting, whose standby refuses this client), waiting may yet reach it, and a
/// permanent refusal ends the start for good (systemd does not restart on 78).
pub fn unreachable_hosts(setting: &'static str, url: &str, errors: &HostErrors) -> DbError {
    match errors.as_slice() {
        [(_, e)] => unreachable(setting, url, e),
        errors => DbError::Unreachable {
            setting,
            target: redacted(url),
            problem: format!(
                "every host failed: {}",
                errors
                    .iter()
                    .map(|(host, e)| format!("{host}: {}", problem_of(e)))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            permanent: errors.iter().all(|(_, e)| is_permanent(e)),
        },
    }
}

/// The same for an error met through the pool or a connection of ours; `None` when it is not
/// about reaching the server.
pub fn unreachable_from(setting: &'static str, url: &str, e: &DbError) -> Option<DbError> {
    match e {
        DbError::Connect(pg) | DbError::Pool(PoolError::Backend(pg)) => {
            Some(unreachable(setting, url, pg))
        }
        DbError::Pool(PoolError::Timeout(_)) => Some(DbError::Unreachable {
            setting,
            target: redacted(url),
            problem: "no answer in time".into(),
            permanent: false,
        }),
        DbError::Unreachable { .. } => None,
        _ => None,
    }
}

/// `e`, met through the pool on `setting`'s URL, as [`unreachable_from`] says it; where that
/// URL names several hosts, every host's failure instead, learnt by trying each once more as
/// [`connect_named`] does (the pool's driver says the last host's alone, hiding an earlier
/// one's refusal). Any other failure is answered as it is.
pub async fn every_host(setting: &'static str, url: &str, e: DbError) -> DbError {
    let Some(first) = unreachable_from(setting, url, &e) else {
        return e;
    };
    let several = super::target(url).is_ok_and(|t| host_count(&t.config) > 1);
    if !several {
        return first;
    }
    match connect_named(setting, url).await {
        Err(every @ DbError::Unreachable { .. }) => every,
        _ => first,
    }
}

/// A failure to migrate because the role behind `setting`'s URL lacks a right (SQLSTATE 42501,
/// e.g. `permission denied for database`), as [`DbError::Refused`] naming the setting, the
/// target and the way out, which the catalog (read over `client`) tells: where the schema
/// exists and the role may not read it, the grants README's "Least privilege" lists, for this
/// role, given by the schema's owner; otherwise a role that may create or change the schema.
/// Any other failure is answered as it is.
pub async fn lacking_rights(
    setting: &'static str,
    url: &str,
    client: &tokio_postgres::Client,
    e: DbError,
) -> DbError {
    let source = match &e {
        DbError::Query { source, .. }
        | DbError::Transaction { source, .. }
        | DbError::Migration(_, source) => source,
        _ => return e,
    };
    if source.code() != Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
        return e;
    }
    let (what, todo) = match super::migrate::schema_access(client).await {
        // The schema is there: what stopped the migrations is that this role may not read it
        // (the server's words are those of the attempt to create it, beside the point).
        Ok(Some(access)) if !access.reads_versions => {
            let super::migrate::SchemaAccess { role, owner, .. } = access;
            return DbError::Refused {
                setting,
                target: redacted(url),
                problem: format!(
                    "the role may not read the schema sume, which {owner} made, so whether it \
                     is current cannot be told: retrying cannot fix this; grant the role its \
                     rights, as {owner}: `grant usage on schema sume to {role}; grant select, \
                     insert, update, delete on all tables in schema sume to {role};` (if the \
                     schema is older than this binary, run `sume-inbox migrate` as {owner} \
                     first; README \"Least privilege\")"
                ),
            };
        }
        Ok(Some(access)) => (
            "the role may not change the schema".to_owned(),
            format!(
                "run `sume-inbox migrate` with a role that may (the schema's owner, {})",
                access.owner
            ),
        ),
        _ => (
            "the role may not set up the schema".to_owned(),
            "run `sume-inbox migrate` with a role that may create the schema".to_owned(),
        ),
    };
    refused_for_privilege(setting, url, source, &what, &todo).unwrap_or(e)
}

/// [`DbError::Refused`] when `source` is SQLSTATE 42501: what the role may not do, the server's
/// words, and what to do about it.
fn refused_for_privilege(
    setting: &'static str,
    url: &str,
    source: &tokio_postgres::Error,
    what: &str,
    todo: &str,
) -> Option<DbError> {
    (source.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE)).then(|| DbError::Refused {
        setting,
        target: redacted(url),
        problem: format!(
            "{what}: {}: retrying cannot fix this; {todo} (README \"Least privilege\")",
            pg_message(source)
        ),
    })
}

/// A failure to read the schema because the role behind `setting`'s URL may not (SQLSTATE
/// 42501, `permission denied for schema sume`: a runtime role not granted its rights), as
/// [`DbError::Refused`]; `None` for any other failure.
pub fn lacking_usage(setting: &'static str, url: &str, e: &DbError) -> Option<DbError> {
    let DbError::Query { source, .. } = e else {
        return None;
    };
    refused_for_privilege(
        setting,
        url,
        source,
        "the role may not read the schema",
        "grant it usage on schema sume and its tables' rights",
    )
}

/// Opens one connection outside the pool (migrations, the CLI), driving it on a task.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client, DbError> {
    connect_named("DATABASE_URL", url).await
}

/// [`connect`] to the URL of `setting`: a failure names the setting and the target tried, and of
/// a URL naming several hosts, every host's failure (permanent when every host's is).
pub async fn connect_named(
    setting: &'static str,
    url: &str,
) -> Result<tokio_postgres::Client, DbError> {
    let target = super::target(url)?;
    each_host(&target)
        .await
        .map_err(|errors| unreachable_hosts(setting, url, &errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_named_without_its_password() {
        assert_eq!(
            redacted("postgres://sume:s3cret@db.example:6432/app?sslmode=require"),
            "postgres://sume@db.example:6432/app"
        );
        assert_eq!(
            redacted("postgres://u:pw@a:5432,b:5433/app?target_session_attrs=read-write"),
            "postgres://u@a:5432,b:5433/app"
        );
        assert!(!redacted("postgres://u:pw@h/db").contains("pw"));
        assert_eq!(
            redacted("postgres://u:pw@db:5432/app?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem"),
            "postgres://u@db:5432/app"
        );
        assert_eq!(
            redacted("postgres://postgres:pa?SECRET2@127.0.0.1:25432/postgres?sslmode=require"),
            "postgres://postgres@127.0.0.1:25432/postgres"
        );
        assert_eq!(
            redacted("postgres://postgres:p@ssS3cret@127.0.0.1:25432/nodb"),
            "(an unreadable URL)"
        );
    }
}
