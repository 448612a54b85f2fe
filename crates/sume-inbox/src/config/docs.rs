//! README's configuration tables, written from the declarations: a table per group (variable,
//! default, meaning) and the list of settings that may be read from a `*_FILE`. A test holds
//! README to this text; `make settings-docs` rewrites README's section from it.

use super::declared::GROUPS;
use super::setting::Setting;

/// The line before README's generated section.
pub const BEGIN: &str = "<!-- settings:begin (written from crates/sume-inbox/src/config/declared/ by `make settings-docs`; edit the declarations, not this) -->";
/// The line after it.
pub const END: &str = "<!-- settings:end -->";

/// The default column of a setting.
fn default_cell(s: &Setting) -> String {
    let default = s
        .default
        .filter(|d| !d.is_empty())
        .map(|d| format!("`{d}`"));
    match (default, s.default_note, s.required) {
        (_, _, true) => "(required)".into(),
        (Some(d), Some(note), _) => format!("{d}; {note}"),
        (Some(d), None, _) => d,
        (None, Some(note), _) => note.into(),
        (None, None, _) => String::new(),
    }
}

/// The generated section, between [`BEGIN`] and [`END`] (exclusive).
pub fn markdown() -> String {
    let mut out = String::new();
    for group in GROUPS {
        out.push_str(&format!(
            "\n#### {}\n\n| variable | default | meaning |\n|---|---|---|\n",
            group.heading
        ));
        for s in group.settings {
            let flag = s.flag.map(|f| format!(" (`--{f}`)")).unwrap_or_default();
            out.push_str(&format!(
                "| `{}`{flag} | {} | {} |\n",
                s.name,
                default_cell(s),
                s.about.replace('|', "\\|")
            ));
        }
    }
    let files: Vec<String> = GROUPS
        .iter()
        .flat_map(|g| g.settings.iter())
        .filter(|s| s.secret)
        .map(|s| format!("`{}`", s.name))
        .collect();
    out.push_str(&format!(
        "\nSecrets may instead be read from a file named by the same variable with `_FILE` appended (Docker and Kubernetes secrets, systemd credentials): {}. The file's trailing newline is not part of the value; a list's file may hold one entry a line; a value the file holds that is refused is named by the `_FILE` variable.\n\n",
        files.join(", ")
    ));
    out
}

/// `readme` with its generated section replaced by [`markdown`]; `None` when it has no
/// section.
pub fn rewrite(readme: &str) -> Option<String> {
    let start = readme.find(BEGIN)? + BEGIN.len();
    let end = readme[start..].find(END)? + start;
    Some(format!(
        "{}\n{}{}",
        &readme[..start],
        markdown(),
        &readme[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README's configuration tables are the declarations'; `UPDATE_SETTINGS_DOCS=1` rewrites
    /// them (what `make settings-docs` does).
    #[test]
    fn readme_configuration_is_written_from_the_declarations() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let expected = rewrite(&readme).expect("README has the generated settings section");
        if std::env::var_os("UPDATE_SETTINGS_DOCS").is_some() {
            std::fs::write(path, &expected).unwrap();
            return;
        }
        assert!(
            readme == expected,
            "README's configuration section differs from the declarations: run `make settings-docs`"
        );
    }
}
