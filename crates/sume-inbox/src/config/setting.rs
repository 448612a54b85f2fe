//! What a declaration says about one setting: its variable and flag, its default, the form its
//! text takes (with the bounds that form allows), whether it is a secret, and what it means.
//! Everything else is derived from it: the command-line flags and `--help`, the defaults of
//! every `Config` part, the checks of one value, the `*_FILE` variables and README's table.

use std::time::Duration;

/// One setting, declared once (in `config/declared/`).
#[derive(Debug)]
pub struct Setting {
    /// The environment variable: how daemons are configured, and the name every message uses.
    pub name: &'static str,
    /// The long flag (`--header-timeout`), or `None` for a setting read from the environment
    /// only (it is needed before the command line is parsed, or belongs to a library).
    pub flag: Option<&'static str>,
    /// The text used when the setting is unset or empty; `None`: unset has a meaning of its
    /// own (no key, no token), or the setting is [`Setting::required`].
    pub default: Option<&'static str>,
    /// The command that reads it cannot start without it.
    pub required: bool,
    /// How the default changes with other settings, for people (`--help`, README).
    pub default_note: Option<&'static str>,
    /// How the text is read, and the values allowed.
    pub form: Form,
    /// A secret: never printed (not even in `--help` from the environment), and may be read
    /// from a file named by `{name}_FILE`.
    pub secret: bool,
    /// `{name}_FILE`, the variable naming a file that holds it (read only for a secret).
    pub file_name: &'static str,
    /// What it does, for `--help` and README's configuration table.
    pub about: &'static str,
}

/// How a setting's text is read.
#[derive(Debug, Clone, Copy)]
pub enum Form {
    /// A duration (`250ms`, `30s`, `5m`, `14d`), at least `min` and at most `max`.
    Duration {
        /// The shortest allowed.
        min: Duration,
        /// The longest allowed.
        max: Duration,
    },
    /// A duration, or one of `words` (`never`, `off`) meaning "none".
    DurationOr {
        /// The words that mean "none".
        words: &'static [&'static str],
        /// The shortest duration allowed.
        min: Duration,
    },
    /// A size in bytes (`1048576`, `512KiB`, `1MiB`), from `min` to `max`.
    Size {
        /// The smallest allowed.
        min: usize,
        /// The largest allowed.
        max: usize,
    },
    /// A whole number from `min` to `max`.
    Count {
        /// The smallest allowed.
        min: usize,
        /// The largest allowed.
        max: usize,
    },
    /// `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`.
    Switch,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// `IP:PORT`.
    Address,
    /// An `http(s)://` URL without credentials, query or fragment, like `example`.
    HttpUrl {
        /// What such a URL looks like for this setting, quoted in its refusal.
        example: &'static str,
    },
    /// A PostgreSQL connection URL (libpq's keywords, `sslmode`, `sslrootcert`).
    PostgresUrl,
    /// Secrets separated by commas (or newlines).
    Secrets,
    /// `name:key,name:key` (or one pair a line).
    ApiKeys,
    /// One secret (a key, a token): never printed.
    Secret,
    /// A bearer token of at least 16 printable ASCII characters.
    Token,
    /// Requests per window: `100` (a minute) or `100/1m`.
    Rate,
    /// Names separated by commas (or newlines).
    Names,
    /// `name=value` headers separated by commas, each value percent-encoded, read by a library
    /// (OpenTelemetry's exporter) from the variable itself.
    Headers,
    /// Free text, read by a library (`RUST_LOG`'s filter).
    Text,
}

/// The longest duration any setting takes (ten years): past it a timer could overflow, and no
/// setting means anything so long.
pub const MAX_DURATION: Duration = Duration::from_secs(3650 * 86_400);

/// A duration of more than zero (and at most [`MAX_DURATION`]).
pub const POSITIVE: Form = Form::Duration {
    min: Duration::from_millis(1),
    max: MAX_DURATION,
};

/// A duration of at least `min` (and at most [`MAX_DURATION`]).
pub const fn at_least(min: Duration) -> Form {
    Form::Duration {
        min,
        max: MAX_DURATION,
    }
}

/// Durations: what `--help`, README and every error say they look like.
pub const DURATION_FORM: &str =
    "a number and a unit: 250ms, 30s, 5m, 2h, 14d (also min, hour, day, week; sums such as 1m30s)";

impl Form {
    /// What the text must look like, for an error message or `--help`.
    pub fn describe(&self) -> String {
        match self {
            Form::Duration { min, max } => {
                format!("{DURATION_FORM}{}", bounds_text(*min, *max))
            }
            Form::DurationOr { words, min } => format!(
                "{DURATION_FORM}{}, or {}",
                bounds_text(*min, MAX_DURATION),
                quoted(words)
            ),
            Form::Size { min, max } => format!(
                "a size in bytes: 1048576, 512KiB, 1MiB or 1MB (from {} to {})",
                size_text(*min),
                size_text(*max)
            ),
            Form::Count { min, max } if *max == usize::MAX => {
                format!("a whole number of at least {min}")
            }
            Form::Count { min, max } => format!("a whole number from {min} to {max}"),
            Form::Switch => "1, true, yes or on; 0, false, no or off".into(),
            Form::Choice(words) => format!("one of {}", quoted(words)),
            Form::Address => "IP:PORT, such as 0.0.0.0:8080 or [::1]:9090".into(),
            Form::HttpUrl { example } => {
                format!("an http(s) URL without credentials, query or fragment, such as {example}")
            }
            Form::PostgresUrl => {
                "a PostgreSQL URL such as postgres://user:password@host:5432/db?sslmode=verify-full"
                    .into()
            }
            Form::Secrets => "secrets separated by commas".into(),
            Form::ApiKeys => {
                "name:key pairs separated by commas, such as main:KEY1,batch:KEY2".into()
            }
            Form::Secret => "a secret".into(),
            Form::Token => "a token of at least 16 characters, each printable ASCII (0x20 to 0x7e: letters, digits, punctuation and spaces; no accented letters, tabs or control characters)".into(),
            Form::Rate => "a count per window: 100 (a minute), 100/1m or 20/10s".into(),
            Form::Names => "names separated by commas".into(),
            Form::Headers => {
                "name=value headers separated by commas, each value percent-encoded".into()
            }
            Form::Text => "text".into(),
        }
    }
}

/// `, from 1s to 1h` style bounds of a duration: the real floor (`at least 1ms`, as `1ns` is
/// more than 0 yet refused), `more than 0` only where there is none.
fn bounds_text(min: Duration, max: Duration) -> String {
    let min_text = (!min.is_zero()).then(|| human(min));
    match (min_text, max >= MAX_DURATION) {
        (None, true) => ", more than 0".into(),
        (Some(min), true) => format!(", at least {min}"),
        (None, false) => format!(", more than 0 and at most {}", human(max)),
        (Some(min), false) => format!(", from {min} to {}", human(max)),
    }
}

/// The longest a duration setting takes, as people write it: `3650d` for [`MAX_DURATION`]
/// (which humantime would spell in years, months and hours of its 365.25-day year).
pub fn longest_text(max: Duration) -> String {
    if max == MAX_DURATION {
        "3650d (ten years)".into()
    } else {
        human(max)
    }
}

/// A duration as people write it (`5m`, `1day 2h`).
pub fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A size as people write it (`1GiB`, `1MiB`, `512KiB`, `1000 bytes`; the largest size a
/// setting takes, one byte under 4GiB, as such).
pub fn size_text(n: usize) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{}GiB", n >> 30),
        n if n == (4 << 30) - 1 => "4GiB less one byte".into(),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// `` `a`, `b` or `c` ``.
fn quoted(words: &[&str]) -> String {
    let q: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
    match q.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => q.join(""),
    }
}

impl Form {
    /// Whether the setting takes several entries, separated by commas; a newline separates
    /// them too (a file of one entry a line), see [`super::list_items`].
    pub fn is_list(&self) -> bool {
        matches!(
            self,
            Form::Secrets | Form::ApiKeys | Form::Names | Form::Headers
        )
    }
}

impl Setting {
    /// The variable naming a file that holds this secret (`DATABASE_URL_FILE`).
    pub fn file_variable(&self) -> Option<&'static str> {
        self.secret.then_some(self.file_name)
    }
}
