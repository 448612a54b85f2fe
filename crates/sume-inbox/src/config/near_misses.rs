//! Variables that look like a setting and are not one (`INGEST_WRITER` for `INGEST_WRITERS`,
//! `sweep_interval` for `SWEEP_INTERVAL`). Nothing reads an unknown variable, so a typo leaves the
//! default in force while the operator believes it changed; `serve` warns about each at start.
//! A secret's `*_FILE` variable is a name too (`ADMIN_TOKEN_FLIE` for `ADMIN_TOKEN_FILE` would
//! leave a loopback admin API without a token).

use std::sync::OnceLock;

use super::declared;

/// Each of `names` that is no setting (nor a secret's `*_FILE`) but is within a typo of one,
/// with that setting: the same letters in another case, or one or two letters added, missing
/// or changed (one in a name under ten characters, where two would match unrelated words).
pub fn near_misses<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<(&'a str, &'static str)> {
    names
        .into_iter()
        .filter(|name| !is_known(name))
        .filter_map(|name| closest(name).map(|meant| (name, meant)))
        .collect()
}

/// Each of `names` that is a setting's name with `_FILE` appended where the setting is no
/// secret (`LISTEN_ADDR_FILE`): only secrets are read from a file, so it is ignored and the
/// setting's default stands. With the setting it names.
pub fn files_of_plain_settings<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Vec<(&'a str, &'static str)> {
    names
        .into_iter()
        .filter_map(|name| {
            let setting = declared::find(name.strip_suffix("_FILE")?)?;
            (!setting.secret).then_some((name, setting.name))
        })
        .collect()
}

/// A setting, a secret's file, or the simulator's (`SIM_WEBHOOK_SECRET` is two edits from
/// `SUME_WEBHOOK_SECRET`, and one environment may well hold both).
fn is_known(name: &str) -> bool {
    name.starts_with("SIM_")
        || declared::find(name).is_some()
        || name
            .strip_suffix("_FILE")
            .and_then(declared::find)
            .is_some_and(|s| s.secret)
}

/// Every name a variable may be meant as: each setting, and each secret's `*_FILE`.
fn names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        declared::all()
            .map(|s| s.name)
            .chain(
                super::secret_files::file_variables()
                    .into_iter()
                    .map(|(_, file)| file),
            )
            .collect()
    })
}

fn closest(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    names()
        .iter()
        .map(|meant| (strsim::levenshtein(&upper, meant), *meant))
        .filter(|(edits, meant)| *edits <= if meant.len() < 10 { 1 } else { 2 })
        .min()
        .map(|(_, meant)| meant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_variable_of_a_setting_that_is_no_secret_is_named() {
        let names = [
            "LISTEN_ADDR_FILE",
            "ADMIN_TOKEN_FILE",
            "PATH",
            "SUME_API_URL_FILE",
        ];
        assert_eq!(
            files_of_plain_settings(names),
            [
                ("LISTEN_ADDR_FILE", "LISTEN_ADDR"),
                ("SUME_API_URL_FILE", "SUME_API_URL")
            ]
        );
    }

    #[test]
    fn typos_of_a_setting_are_named_with_it() {
        let env = [
            "INGEST_WRITER",
            "SUME_WEBHOOK_SECRETS",
            "sweep_interval",
            "DATABSE_URL",
            "INGEST_WRITERS",
            "DATABASE_URL_FILE",
            "PATH",
            "HOME",
            "HOSTNAME",
            "RUST_LOG",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "PGPASSWORD",
            "NOTIFY_SOCKET",
            "LISTEN_PID",
            "SIM_WEBHOOK_SECRET",
            "ADMIN_TOKEN_FLIE",
            "SUME_WEBHOOK_SECRET_FLIE",
            "DATABASE_URL_FIL",
            "admin_app_token_file",
        ];
        assert_eq!(
            near_misses(env),
            [
                ("INGEST_WRITER", "INGEST_WRITERS"),
                ("SUME_WEBHOOK_SECRETS", "SUME_WEBHOOK_SECRET"),
                ("sweep_interval", "SWEEP_INTERVAL"),
                ("DATABSE_URL", "DATABASE_URL"),
                ("ADMIN_TOKEN_FLIE", "ADMIN_TOKEN_FILE"),
                ("SUME_WEBHOOK_SECRET_FLIE", "SUME_WEBHOOK_SECRET_FILE"),
                ("DATABASE_URL_FIL", "DATABASE_URL_FILE"),
                ("admin_app_token_file", "ADMIN_APP_TOKEN_FILE"),
            ]
        );
    }
}
