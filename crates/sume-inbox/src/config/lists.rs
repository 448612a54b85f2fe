//! Settings that take several entries (webhook secrets, API keys, host names, a collector's
//! headers): entries are separated by commas, and a newline separates them as a comma does
//! (a file of one entry a line, CRLF too; blank lines are passed over), so a secret file
//! written one entry a line reads as the entries it holds, never as one entry holding a
//! newline. Any other control character in a secret or a key is refused, by the setting's
//! name and the entry's position, never its value.

use sume_wire::Secret;

use super::{ApiKey, ConfigError};

/// The entries of a list setting's text, trimmed, in order: its lines (blank ones passed
/// over), each split at its commas. An empty entry between two commas is kept, for the reader
/// to refuse (a stray comma is a typo).
pub fn list_items(raw: &str) -> Vec<&str> {
    raw.lines()
        .filter(|line| !line.trim().is_empty())
        .flat_map(|line| line.split(','))
        .map(str::trim)
        .collect()
}

/// The entries of list setting `name`'s text, as [`list_items`] reads them, an empty one
/// refused (see [`refuse_empty`]).
pub fn list_entries<'a>(name: &'static str, raw: &'a str) -> Result<Vec<&'a str>, ConfigError> {
    let items = list_items(raw);
    refuse_empty(name, &items)?;
    Ok(items)
}

/// An empty entry among `items`, list setting `name`'s entries, refused by its position (never
/// a value beside it) as the stray comma it looks like (at the end, at the start, or two in a
/// row): whatever the list would do with it (a secret list's typo, a key read as `name:key`
/// that is no pair, a host name dropped without a word) is nothing anyone meant.
pub fn refuse_empty(name: &'static str, items: &[&str]) -> Result<(), ConfigError> {
    let Some(i) = items.iter().position(|s| s.is_empty()) else {
        return Ok(());
    };
    let (n, total) = (i + 1, items.len());
    let place = match n {
        _ if total == 1 => "nothing but spaces",
        _ if n == total => "nothing after the last comma",
        1 => "nothing before the first comma",
        _ => "nothing between two commas",
    };
    Err(ConfigError::new(
        name,
        format!(
            "entry {n} of {total} is empty ({place}): it looks like a stray comma; remove it, \
             or write the entry it was meant to separate"
        ),
    ))
}

/// A list setting's text written with commas only ([`list_items`] joined), for a library that
/// reads the variable itself (OpenTelemetry's headers).
pub fn comma_separated(raw: &str) -> String {
    list_items(raw).join(",")
}

/// What a secret's refusal says of a control character in it (never the secret).
const CONTROL: &str = "holds a control character (a tab, a carriage return, an escape): \
                       a secret travels in an HTTP header, which cannot carry it";

/// Whether `s` holds a control character: none may travel in a header or a signature's key
/// as written.
fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// One secret (a key, a token), trimmed; one holding a control character is refused.
pub fn parse_secret(name: &'static str, raw: &str) -> Result<Secret, ConfigError> {
    let s = raw.trim();
    if has_control(s) {
        return Err(ConfigError::new(name, CONTROL));
    }
    Ok(Secret::new(s))
}

/// Secrets separated by commas or newlines; empty items are refused (a stray comma is a typo,
/// and a typo in a secret list must not pass silently), and so is a control character.
pub fn parse_secrets(name: &'static str, raw: &str) -> Result<Vec<Secret>, ConfigError> {
    let items = list_entries(name, raw)?;
    if items.is_empty() {
        return Err(ConfigError::new(
            name,
            "has no secret: write secrets separated by commas (or one a line)",
        ));
    }
    if let Some(i) = items.iter().position(|s| has_control(s)) {
        return Err(ConfigError::new(name, format!("item {} {CONTROL}", i + 1)));
    }
    Ok(items.into_iter().map(Secret::new).collect())
}

/// `name:key,name:key` (or one pair a line). Names are made of letters, digits, `-`, `_`,
/// `.`, and unique ignoring case; a key is given under one name only: the fleet's read budget
/// is kept per name, so one key under two names would spend twice Sume's limits.
pub fn parse_api_keys(name: &'static str, raw: &str) -> Result<Vec<ApiKey>, ConfigError> {
    let mut keys: Vec<ApiKey> = Vec::new();
    for (i, item) in list_entries(name, raw)?.into_iter().enumerate() {
        let key = api_key(name, i + 1, item)?;
        if let Some(other) = keys.iter().find(|k| k.name.eq_ignore_ascii_case(&key.name)) {
            let why = match other.name == key.name {
                true => format!("key name {:?} appears twice", key.name),
                false => format!(
                    "key names {:?} and {:?} differ only in case: give each key one name",
                    other.name, key.name
                ),
            };
            return Err(ConfigError::new(name, why));
        }
        if let Some(other) = keys.iter().find(|k| k.key.expose() == key.key.expose()) {
            return Err(ConfigError::new(
                name,
                format!(
                    "keys {:?} and {:?} are the same key: Sume's limits are per key and the \
                     fleet's budget per name, so it would be spent twice; give each key once",
                    other.name, key.name
                ),
            ));
        }
        keys.push(key);
    }
    Ok(keys)
}

/// Item `n` of SUME_API_KEYS, `name:key`.
fn api_key(name: &'static str, n: usize, item: &str) -> Result<ApiKey, ConfigError> {
    let (key_name, key) = item.split_once(':').ok_or_else(|| {
        ConfigError::new(
            name,
            format!("item {n} is not name:key (write name:key pairs separated by commas or one a line, such as main:KEY1,batch:KEY2)"),
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
            format!("item {n}: key name {key_name:?} must be letters, digits, - _ ."),
        ));
    }
    let key = key.trim();
    if key.is_empty() {
        return Err(ConfigError::new(name, format!("key {key_name:?} is empty")));
    }
    if has_control(key) {
        return Err(ConfigError::new(
            name,
            format!("key {key_name:?} {CONTROL}"),
        ));
    }
    Ok(ApiKey {
        name: key_name.to_owned(),
        key: Secret::new(key),
    })
}

/// Host names separated by commas or newlines, trimmed and lower-cased; an empty one refused
/// (see [`list_entries`]), and one that no `Host` header could hold (a space inside, a scheme,
/// a path).
pub fn parse_names(name: &'static str, raw: &str) -> Result<Vec<String>, ConfigError> {
    let names: Vec<String> = list_entries(name, raw)?
        .into_iter()
        .map(str::to_ascii_lowercase)
        .collect();
    // What a `Host` header can hold: a name or an address, and its port.
    let hostlike = |c: char| c.is_ascii_alphanumeric() || "-._:[]".contains(c);
    match names.iter().find(|h| !h.chars().all(hostlike)) {
        Some(bad) => Err(ConfigError::new(
            name,
            format!(
                "{bad:?} is no host name, so no request could name it: write names alone \
                 (admin.internal, or admin.internal:9090), separated by commas"
            ),
        )),
        None => Ok(names),
    }
}

#[cfg(test)]
#[path = "lists_tests.rs"]
mod tests;
