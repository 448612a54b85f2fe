//! API keys, the members who own them and the workspaces those members belong to.
//!
//! A key is configured as `NAME=SECRET@MEMBER/WORKSPACE` (the `--key` flag, repeated) or as an
//! entry of a JSON keys file. The [`Keyring`] built from them answers "who is calling" for a
//! presented key; visibility is decided by member and workspace, so two keys of one member see
//! the same jobs and nobody else does.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use serde::Deserialize;
use thiserror::Error;

use crate::wire::Secret;

/// Why a key spec or keys file was refused. Never names the secret itself.
#[derive(Debug, Error)]
pub enum KeyError {
    /// A `--key` value lacks its `=`, `@` or `/`; holds only the name part and `=...`.
    #[error("key spec {0:?} is not NAME=SECRET@MEMBER/WORKSPACE")]
    BadSpec(String),
    /// One of the four parts is blank; holds the key's name.
    #[error("key {0:?} has an empty name, secret, member or workspace")]
    EmptyPart(String),
    /// The keys file cannot be read or is not the expected JSON.
    #[error("cannot read keys file {path}: {reason}")]
    File {
        /// The file as configured.
        path: String,
        /// The I/O or JSON error.
        reason: String,
    },
    /// Two keys have one name, so logs and stats could not tell them apart.
    #[error("key name {0:?} is configured twice")]
    DuplicateName(String),
    /// Two keys, named here, have one secret, so a request could not tell who is calling.
    #[error("keys {0:?} and {1:?} share one secret")]
    DuplicateSecret(String, String),
}

/// One API key as configured. `Debug` hides the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    /// What logs, `/sim/jobs` and `/sim/stats` call this key.
    pub name: String,
    /// What a caller presents, as `Authorization: Bearer <secret>` or `X-Api-Key: <secret>`.
    pub secret: Secret,
    /// The member owning the key: every key of one member sees the same jobs.
    pub member: String,
    /// The member's workspace.
    pub workspace: String,
}

impl KeySpec {
    /// A key as given, nothing trimmed or checked: unlike a `--key` value or a keys file
    /// entry, a blank part is not refused.
    pub fn new(name: &str, secret: &str, member: &str, workspace: &str) -> KeySpec {
        KeySpec {
            name: name.to_owned(),
            secret: Secret::new(secret),
            member: member.to_owned(),
            workspace: workspace.to_owned(),
        }
    }

    fn check(self) -> Result<KeySpec, KeyError> {
        let parts = [
            &self.name,
            self.secret.expose(),
            &self.member,
            &self.workspace,
        ];
        if parts.iter().any(|p| p.trim().is_empty()) {
            return Err(KeyError::EmptyPart(self.name));
        }
        Ok(self)
    }
}

impl FromStr for KeySpec {
    type Err = KeyError;

    /// `NAME=SECRET@MEMBER/WORKSPACE`; the secret may itself hold `=` or `@`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // The error must not echo the secret: show only the name part.
        let shown = || KeyError::BadSpec(s.split('=').next().unwrap_or("").to_owned() + "=...");
        let (name, rest) = s.split_once('=').ok_or_else(shown)?;
        let (secret, owner) = rest.rsplit_once('@').ok_or_else(shown)?;
        let (member, workspace) = owner.split_once('/').ok_or_else(shown)?;
        KeySpec::new(name.trim(), secret, member.trim(), workspace.trim()).check()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKey {
    name: String,
    secret: String,
    member: String,
    workspace: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum KeysFile {
    Wrapped { keys: Vec<FileKey> },
    List(Vec<FileKey>),
}

/// Reads `{"keys":[{"name","secret","member","workspace"}]}` (or the bare list), or what
/// `SIM_KEYS` holds: `NAME=SECRET@MEMBER/WORKSPACE`, comma or line separated.
pub fn load_keys_file(path: &Path) -> Result<Vec<KeySpec>, KeyError> {
    let fail = |reason: String| KeyError::File {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    if !text.trim_start().starts_with(['{', '[']) {
        // The SIM_KEYS syntax, so the file can hold what SIM_KEYS would (`SIM_KEYS_FILE`).
        return text
            .split([',', '\n'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<KeySpec>())
            .collect();
    }
    let file: KeysFile = serde_json::from_str(&text).map_err(|e| {
        fail(format!(
            "expected {{\"keys\":[{{\"name\",\"secret\",\"member\",\"workspace\"}}]}}: {e}"
        ))
    })?;
    let keys = match file {
        KeysFile::Wrapped { keys } | KeysFile::List(keys) => keys,
    };
    keys.into_iter()
        .map(|k| KeySpec::new(&k.name, &k.secret, &k.member, &k.workspace).check())
        .collect()
}

/// Who a presented key belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub member: String,
    pub workspace: String,
}

impl Caller {
    /// Whether this caller may read a job created by `owner`: same member, same workspace.
    pub fn can_see(&self, owner: &Caller) -> bool {
        self.member == owner.member && self.workspace == owner.workspace
    }
}

/// Every configured key, looked up by its secret.
#[derive(Debug, Default)]
pub struct Keyring {
    by_secret: HashMap<String, Arc<Caller>>,
    in_order: Vec<Arc<Caller>>,
}

impl Keyring {
    pub fn new(specs: &[KeySpec]) -> Result<Keyring, KeyError> {
        let mut ring = Keyring::default();
        let mut names = HashSet::new();
        for spec in specs {
            if !names.insert(spec.name.as_str()) {
                return Err(KeyError::DuplicateName(spec.name.clone()));
            }
            let caller = Arc::new(Caller {
                name: spec.name.clone(),
                member: spec.member.clone(),
                workspace: spec.workspace.clone(),
            });
            if let Some(prev) = ring
                .by_secret
                .insert(spec.secret.expose().to_owned(), caller.clone())
            {
                return Err(KeyError::DuplicateSecret(
                    prev.name.clone(),
                    spec.name.clone(),
                ));
            }
            ring.in_order.push(caller);
        }
        Ok(ring)
    }

    pub fn lookup(&self, presented: &str) -> Option<Arc<Caller>> {
        self.by_secret.get(presented).cloned()
    }

    pub fn callers(&self) -> &[Arc<Caller>] {
        &self.in_order
    }

    pub fn is_empty(&self) -> bool {
        self.in_order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_spec() {
        let k: KeySpec = "alice=sk_a=b@c@mem_alice/ws_acme".parse().unwrap();
        assert_eq!(k.name, "alice");
        assert_eq!(k.secret.expose(), "sk_a=b@c");
        assert_eq!(k.member, "mem_alice");
        assert_eq!(k.workspace, "ws_acme");
        assert!(!format!("{k:?}").contains("sk_a"));
    }

    #[test]
    fn refuses_bad_specs_without_leaking() {
        let err = "alice=sk_hidden"
            .parse::<KeySpec>()
            .unwrap_err()
            .to_string();
        assert!(!err.contains("sk_hidden"), "{err}");
        assert!(matches!(
            "alice=sk@/ws".parse::<KeySpec>(),
            Err(KeyError::EmptyPart(_))
        ));
        assert!("no-equals".parse::<KeySpec>().is_err());
    }

    #[test]
    fn ring_finds_callers_and_refuses_clashes() {
        let a = KeySpec::new("a", "sk_1", "m1", "w1");
        let b = KeySpec::new("b", "sk_2", "m1", "w1");
        let ring = Keyring::new(&[a.clone(), b.clone()]).unwrap();
        let (ca, cb) = (ring.lookup("sk_1").unwrap(), ring.lookup("sk_2").unwrap());
        assert!(ca.can_see(&cb), "same member sees the same jobs");
        assert!(ring.lookup("sk_3").is_none());
        let c = KeySpec::new("c", "sk_1", "m2", "w1");
        assert!(matches!(
            Keyring::new(&[a.clone(), c]),
            Err(KeyError::DuplicateSecret(_, _))
        ));
        assert!(matches!(
            Keyring::new(&[a.clone(), a]),
            Err(KeyError::DuplicateName(_))
        ));
    }

    #[test]
    fn reads_a_keys_file() {
        let dir = std::env::temp_dir().join(format!("sume-sim-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys.json");
        std::fs::write(
            &path,
            r#"{"keys":[{"name":"a","secret":"sk_1","member":"m","workspace":"w"}]}"#,
        )
        .unwrap();
        let keys = load_keys_file(&path).unwrap();
        assert_eq!(keys, vec![KeySpec::new("a", "sk_1", "m", "w")]);
        std::fs::write(&path, r#"[{"name":"a","secret":"sk_1"}]"#).unwrap();
        assert!(matches!(load_keys_file(&path), Err(KeyError::File { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
