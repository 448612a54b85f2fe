//! A `postgres://` URL cut into its parts as libpq cuts it, so that this crate, the driver and
//! `psql` read the same password, hosts and parameters from it.
//!
//! libpq takes the credentials (`user:password`) as everything after `://` up to the first `@`
//! that comes before any `/`; the hosts and ports follow, up to a `/` or a `?`; then the
//! database, up to a `?`; then the parameters. A `?` or a `#` in the password is therefore read
//! as part of it. An `@` anywhere after the credentials is not: it is what an unencoded `@` (or
//! `/`) in the password or the user leaves behind, and libpq would read part of the password as
//! the host, or the host as the port. Such a URL is refused, without quoting any of it.

use super::DbError;

/// A URL of the `postgres://` or `postgresql://` scheme, cut as libpq cuts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlParts<'a> {
    /// `postgres://` or `postgresql://`.
    pub scheme: &'a str,
    /// `user:password` as written (percent-encoded), without its `@`; `None` when absent.
    pub credentials: Option<&'a str>,
    /// The hosts and ports as written (`a:5432,b:5433`), perhaps empty.
    pub hosts: &'a str,
    /// What follows the hosts' `/` up to the `?` (the database, percent-encoded).
    pub path: Option<&'a str>,
    /// What follows the `?`: `key=value` pairs separated by `&`.
    pub query: Option<&'a str>,
}

/// What the refusal of an ambiguous URL says; it quotes nothing of the URL.
pub const AMBIGUOUS: &str = "it holds an `@` besides the one that ends the credentials \
     (user:password@), so where the password ends and the host begins cannot be told: \
     percent-encode the special characters of the password and the user (`@` as %40, `?` as \
     %3F, `#` as %23, `/` as %2F)";

impl<'a> UrlParts<'a> {
    /// The parts of `url`; `Ok(None)` when it is not a URL (libpq's `key=value` form), an error
    /// when an `@` follows its credentials.
    pub fn parse(url: &'a str) -> Result<Option<UrlParts<'a>>, DbError> {
        let Some(scheme) = ["postgres://", "postgresql://"]
            .into_iter()
            .find(|s| url.starts_with(s))
        else {
            return Ok(None);
        };
        let rest = &url[scheme.len()..];
        let (credentials, rest) = match rest.find(['@', '/']) {
            Some(at) if rest.as_bytes()[at] == b'@' => (Some(&rest[..at]), &rest[at + 1..]),
            _ => (None, rest),
        };
        if rest.contains('@') {
            return Err(DbError::Config(AMBIGUOUS.into()));
        }
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (hosts, rest) = rest.split_at(end);
        let (path, query) = match rest.strip_prefix('/') {
            Some(after) => match after.split_once('?') {
                Some((path, query)) => (Some(path), Some(query)),
                None => (Some(after), None),
            },
            None => (None, rest.strip_prefix('?')),
        };
        Ok(Some(UrlParts {
            scheme,
            credentials,
            hosts,
            path,
            query,
        }))
    }

    /// The query's `key=value` pairs as written, empty ones left out.
    pub fn pairs(&self) -> impl Iterator<Item = &'a str> {
        self.query
            .unwrap_or("")
            .split('&')
            .filter(|pair| !pair.is_empty())
    }

    /// The URL again, with `pairs` as its query (none when empty).
    pub fn with_pairs<S: AsRef<str>>(&self, pairs: &[S]) -> String {
        let mut url = String::from(self.scheme);
        if let Some(credentials) = self.credentials {
            url.push_str(credentials);
            url.push('@');
        }
        url.push_str(self.hosts);
        if let Some(path) = self.path {
            url.push('/');
            url.push_str(path);
        }
        let query: Vec<&str> = pairs.iter().map(AsRef::as_ref).collect();
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query.join("&"));
        }
        url
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> UrlParts<'_> {
        UrlParts::parse(url).unwrap().unwrap()
    }

    #[test]
    fn the_credentials_end_at_the_first_at_sign_before_any_slash() {
        let p = parts("postgres://postgres:pa?SECRET2@127.0.0.1:25432/postgres?sslmode=require");
        assert_eq!(p.credentials, Some("postgres:pa?SECRET2"));
        assert_eq!(p.hosts, "127.0.0.1:25432");
        assert_eq!(p.path, Some("postgres"));
        assert_eq!(p.query, Some("sslmode=require"));
        let p = parts("postgres://u:pa#ss?x@h/db");
        assert_eq!((p.credentials, p.hosts), (Some("u:pa#ss?x"), "h"));
        let p = parts("postgres://u:x?port=LEAKME@127.0.0.1:99999/postgres");
        assert_eq!(p.credentials, Some("u:x?port=LEAKME"));
        assert_eq!((p.hosts, p.query), ("127.0.0.1:99999", None));
    }

    #[test]
    fn the_query_is_found_only_after_the_hosts_or_the_database() {
        let p = parts("postgresql://h?sslmode=disable&a=b");
        assert_eq!((p.credentials, p.hosts, p.path), (None, "h", None));
        assert_eq!(p.pairs().collect::<Vec<_>>(), ["sslmode=disable", "a=b"]);
        let p = parts("postgres:///db?host=/var/run/postgresql");
        assert_eq!((p.hosts, p.path), ("", Some("db")));
        assert_eq!(p.query, Some("host=/var/run/postgresql"));
        let p = parts("postgres://a:5432,b:5433/app");
        assert_eq!((p.hosts, p.query), ("a:5432,b:5433", None));
        assert_eq!(parts("postgres://h").path, None);
        assert_eq!(UrlParts::parse("host=h password=p?x@y").unwrap(), None);
    }

    #[test]
    fn an_at_sign_after_the_credentials_is_refused_without_quoting_the_url() {
        for url in [
            "postgres://postgres:p@ssS3cret@127.0.0.1:25432/nodb",
            "postgres://u:pa/ss@h/db",
            "postgres://u:p/x?y@h/db",
            "postgres://user@server:secret@h/db",
            "postgres://h/db?application_name=a@b",
        ] {
            let e = UrlParts::parse(url).unwrap_err();
            assert!(
                matches!(&e, DbError::Config(why) if why == AMBIGUOUS),
                "{url}: {e}"
            );
        }
    }

    #[test]
    fn a_url_is_written_again_with_the_pairs_given() {
        let p = parts("postgres://u:pa?ss@h:1/db?sslmode=require&a=b");
        assert_eq!(p.with_pairs(&["a=b"]), "postgres://u:pa?ss@h:1/db?a=b");
        assert_eq!(p.with_pairs::<&str>(&[]), "postgres://u:pa?ss@h:1/db");
        let p = parts("postgresql://h?a=b");
        assert_eq!(p.with_pairs(&["a=b", "c=d"]), "postgresql://h?a=b&c=d");
    }
}
