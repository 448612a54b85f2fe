//! The named SQL statements of `sql/queries/*.sql`, embedded in the binary.
//!
//! Each file holds the statements of one table, each after a `-- name: table_verb` line. They
//! are looked up by name; a missing name is a programming error caught by the tests below.

use std::collections::HashMap;
use std::sync::OnceLock;

#[rustfmt::skip]
const FILES: &[(&str, &str)] = &[
    ("jobs.sql", include_str!("../../../../sql/queries/jobs.sql")),
    ("events.sql", include_str!("../../../../sql/queries/events.sql")),
    ("dead_letters.sql", include_str!("../../../../sql/queries/dead_letters.sql")),
    ("disagreements.sql", include_str!("../../../../sql/queries/disagreements.sql")),
    ("schema.sql", include_str!("../../../../sql/queries/schema.sql")),
    ("inbox_checks.sql", include_str!("../../../../sql/queries/inbox_checks.sql")),
    ("rate_buckets.sql", include_str!("../../../../sql/queries/rate_buckets.sql")),
    ("retention.sql", include_str!("../../../../sql/queries/retention.sql")),
];

fn parse(text: &str) -> Vec<(&str, String)> {
    let mut out: Vec<(&str, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.trim().strip_prefix("-- name:") {
            out.push((name.trim(), String::new()));
        } else if let Some((_, sql)) = out.last_mut() {
            if !line.trim_start().starts_with("--") {
                sql.push_str(line);
                sql.push('\n');
            }
        }
    }
    for (_, sql) in &mut out {
        let trimmed = sql.trim().trim_end_matches(';').to_owned();
        *sql = trimmed;
    }
    out
}

fn all() -> &'static HashMap<&'static str, String> {
    static ALL: OnceLock<HashMap<&'static str, String>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut map = HashMap::new();
        for (file, text) in FILES {
            for (name, sql) in parse(text) {
                assert!(
                    map.insert(name, sql).is_none(),
                    "statement {name} is named twice (in {file})"
                );
            }
        }
        map
    })
}

/// The statement called `name`.
pub fn sql(name: &str) -> &'static str {
    all()
        .get(name)
        .unwrap_or_else(|| panic!("no SQL statement named {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_is_named_by_its_table_and_non_empty() {
        for (file, text) in FILES {
            let table = file.trim_end_matches(".sql");
            let statements = parse(text);
            assert!(!statements.is_empty(), "{file} has no statement");
            for (name, sql) in statements {
                assert!(name.starts_with(table), "{name} in {file}");
                assert!(!sql.is_empty(), "{name} is empty");
                assert!(!sql.contains(';'), "{name} holds more than one statement");
            }
        }
        assert!(sql("events_insert").starts_with("insert into sume.events"));
    }
}
