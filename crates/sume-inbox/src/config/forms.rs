//! Reading one setting's text: durations, sizes, addresses, rates, counts, URLs and switches
//! (secrets, API keys and other lists are read in `lists.rs`). Each reader takes the setting's name, so an error names what the user set,
//! quotes the value as written (never a secret's) and says the form it must take.

use std::net::SocketAddr;
use std::time::Duration;

use sume_wire::Secret;

use super::setting::{human, longest_text, DURATION_FORM, MAX_DURATION};
use super::{ConfigError, Rate};

/// Reads `250ms`, `30s`, `5m`, `1h`, `14d` (and combinations such as `1m30s`; humantime's
/// grammar, so `2 minutes`, `2min` and `1 day` too; `M` is a month and `y` a year).
/// A duration written with a minus sign that reads once it is taken away is said to be
/// negative, rather than humantime's "expected number at 0".
pub fn parse_duration(name: &'static str, raw: &str) -> Result<Duration, ConfigError> {
    if is_negative_duration(raw) {
        return Err(ConfigError::new(
            name,
            format!("{raw:?} is negative: write {DURATION_FORM}"),
        ));
    }
    humantime::parse_duration(raw.trim()).map_err(|e| {
        ConfigError::new(
            name,
            format!("{raw:?} is not a duration ({e}): write {DURATION_FORM}"),
        )
    })
}

/// Whether `raw` is a duration written with a minus sign: one that reads once the sign is
/// taken away.
pub fn is_negative_duration(raw: &str) -> bool {
    raw.trim()
        .strip_prefix('-')
        .is_some_and(|rest| humantime::parse_duration(rest.trim()).is_ok())
}

/// [`parse_duration`] for a command's option, refused past [`MAX_DURATION`] (ten years): no
/// age or span an operator asks about is longer, and a longer one overflows a date.
pub fn parse_bounded_duration(name: &'static str, raw: &str) -> Result<Duration, ConfigError> {
    let d = parse_duration(name, raw)?;
    if d > MAX_DURATION {
        return Err(ConfigError::new(
            name,
            format!(
                "{} is longer than {}, the longest it takes",
                read_as(raw, d),
                longest_text(MAX_DURATION)
            ),
        ));
    }
    Ok(d)
}

/// How a duration's text was read, for a message: `"2M" (read as 60days 21h ...; M is months,
/// minutes are m)`.
pub fn read_as(raw: &str, d: Duration) -> String {
    format!(
        "{:?} (read as {}{})",
        raw.trim(),
        human(d),
        months_hint(raw)
    )
}

/// `; M is months, minutes are m` where a duration's text has an `M` that is not part of a word.
pub fn months_hint(raw: &str) -> &'static str {
    let lone_m = raw
        .char_indices()
        .any(|(i, c)| c == 'M' && !raw[i + 1..].starts_with(|n: char| n.is_ascii_alphabetic()));
    if lone_m {
        "; M is months, minutes are m"
    } else {
        ""
    }
}

/// Reads a size in bytes: `1048576`, `512KiB`, `1MiB`, `1MB`, `1GiB`.
pub fn parse_bytes(name: &'static str, raw: &str) -> Result<usize, ConfigError> {
    let s = raw.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    const SIZE_FORM: &str = "a number of bytes, or one with a unit: 1048576, 512KiB, 1MiB, 1MB";
    let n: usize = digits.parse().map_err(|_| {
        let why = if digits.is_empty() {
            "is not a size"
        } else {
            "is out of range"
        };
        ConfigError::new(name, format!("{raw:?} {why}: write {SIZE_FORM}"))
    })?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "kib" | "k" => 1 << 10,
        "mb" => 1_000_000,
        "mib" | "m" => 1 << 20,
        "gb" => 1_000_000_000,
        "gib" | "g" => 1 << 30,
        _ => {
            return Err(ConfigError::new(
                name,
                format!("{raw:?}: unknown unit {unit:?} (units: B, KB, KiB, MB, MiB, GB, GiB)"),
            ))
        }
    };
    n.checked_mul(mult).filter(|n| *n > 0).ok_or_else(|| {
        ConfigError::new(name, format!("{raw:?} is out of range: write {SIZE_FORM}"))
    })
}

/// How a size's text was read, for a message: `"4GiB"`, or `"4096MiB" (4GiB)`.
pub fn size_read_as(raw: &str, n: usize) -> String {
    let read = super::setting::size_text(n);
    match raw.trim() == read {
        true => format!("{:?}", raw.trim()),
        false => format!("{:?} ({read})", raw.trim()),
    }
}

/// Reads a socket address, `IP:PORT` (`0.0.0.0:8080`, `[::1]:9090`).
pub fn parse_addr(name: &'static str, raw: &str) -> Result<SocketAddr, ConfigError> {
    raw.trim()
        .parse()
        .map_err(|_| {
            ConfigError::new(
                name,
                format!("{raw:?} is not an address: write IP:PORT, such as 0.0.0.0:8080 or [::1]:9090 (a host name is not resolved)"),
            )
        })
}

/// `100` (a minute), or `100/1m`, `20/10s`; the window is a duration of at most
/// [`MAX_DURATION`], and a message quoting it says how it was read (`M` is a month).
pub fn parse_rate(name: &'static str, raw: &str) -> Result<Rate, ConfigError> {
    const FORM: &str = "write a count per window: 100 (a minute), 100/1m or 20/10s";
    let bad = |why: String| ConfigError::new(name, format!("{raw:?} is not a rate{why}: {FORM}"));
    let (count, per) = match raw.trim().split_once('/') {
        Some((c, w)) => {
            let per = humantime::parse_duration(w.trim()).map_err(|_| {
                bad(format!(
                    " ({:?} is not a window such as 1m or 10s{})",
                    w.trim(),
                    months_hint(w)
                ))
            })?;
            if per > MAX_DURATION {
                return Err(bad(format!(
                    " (its window {} is longer than {}, the longest a duration takes)",
                    read_as(w, per),
                    longest_text(MAX_DURATION)
                )));
            }
            (c, per)
        }
        None => (raw.trim(), Duration::from_secs(60)),
    };
    let count: u32 = count.trim().parse().map_err(|_| {
        // A whole number past u32 is a count too large, not something else than a rate.
        match count.trim().parse::<u128>() {
            Ok(_) => ConfigError::new(
                name,
                format!(
                    "{raw:?} is too large: its count is more than {}: {FORM}",
                    u32::MAX
                ),
            ),
            Err(_) => bad(String::new()),
        }
    })?;
    if count == 0 || per.is_zero() {
        return Err(bad(" (both numbers must be more than 0)".into()));
    }
    Ok(Rate { count, per })
}

/// How a rate's window written with `M` (`100/1M`: a month) was read, for a warning at start:
/// `None` where the window has no such `M`.
pub fn month_window(raw: &str) -> Option<String> {
    let (_, w) = raw.trim().split_once('/')?;
    let per = humantime::parse_duration(w.trim()).ok()?;
    (!months_hint(w).is_empty()).then(|| format!("its window is {}", read_as(w, per)))
}

/// Reads a whole number of at least `min`.
pub fn parse_count(name: &'static str, raw: &str, min: usize) -> Result<usize, ConfigError> {
    parse_count_in(name, raw, min, usize::MAX)
}

/// Reads a whole number from `min` to `max`.
pub fn parse_count_in(
    name: &'static str,
    raw: &str,
    min: usize,
    max: usize,
) -> Result<usize, ConfigError> {
    let form = if max == usize::MAX {
        format!("a whole number of at least {min}")
    } else {
        format!("a whole number from {min} to {max}")
    };
    let digits = raw.trim();
    let n: usize = digits.parse().map_err(|_| {
        // Digits only, but more than a machine word holds: too large, not malformed.
        let overflow = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        let text = if overflow {
            format!("{raw:?} is too large: write {form}")
        } else {
            format!("{raw:?} is not {form}")
        };
        ConfigError::new(name, text)
    })?;
    if n < min || n > max {
        return Err(ConfigError::new(
            name,
            format!("{raw:?} is out of range: write {form}"),
        ));
    }
    Ok(n)
}

/// A base URL: http(s), no query, no trailing slash kept; `example` shows one in a refusal.
pub fn parse_http_url(name: &'static str, example: &str, raw: &str) -> Result<String, ConfigError> {
    check_http_url(name, example, raw, raw.trim().trim_end_matches('/'))
}

/// A URL used as written (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: its path is the whole path, a
/// trailing slash included), checked as [`parse_http_url`] checks a base URL.
pub fn parse_http_url_as_written(
    name: &'static str,
    example: &str,
    raw: &str,
) -> Result<String, ConfigError> {
    check_http_url(name, example, raw, raw.trim())
}

/// `url` (`raw`, trimmed) checked: http(s), a host, no query, fragment or credentials. A
/// refusal quotes `raw` with its password, query and fragment replaced ([`without_secrets`]).
fn check_http_url(
    name: &'static str,
    example: &str,
    raw: &str,
    url: &str,
) -> Result<String, ConfigError> {
    let bad = |why: &str| {
        ConfigError::new(
            name,
            format!(
                "{:?} is not an http(s) URL such as {example}: {why}",
                without_secrets(raw)
            ),
        )
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("no query or fragment allowed"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad(&format!(
            "no credentials in the URL ({})",
            credentials_go_in(name)
        )));
    }
    Ok(url.to_owned())
}

/// Where the credentials a URL setting must not hold go instead.
fn credentials_go_in(name: &str) -> &'static str {
    match name {
        "SUME_API_URL" => "Sume's keys go in SUME_API_KEYS",
        "SUME_INBOX_ADMIN_URL" => "the admin API's token goes in SUME_INBOX_ADMIN_TOKEN",
        n if n.starts_with("OTEL_") => {
            "a collector's credentials go in OTEL_EXPORTER_OTLP_HEADERS, such as \
             Authorization=Basic%20dXNlcjpwYXNz"
        }
        _ => "give them in the setting made for them",
    }
}

/// `raw` with what may be a secret hidden, for a message: the credentials (`https://u:***@host`;
/// a user alone, often a token, whole: `https://***@host`) and the query or fragment
/// (`https://host/v1?***`, `#***`). All between the scheme and the last `@` counts as
/// credentials; when that holds a `?` or `#`, the `@` may be the query's: all after is hidden.
fn without_secrets(raw: &str) -> String {
    let start = raw.find("://").map_or(0, |i| i + 3);
    let (mut shown, mut rest) = (raw[..start].to_owned(), &raw[start..]);
    if let Some(at) = rest.rfind('@') {
        let credentials = &rest[..at];
        match credentials.split_once(':') {
            Some((user, _)) => shown.push_str(&format!("{user}:***")),
            None => shown.push_str("***"),
        }
        rest = if credentials.contains(['?', '#']) {
            "@?"
        } else {
            &rest[at..]
        };
    }
    match rest.find(['?', '#']) {
        Some(i) => format!("{shown}{}***", &rest[..=i]),
        None => format!("{shown}{rest}"),
    }
}

/// Reads a switch: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (any case).
pub fn parse_bool(name: &'static str, raw: &str) -> Result<bool, ConfigError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err(ConfigError::new(
            name,
            format!("{raw:?} is not a switch: write 1, true, yes or on; 0, false, no or off"),
        )),
    }
}

/// Checks that a PostgreSQL URL can be read (TLS settings included), without connecting. The
/// message names `name` (not always DATABASE_URL), and the parameter the parser refused with
/// its value where the parser says which; it never shows the password.
pub fn check_database_url(name: &'static str, raw: &str) -> Result<Secret, ConfigError> {
    const FORM: &str =
        "write a PostgreSQL URL such as postgres://user:password@host:5432/db?sslmode=verify-full";
    if let Some((scheme, _)) = raw.trim().split_once("://") {
        if !matches!(scheme, "postgres" | "postgresql") {
            return Err(ConfigError::new(
                name,
                format!(
                    "cannot be read (its scheme is {scheme:?}, not postgres or postgresql): {FORM}"
                ),
            ));
        }
    }
    crate::db::target(raw).map_err(|e| {
        let why = match e {
            crate::db::DbError::Config(why) => with_value(why, raw),
            e => e.to_string(),
        };
        ConfigError::new(name, format!("cannot be read ({why}): {FORM}"))
    })?;
    Ok(Secret::new(raw))
}

/// `why` with the value of the parameter it names (``invalid value for option `port` ``),
/// taken from the URL's query before any `#`, or for a port or a host from its hosts (both
/// found after the credentials, as libpq finds them); the parser names only options that hold
/// no secret.
fn with_value(why: String, raw: &str) -> String {
    let Some(option) = why
        .split_once("invalid value for option `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(option, _)| option)
    else {
        return why;
    };
    let Ok(Some(parts)) = crate::db::url_parts::UrlParts::parse(raw) else {
        return why;
    };
    let query = parts
        .query
        .unwrap_or("")
        .split('#')
        .next()
        .unwrap_or_default();
    match url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == option) {
        Some((_, value)) if option != "password" => format!("{why}: {option}={value:?}"),
        None if matches!(option, "port" | "host") => format!("{why}: hosts {:?}", parts.hosts),
        _ => why,
    }
}

#[cfg(test)]
#[path = "forms_tests.rs"]
mod tests;
