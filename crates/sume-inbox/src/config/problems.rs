//! Every setting's problem at once: where `serve`'s settings are refused, each other setting
//! is read alone by its form too, so that the operator fixes them all in one go rather than
//! meeting them one start at a time.

use super::declared::{DATABASE_URL, SERVE, SUME_WEBHOOK_SECRET};
use super::setting::{Form, Setting};
use super::values::Values;
use super::ConfigError;

/// `first` (the refusal the reading met) and every other problem of `serve`'s settings read
/// alone, in the order the settings are declared (`first` where its setting is, else before
/// them): the first of them, the others in its `also`.
pub fn with_every_problem(v: &Values, first: ConfigError) -> ConfigError {
    let mut all: Vec<ConfigError> = SERVE
        .iter()
        .flat_map(|group| group.iter())
        .filter_map(|s| check(v, s).err())
        .collect();
    all.dedup_by(|a, b| a.name == b.name);
    match all.iter().position(|e| e.name == first.name) {
        Some(at) => all[at] = first,
        None => all.insert(0, first),
    }
    let mut all = all.into_iter();
    let top = all.next().expect("first is among them");
    ConfigError {
        also: all.collect(),
        ..top
    }
}

/// `s` read alone by its form, its value dropped. The two settings `serve` cannot do without
/// are required; any other left unset is left to the part that reads it (it may be optional).
fn check(v: &Values, s: &'static Setting) -> Result<(), ConfigError> {
    if s.name == DATABASE_URL.name {
        return v.postgres_url(s).map(drop);
    }
    if s.name == SUME_WEBHOOK_SECRET.name {
        return v.secrets(s).map(drop);
    }
    if v.text(s).is_none() {
        return Ok(());
    }
    match s.form {
        Form::Duration { .. } => v.duration(s).map(drop),
        Form::DurationOr { .. } => v.duration_or_none(s).map(drop),
        Form::Size { .. } => v.size(s).map(drop),
        Form::Count { .. } => v.count(s).map(drop),
        Form::Switch => v.switch(s).map(drop),
        Form::Choice(_) => v.choice(s).map(drop),
        Form::Address => v.address(s).map(drop),
        Form::HttpUrl { .. } => v.http_url(s).map(drop),
        Form::PostgresUrl => v.postgres_url(s).map(drop),
        Form::Secrets => v.secrets(s).map(drop),
        Form::ApiKeys => v.api_keys(s).map(drop),
        Form::Secret => v.secret(s).map(drop),
        Form::Token => v.token(s).map(drop),
        Form::Rate => v.rate(s).map(drop),
        Form::Names => v.names(s).map(drop),
        Form::Headers | Form::Text => Ok(()),
    }
}
