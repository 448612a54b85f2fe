//! Reading one setting's text: durations, sizes, addresses, secrets, API keys, rates, counts,
//! URLs and switches. Each reader takes the setting's name, so an error names what the user set,
//! quotes the value as written (never a secret's) and says the form it must take.

use std::net::SocketAddr;
use std::time::Duration;

use sume_wire::Secret;

use super::setting::{human, longest_text, DURATION_FORM, MAX_DURATION};
use super::{ApiKey, ConfigError, Rate};

/// Reads `250ms`, `30s`, `5m`, `1h`, `14d` (and combinations such as `1m30s`; humantime's
/// grammar, so `2 minutes`, `2min` and `1 day` too; `M` is a month and `y` a year).
pub fn parse_duration(name: &'static str, raw: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(raw.trim()).map_err(|e| {
        ConfigError::new(
            name,
            format!("{raw:?} is not a duration ({e}): write {DURATION_FORM}"),
        )
    })
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

/// A comma-separated list of secrets; empty items are refused (a stray comma is a typo, and a
/// typo in a secret list must not pass silently).
pub fn parse_secrets(name: &'static str, raw: &str) -> Result<Vec<Secret>, ConfigError> {
    let items: Vec<&str> = raw.split(',').map(str::trim).collect();
    if items.iter().any(|s| s.is_empty()) {
        return Err(ConfigError::new(
            name,
            "has an empty item (check for stray commas): write secrets separated by commas",
        ));
    }
    Ok(items.into_iter().map(Secret::new).collect())
}

/// `name:key,name:key`. Names are unique, made of letters, digits, `-`, `_`, `.`.
pub fn parse_api_keys(name: &'static str, raw: &str) -> Result<Vec<ApiKey>, ConfigError> {
    let mut keys: Vec<ApiKey> = Vec::new();
    for (i, item) in raw.split(',').map(str::trim).enumerate() {
        let (key_name, key) = item
            .split_once(':')
            .ok_or_else(|| {
                ConfigError::new(
                    name,
                    format!("item {} is not name:key (write name:key pairs separated by commas, such as main:KEY1,batch:KEY2)", i + 1),
                )
            })?;
        let key_name = key_name.trim();
        let valid_name = !key_name.is_empty()
            && key_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !valid_name {
            return Err(ConfigError::new(
                name,
                format!(
                    "item {}: key name {key_name:?} must be letters, digits, - _ .",
                    i + 1
                ),
            ));
        }
        if key.trim().is_empty() {
            return Err(ConfigError::new(name, format!("key {key_name:?} is empty")));
        }
        if keys.iter().any(|k| k.name == key_name) {
            return Err(ConfigError::new(
                name,
                format!("key name {key_name:?} appears twice"),
            ));
        }
        keys.push(ApiKey {
            name: key_name.to_owned(),
            key: Secret::new(key.trim()),
        });
    }
    Ok(keys)
}

/// `100` (a minute), or `100/1m`, `20/10s`.
pub fn parse_rate(name: &'static str, raw: &str) -> Result<Rate, ConfigError> {
    const FORM: &str = "write a count per window: 100 (a minute), 100/1m or 20/10s";
    let bad = |why: String| ConfigError::new(name, format!("{raw:?} is not a rate{why}: {FORM}"));
    let (count, per) = match raw.trim().split_once('/') {
        Some((c, w)) => {
            let per = humantime::parse_duration(w.trim()).map_err(|_| {
                bad(format!(
                    " ({:?} is not a window such as 1m or 10s)",
                    w.trim()
                ))
            })?;
            (c, per)
        }
        None => (raw.trim(), Duration::from_secs(60)),
    };
    let count: u32 = count.trim().parse().map_err(|_| bad(String::new()))?;
    if count == 0 || per.is_zero() {
        return Err(bad(" (both numbers must be more than 0)".into()));
    }
    Ok(Rate { count, per })
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
    let trimmed = raw.trim().trim_end_matches('/');
    let bad = |why: &str| {
        ConfigError::new(
            name,
            format!("{raw:?} is not an http(s) URL such as {example}: {why}"),
        )
    };
    let url = url::Url::parse(trimmed).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("no query or fragment allowed"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "no credentials in the URL (Sume's keys go in SUME_API_KEYS, the admin API's token in SUME_INBOX_ADMIN_TOKEN)",
        ));
    }
    Ok(trimmed.to_owned())
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
/// message never shows the password.
pub fn check_database_url(name: &'static str, raw: &str) -> Result<Secret, ConfigError> {
    crate::db::target(raw).map_err(|e| {
        ConfigError::new(
            name,
            format!("cannot be read ({e}): write a PostgreSQL URL such as postgres://user:password@host:5432/db?sslmode=verify-full"),
        )
    })?;
    Ok(Secret::new(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches() {
        assert_eq!(parse_bool("X", "1"), Ok(true));
        assert_eq!(parse_bool("X", " TRUE "), Ok(true));
        assert_eq!(parse_bool("X", "off"), Ok(false));
        assert_eq!(parse_bool("X", ""), Ok(false));
        assert!(parse_bool("X", "maybe").is_err());
    }

    #[test]
    fn api_urls() {
        let ok = |raw: &str| parse_http_url("SUME_API_URL", "https://www.sume.so/api/v1", raw);
        assert_eq!(
            ok("https://www.sume.so/api/v1/").as_deref(),
            Ok("https://www.sume.so/api/v1")
        );
        assert_eq!(
            ok(" http://127.0.0.1:8090/v1 ").as_deref(),
            Ok("http://127.0.0.1:8090/v1")
        );
        for bad in [
            "",
            "www.sume.so/api/v1",
            "ftp://sume.so/v1",
            "https://",
            "https://sume.so/v1?x=1",
            "https://sume.so/v1#x",
            "https://user:pw@sume.so/v1",
        ] {
            let e = ok(bad).unwrap_err();
            assert_eq!(e.name, "SUME_API_URL", "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("X", "250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("X", "30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("X", "5m"), Ok(Duration::from_secs(300)));
        assert_eq!(
            parse_duration("X", "14d"),
            Ok(Duration::from_secs(14 * 86400))
        );
        let err = parse_duration("WEBHOOK_TOLERANCE", "5 minutes please").unwrap_err();
        assert_eq!(err.name, "WEBHOOK_TOLERANCE");
        assert!(err.to_string().starts_with("WEBHOOK_TOLERANCE: "));
        assert!(parse_duration("X", "").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("M", "1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("M", "1MiB"), Ok(1 << 20));
        assert_eq!(parse_bytes("M", "64KiB"), Ok(64 << 10));
        assert_eq!(parse_bytes("M", "2MB"), Ok(2_000_000));
        assert!(parse_bytes("M", "0").is_err());
        assert!(parse_bytes("M", "lots").is_err());
        assert_eq!(parse_bytes("M", "1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("M", "2GB"), Ok(2_000_000_000));
        assert!(parse_bytes("M", "1TiB").is_err());
    }

    #[test]
    fn api_keys() {
        let keys = parse_api_keys("SUME_API_KEYS", "main:sk_1, other:sk_2").unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[1].name, "other");
        assert_eq!(keys[1].key.expose(), "sk_2");
        for bad in ["main", "main:", ":sk", "a:1,a:2", "bad name:sk"] {
            let err = parse_api_keys("SUME_API_KEYS", bad).unwrap_err();
            assert_eq!(err.name, "SUME_API_KEYS", "{bad}");
            assert!(!err.to_string().contains("sk_"), "never echo a key: {err}");
        }
    }

    #[test]
    fn rates() {
        let r = parse_rate("SUME_READ_RATE", "100").unwrap();
        assert_eq!((r.count, r.per), (100, Duration::from_secs(60)));
        let r = parse_rate("SUME_READ_RATE", "20/10s").unwrap();
        assert_eq!((r.count, r.per), (20, Duration::from_secs(10)));
        assert!((r.per_second() - 2.0).abs() < 1e-9);
        for bad in ["0", "fast", "10/0s", "-1"] {
            assert_eq!(
                parse_rate("SUME_READ_RATE", bad).unwrap_err().name,
                "SUME_READ_RATE"
            );
        }
    }

    #[test]
    fn secrets() {
        assert_eq!(parse_secrets("S", "a, b").unwrap().len(), 2);
        assert!(parse_secrets("S", "a,,b").is_err());
        assert!(parse_secrets("S", "").is_err());
    }

    #[test]
    fn urls_and_addresses() {
        assert_eq!(
            parse_http_url(
                "U",
                "https://www.sume.so/api/v1",
                "https://www.sume.so/api/v1/"
            )
            .unwrap(),
            "https://www.sume.so/api/v1"
        );
        assert!(parse_http_url("U", "https://www.sume.so/api/v1", "www.sume.so").is_err());
        assert!(parse_addr("A", "0.0.0.0:8080").is_ok());
        assert!(parse_addr("A", "localhost").is_err());
        assert!(check_database_url("DATABASE_URL", "postgres://u:p@127.0.0.1:5432/db").is_ok());
        assert!(
            check_database_url("DATABASE_URL", "postgres://u:p@127.0.0.1:notaport/db").is_err()
        );
    }
}
