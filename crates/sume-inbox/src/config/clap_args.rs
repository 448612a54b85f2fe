//! The command line, derived from the declarations: each setting a command reads becomes a
//! flag with its variable, its default, its heading and its meaning (and, for a secret, the
//! `*_FILE` variable that may hold it), and what was parsed becomes [`Values`], with where each
//! value came from. Nothing is `required` for clap: a missing setting is the configuration's
//! error (exit 78, naming the variable and its `_FILE`), not a usage error.
//!
//! A command's settings are a [`Scope`]; [`SettingArgs`] of that scope is what the command's
//! arguments flatten in.

use std::ffi::OsString;
use std::marker::PhantomData;

use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};

use super::declared::{self, group_of};
use super::setting::Setting;
use super::values::{Source, Values};

/// The settings one command reads.
pub trait Scope {
    /// Its settings, as slices of declarations.
    const SETTINGS: &'static [&'static [&'static Setting]];
    /// Whether the flags are global (taken by every subcommand).
    const GLOBAL: bool = false;
}

/// The settings of a command, as flags; see [`SettingArgs::values`].
#[derive(Debug, Clone)]
pub struct SettingArgs<S> {
    values: Values,
    scope: PhantomData<S>,
}

impl<S> SettingArgs<S> {
    /// What was given, and the defaults for the rest.
    pub fn values(&self) -> &Values {
        &self.values
    }

    /// The same, for building a configuration.
    pub fn into_values(self) -> Values {
        self.values
    }
}

/// The settings of `scope` that have a flag.
fn flagged(
    scope: &'static [&'static [&'static Setting]],
) -> impl Iterator<Item = &'static Setting> {
    scope
        .iter()
        .flat_map(|s| s.iter().copied())
        .filter(|s| s.flag.is_some())
}

/// `--help`'s text of a setting: its meaning, how its default moves, its `_FILE` variable.
fn help(s: &Setting) -> String {
    let mut text = plain(s.about);
    if let Some(note) = s.default_note {
        text.push_str(&format!(" [default: {}]", note.replace('`', "")));
    }
    if let Some(file) = s.file_variable() {
        text.push_str(&format!(" [or {file}: a file holding it]"));
    }
    text
}

/// Markdown's backticks and links (`[text](#anchor)`) as plain text, for a terminal.
fn plain(markdown: &str) -> String {
    let mut out = String::new();
    let mut rest = markdown;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](").map(|m| open + m) else {
            break;
        };
        let Some(close) = rest[mid..].find(')').map(|c| mid + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..mid]);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out.replace('`', "")
}

/// `cmd` with a flag for every setting of `scope`.
pub fn augment(
    mut cmd: Command,
    scope: &'static [&'static [&'static Setting]],
    global: bool,
) -> Command {
    for s in flagged(scope) {
        let mut arg = Arg::new(s.name)
            .long(s.flag.expect("flagged"))
            .env(s.name)
            .value_name(s.name)
            .help(help(s))
            .help_heading(group_of(s).heading)
            .hide_env_values(s.secret)
            .global(global);
        if let Some(default) = s.default.filter(|d| !d.is_empty()) {
            arg = arg.default_value(default);
        }
        cmd = cmd.arg(arg);
    }
    // The settings read from the environment only (the runtime's threads, the log filter,
    // OTEL_*: all the daemon's) have no flag to list them: written after serve's flags, so that
    // its --help names every setting.
    let names = |scope| flagged(scope).map(|s| s.name);
    if !names(scope).eq(names(declared::SERVE)) {
        return cmd;
    }
    let env_only: Vec<String> = declared::all()
        .filter(|s| s.flag.is_none())
        .map(|s| {
            let default = s.default.filter(|d| !d.is_empty());
            let default = default
                .map(|d| format!(" [default: {d}]"))
                .unwrap_or_default();
            format!("  {}{default}\n          {}", s.name, help(s))
        })
        .collect();
    cmd.after_help(format!(
        "Environment only (no flag):\n{}",
        env_only.join("\n")
    ))
}

/// The command line with each setting's flag that is followed by a negative number or
/// duration (`--ingest-writers -1`, `--header-timeout -5s`: a `-` then a digit or a `.`) written
/// as one argument (`--ingest-writers=-1`), so that the value reaches the setting, which refuses
/// it as it refuses its variable's (exit 78), rather than clap's "unexpected argument '-1'". A
/// flag after a setting's flag (`--ingest-writers --db-pool-size 5`) is left a flag, and
/// nothing after `--` is touched.
pub fn negative_values_joined(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut escaped = false;
    for arg in args {
        let joined = out
            .last()
            .filter(|_| !escaped)
            .and_then(|last| last.to_str()?.strip_prefix("--"))
            .filter(|flag| declared::all().any(|s| s.flag == Some(*flag)))
            .and_then(|flag| {
                let value = arg.to_str()?;
                let first = value.strip_prefix('-')?.chars().next()?;
                (first.is_ascii_digit() || first == '.').then(|| format!("--{flag}={value}"))
            });
        match joined {
            Some(joined) => *out.last_mut().expect("the flag") = joined.into(),
            None => {
                escaped |= arg == "--";
                out.push(arg);
            }
        }
    }
    out
}

/// What `matches` holds for the settings of `scope`; an unset or default value is left to the
/// declaration's default. `from_files` names the settings read from `*_FILE` variables.
pub fn values(matches: &ArgMatches, scope: &'static [&'static [&'static Setting]]) -> Values {
    let from_files = super::secret_files::loaded();
    let mut values = Values::default();
    for s in flagged(scope) {
        let source = match matches.value_source(s.name) {
            Some(ValueSource::CommandLine) => {
                if from_files.contains(&s.name) {
                    super::secret_files::flag_given(s.name, s.flag.expect("flagged"));
                }
                Source::Flag
            }
            Some(ValueSource::EnvVariable) if from_files.contains(&s.name) => Source::File,
            Some(ValueSource::EnvVariable) => Source::Environment,
            _ => continue,
        };
        if let Some(text) = matches.get_one::<String>(s.name) {
            values.set(s, text, source);
        }
    }
    values
}

impl<S: Scope> FromArgMatches for SettingArgs<S> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(SettingArgs {
            values: values(matches, S::SETTINGS),
            scope: PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<S: Scope> Args for SettingArgs<S> {
    fn augment_args(cmd: Command) -> Command {
        augment(cmd, S::SETTINGS, S::GLOBAL)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// The scopes of the commands, named for them.
pub mod scopes {
    use super::{declared, Scope, Setting};

    macro_rules! scope {
        ($($(#[$doc:meta])* $name:ident = $settings:expr $(, global = $global:expr)?;)*) => {$(
            $(#[$doc])*
            #[derive(Debug, Clone)]
            pub struct $name;
            impl Scope for $name {
                const SETTINGS: &'static [&'static [&'static Setting]] = $settings;
                $(const GLOBAL: bool = $global;)?
            }
        )*};
    }

    scope! {
        /// `serve`.
        Serve = declared::SERVE;
        /// `migrate`.
        Migrate = declared::MIGRATE;
        /// `reconcile`.
        Reconcile = declared::RECONCILE;
        /// The operator's commands.
        Admin = declared::ADMIN;
        /// `replay`.
        Replay = declared::REPLAY;
        /// `healthcheck`.
        Healthcheck = declared::HEALTHCHECK;
        /// Every command.
        Global = declared::GLOBAL, global = true;
    }
}
