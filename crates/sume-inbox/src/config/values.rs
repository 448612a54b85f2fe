//! The settings' text as the operator gave it (or the declared default), and where each came
//! from; [`Values`]'s typed readers turn one setting's text into a value, checked against its
//! declaration, with an error that names the setting, quotes what was written (never a
//! secret) and says the form it must take.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use sume_wire::Secret;

use super::forms::{self, months_hint, read_as};
use super::lists;
use super::setting::{longest_text, size_text, Form, Setting, MAX_DURATION};
use super::{ApiKey, ConfigError, Rate};

/// Where a setting's text came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Its declared default (it was unset, or set to nothing).
    Default,
    /// Its environment variable.
    Environment,
    /// The variable naming a file that holds it (`*_FILE`).
    File,
    /// Its flag on the command line.
    Flag,
}

/// The text of each setting a command reads, and where it came from.
#[derive(Debug, Clone, Default)]
pub struct Values {
    given: BTreeMap<&'static str, (String, Source)>,
}

impl Values {
    /// Every setting at its declared default: what a daemon started with nothing set reads.
    pub fn defaults() -> Values {
        Values::default()
    }

    /// The same with `setting` set to `text` (as if by its flag).
    pub fn with(mut self, setting: &Setting, text: &str) -> Values {
        self.set(setting, text, Source::Flag);
        self
    }

    /// Records `text` for `setting`; nothing (or only spaces) means unset, so its default holds.
    /// A token is the exception: only nothing unsets it, and a blank one is refused when read
    /// (a token of spaces taken as none would leave the admin API open without a word).
    pub fn set(&mut self, setting: &Setting, text: &str, source: Source) {
        let unset = match setting.form {
            Form::Token => text.is_empty(),
            _ => text.trim().is_empty(),
        };
        if unset {
            self.given.remove(setting.name);
        } else {
            self.given.insert(setting.name, (text.to_owned(), source));
        }
    }

    /// `settings` read from the process's environment (those read before the command line is,
    /// such as WORKER_THREADS).
    pub fn from_env(settings: &[&'static Setting]) -> Result<Values, ConfigError> {
        let mut values = Values::default();
        let from_files = super::secret_files::loaded();
        for s in settings {
            let source = match from_files.contains(&s.name) {
                true => Source::File,
                false => Source::Environment,
            };
            match std::env::var(s.name) {
                Ok(text) => values.set(s, &text, source),
                Err(std::env::VarError::NotPresent) => {}
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(ConfigError::new(s.name, "is not UTF-8"))
                }
            }
        }
        Ok(values)
    }

    /// Whether the operator set `setting` (its variable, file or flag), rather than leaving it
    /// to its default.
    pub fn is_set(&self, setting: &Setting) -> bool {
        self.given.contains_key(setting.name)
    }

    /// Where `setting`'s text came from.
    pub fn source(&self, setting: &Setting) -> Source {
        self.given
            .get(setting.name)
            .map_or(Source::Default, |g| g.1)
    }

    /// The text in force: what was set, else the default; `None` when neither.
    pub fn text(&self, setting: &Setting) -> Option<&str> {
        match self.given.get(setting.name) {
            Some((text, _)) => Some(text.as_str()),
            None => setting.default,
        }
    }

    /// The text in force, or an error saying the setting is required.
    fn required(&self, s: &Setting) -> Result<&str, ConfigError> {
        self.text(s).ok_or_else(|| {
            let file = s
                .file_variable()
                .map(|f| format!(" (or {f}, naming a file that holds it)"))
                .unwrap_or_default();
            ConfigError::new(
                s.name,
                format!("is required: set {}{file} to {}", s.name, s.form.describe()),
            )
        })
    }

    /// A duration within its declared bounds.
    pub fn duration(&self, s: &'static Setting) -> Result<Duration, ConfigError> {
        let Form::Duration { min, max } = s.form else {
            panic!("{} is not declared as a duration", s.name)
        };
        let raw = self.required(s)?;
        let d = forms::parse_duration(s.name, raw)?;
        if d > max {
            return Err(too_long(s, raw, d, max));
        }
        if d < min {
            return Err(ConfigError::new(
                s.name,
                format!(
                    "{} is out of range: write {}",
                    read_as(raw, d),
                    s.form.describe()
                ),
            ));
        }
        Ok(d)
    }

    /// A duration, or `None` for one of the declared words (`never`, `off`).
    pub fn duration_or_none(&self, s: &'static Setting) -> Result<Option<Duration>, ConfigError> {
        let Form::DurationOr { words, min } = s.form else {
            panic!("{} is not declared as a duration or a word", s.name)
        };
        let raw = self.required(s)?;
        if word(raw, words).is_some() {
            return Ok(None);
        }
        let d = forms::parse_duration(s.name, raw).map_err(|_| {
            ConfigError::new(s.name, format!("{raw:?}: write {}", s.form.describe()))
        })?;
        if d > MAX_DURATION {
            return Err(too_long(s, raw, d, MAX_DURATION));
        }
        if d < min {
            return Err(ConfigError::new(
                s.name,
                format!(
                    "{} is out of range: write {}",
                    read_as(raw, d),
                    s.form.describe()
                ),
            ));
        }
        Ok(Some(d))
    }

    /// A size in bytes within its declared bounds.
    pub fn size(&self, s: &'static Setting) -> Result<usize, ConfigError> {
        let Form::Size { min, max } = s.form else {
            panic!("{} is not declared as a size", s.name)
        };
        let raw = self.required(s)?;
        let n = forms::parse_bytes(s.name, raw)?;
        if n > max {
            return Err(ConfigError::new(
                s.name,
                format!(
                    "{} is more than it takes: write a size up to {}",
                    forms::size_read_as(raw, n),
                    size_text(max)
                ),
            ));
        }
        if n < min {
            return Err(ConfigError::new(
                s.name,
                format!(
                    "{raw:?} ({}) is out of range: write {}",
                    size_text(n),
                    s.form.describe()
                ),
            ));
        }
        Ok(n)
    }

    /// A whole number within its declared bounds.
    pub fn count(&self, s: &'static Setting) -> Result<usize, ConfigError> {
        let Form::Count { min, max } = s.form else {
            panic!("{} is not declared as a count", s.name)
        };
        forms::parse_count_in(s.name, self.required(s)?, min, max)
    }

    /// A count that may be unset (its default then depends on other settings).
    pub fn optional_count(&self, s: &'static Setting) -> Result<Option<usize>, ConfigError> {
        match self.text(s) {
            None => Ok(None),
            Some(_) => self.count(s).map(Some),
        }
    }

    /// A switch.
    pub fn switch(&self, s: &'static Setting) -> Result<bool, ConfigError> {
        forms::parse_bool(s.name, self.required(s)?)
    }

    /// One of the declared words, as declared (lower case), written in any case.
    pub fn choice(&self, s: &'static Setting) -> Result<&'static str, ConfigError> {
        let Form::Choice(words) = s.form else {
            panic!("{} is not declared as a choice", s.name)
        };
        let raw = self.required(s)?;
        word(raw, words).ok_or_else(|| {
            ConfigError::new(s.name, format!("{raw:?} is not {}", s.form.describe()))
        })
    }

    /// A socket address.
    pub fn address(&self, s: &'static Setting) -> Result<SocketAddr, ConfigError> {
        forms::parse_addr(s.name, self.required(s)?)
    }

    /// An http(s) URL, without its trailing `/`.
    pub fn http_url(&self, s: &'static Setting) -> Result<String, ConfigError> {
        let Form::HttpUrl { example } = s.form else {
            panic!("{} is not declared as an http(s) URL", s.name)
        };
        forms::parse_http_url(s.name, example, self.required(s)?)
    }

    /// An optional http(s) URL.
    pub fn optional_http_url(&self, s: &'static Setting) -> Result<Option<String>, ConfigError> {
        self.text(s).map(|_| self.http_url(s)).transpose()
    }

    /// An optional http(s) URL, checked as [`Values::http_url`] checks one and kept as written
    /// (a trailing `/` too): a URL that is the whole address, not a base.
    pub fn optional_url_as_written(
        &self,
        s: &'static Setting,
    ) -> Result<Option<String>, ConfigError> {
        let Form::HttpUrl { example } = s.form else {
            panic!("{} is not declared as an http(s) URL", s.name)
        };
        self.text(s)
            .map(|raw| forms::parse_http_url_as_written(s.name, example, raw))
            .transpose()
    }

    /// A PostgreSQL URL, checked to be readable (never printed), without the spaces and line
    /// ends around it (a file's last newline, a space pasted after it), as every setting.
    pub fn postgres_url(&self, s: &'static Setting) -> Result<Secret, ConfigError> {
        self.named(forms::check_database_url(s.name, self.required(s)?.trim()))
    }

    /// An optional PostgreSQL URL.
    pub fn optional_postgres_url(
        &self,
        s: &'static Setting,
    ) -> Result<Option<Secret>, ConfigError> {
        self.text(s).map(|_| self.postgres_url(s)).transpose()
    }

    /// Secrets separated by commas or newlines (required).
    pub fn secrets(&self, s: &'static Setting) -> Result<Vec<Secret>, ConfigError> {
        self.named(lists::parse_secrets(s.name, self.required(s)?))
    }

    /// One optional secret; one holding a control character is refused.
    pub fn secret(&self, s: &'static Setting) -> Result<Option<Secret>, ConfigError> {
        let secret = self.text(s).map(|t| lists::parse_secret(s.name, t));
        self.named(secret.transpose())
    }

    /// An optional bearer token: at least 16 characters, each printable ASCII (it travels in an
    /// HTTP header, which holds no other byte a client sends as written; a space inside is
    /// sent as written, and always worked). Only nothing is
    /// unset; a token of spaces is refused, as it would otherwise mean no token at all.
    pub fn token(&self, s: &'static Setting) -> Result<Option<Secret>, ConfigError> {
        let Some(raw) = self.given.get(s.name).map(|g| g.0.as_str()) else {
            return Ok(None);
        };
        let t = raw.trim();
        let problem = if t.is_empty() {
            format!(
                "is blank ({} whitespace characters, no token): write {}, or leave it empty for none",
                raw.chars().count(),
                s.form.describe()
            )
        } else if !t.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            format!(
                "holds a character that is not printable ASCII (an accented letter, a tab, a control character): write {}",
                s.form.describe()
            )
        } else if t.len() < 16 {
            format!(
                "is {} characters long: write {}",
                t.len(),
                s.form.describe()
            )
        } else {
            return Ok(Some(Secret::new(t)));
        };
        self.named(Err(ConfigError::new(s.name, problem)))
    }

    /// `name:key` pairs (commas or newlines between them), or none when unset.
    pub fn api_keys(&self, s: &'static Setting) -> Result<Vec<ApiKey>, ConfigError> {
        match self.text(s) {
            Some(raw) => self.named(lists::parse_api_keys(s.name, raw)),
            None => Ok(Vec::new()),
        }
    }

    /// A rate.
    pub fn rate(&self, s: &'static Setting) -> Result<Rate, ConfigError> {
        forms::parse_rate(s.name, self.required(s)?)
    }

    /// Host names separated by commas or newlines, lower-cased (see [`lists::parse_names`]).
    pub fn names(&self, s: &'static Setting) -> Result<Vec<String>, ConfigError> {
        lists::parse_names(s.name, self.text(s).unwrap_or(""))
    }

    /// `result`, its error named after the `_FILE` variable its setting was read from, when it
    /// was (`ADMIN_TOKEN_FILE: is 5 characters long`): that variable is what the operator set,
    /// and the only name under which the value can be found.
    pub fn named<T>(&self, result: Result<T, ConfigError>) -> Result<T, ConfigError> {
        result.map_err(|e| match super::declared::find(e.name) {
            Some(s) if self.source(s) == Source::File => ConfigError {
                name: s.file_name,
                ..e
            },
            _ => e,
        })
    }

    /// How a value is quoted in a rule's message: as written and read, with where it came
    /// from (`POLL_AFTER="2M" (read as ...)`, `POLL_MAX_INTERVAL (30m, its default)`).
    pub fn quote(&self, s: &Setting, parsed: &str) -> String {
        match (self.given.get(s.name), s.secret) {
            (_, true) => s.name.to_owned(),
            (Some((raw, _)), false) if raw.trim() == parsed => format!("{}={raw:?}", s.name),
            (Some((raw, _)), false) => {
                format!("{}={raw:?} (read as {parsed}{})", s.name, months_hint(raw))
            }
            (None, false) => format!("{} ({parsed}, its default)", s.name),
        }
    }
}

/// A duration longer than a setting takes: says the longest, not only the form (whose bounds
/// leave the ten-year ceiling unsaid).
fn too_long(s: &Setting, raw: &str, d: Duration, max: Duration) -> ConfigError {
    ConfigError::new(
        s.name,
        format!(
            "{} is longer than {}, the longest it takes: write {}",
            read_as(raw, d),
            longest_text(max),
            s.form.describe()
        ),
    )
}

/// The word of `words` that `raw` is, in any case (`NEVER`, `Off`, `Transaction`): every
/// setting that takes words reads them here.
fn word(raw: &str, words: &'static [&'static str]) -> Option<&'static str> {
    let raw = raw.trim();
    words.iter().copied().find(|w| w.eq_ignore_ascii_case(raw))
}

#[cfg(test)]
#[path = "values_tests.rs"]
mod tests;
