//! Every setting, declared once: a file per concern, each setting one `declare!` entry. To add
//! a setting, declare it in the file of its concern, read it where its part of [`Config`] is
//! built (`config/read.rs`), and use it; its flag, `--help`, default, single-value check,
//! `*_FILE` variable (for a secret) and README's row follow from the declaration.
//!
//! [`Config`]: super::Config

mod database;
mod otel;
mod ports;
mod process;
mod sume;
mod sweep;
mod work;

pub use database::*;
pub use otel::*;
pub use ports::*;
pub use process::*;
pub use sume::*;
pub use sweep::*;
pub use work::*;

use super::setting::{Form, Setting};

/// A concern's settings, under one heading in `--help` and README.
#[derive(Debug)]
pub struct Group {
    /// The heading.
    pub heading: &'static str,
    /// Its settings, in the order they are shown.
    pub settings: &'static [&'static Setting],
}

/// Declares settings (each a `pub static` named as its variable) and their group.
macro_rules! declare {
    ($group:ident, $heading:literal, $(
        $(#[$attr:meta])*
        $name:ident { $($field:ident : $value:expr),* $(,)? }
    )*) => {
        $(
            $(#[$attr])*
            pub static $name: Setting = Setting {
                name: stringify!($name),
                file_name: concat!(stringify!($name), "_FILE"),
                $($field: $value,)*
                ..super::BLANK
            };
        )*
        /// The settings of this concern, in order.
        pub static $group: super::Group = super::Group {
            heading: $heading,
            settings: &[$(&$name),*],
        };
    };
}
pub(crate) use declare;

/// What a declaration leaves out: no flag, no default, free text, not secret.
pub(crate) const BLANK: Setting = Setting {
    name: "",
    flag: None,
    default: None,
    required: false,
    default_note: None,
    form: Form::Text,
    secret: false,
    file_name: "",
    about: "",
};

/// Every group, in README's order.
pub static GROUPS: &[&Group] = &[
    &DATABASE,
    &SUME,
    &PUBLIC_PORT,
    &ADMIN_PORT,
    &INGEST_ATTACH,
    &SWEEP,
    &RETENTION_GROUP,
    &PROCESS,
    &TRACES,
    &ADMIN_COMMANDS,
];

/// Every setting.
pub fn all() -> impl Iterator<Item = &'static Setting> {
    GROUPS.iter().flat_map(|g| g.settings.iter().copied())
}

/// The group a setting is declared in.
pub fn group_of(setting: &Setting) -> &'static Group {
    GROUPS
        .iter()
        .find(|g| g.settings.iter().any(|s| std::ptr::eq(*s, setting)))
        .expect("every setting is in a group")
}

/// The setting declared under `name`.
pub fn find(name: &str) -> Option<&'static Setting> {
    all().find(|s| s.name == name)
}

/// `sume-inbox serve`.
pub static SERVE: &[&[&Setting]] = &[
    DATABASE.settings,
    SUME.settings,
    PUBLIC_PORT.settings,
    ADMIN_PORT.settings,
    INGEST_ATTACH.settings,
    SWEEP.settings,
    RETENTION_GROUP.settings,
    &[&SHUTDOWN_TIMEOUT],
];

/// `sume-inbox migrate`.
pub static MIGRATE: &[&[&Setting]] = &[&[&DATABASE_URL, &MIGRATE_DATABASE_URL, &DB_POOLER]];

/// `sume-inbox reconcile`: the database, and Sume's API as `serve` reads it.
pub static RECONCILE: &[&[&Setting]] = &[&[&DATABASE_URL, &DB_POOLER], SUME_API];

/// The operator's commands (`stats`, `jobs show`, ...): the database or a daemon's admin API.
pub static ADMIN: &[&[&Setting]] = &[&[&DATABASE_URL, &DB_POOLER], ADMIN_COMMANDS.settings];

/// `sume-inbox replay`: as [`ADMIN`], and the secrets to verify with.
pub static REPLAY: &[&[&Setting]] = &[
    &[&DATABASE_URL, &DB_POOLER],
    ADMIN_COMMANDS.settings,
    &[&SUME_WEBHOOK_SECRET],
];

/// `sume-inbox healthcheck`.
pub static HEALTHCHECK: &[&[&Setting]] = &[&[&LISTEN_ADDR]];

/// Flags every command takes.
pub static GLOBAL: &[&[&Setting]] = &[&[&LOG_FORMAT]];
