//! The outside tools that read the admin API's OpenAPI document (the reference validator, the
//! client generators and Schemathesis), installed by `scripts/openapi-tools` on first use; a
//! test that needs them fails, saying how to install them, when they cannot be had, and never
//! passes without.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The pinned tools' directory: `venv/bin/{python,openapi-spec-validator,openapi-python-client,
/// schemathesis}` and `node/node_modules/.bin/{openapi-ts,tsc}`. Installs them when missing (a
/// few seconds' work once per machine; then a few milliseconds); panics when that fails.
pub fn openapi_tools() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/openapi-tools");
    let out = Command::new(&script)
        .arg("ensure")
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "OPENAPI TOOLS CANNOT RUN: {} failed to start: {e}",
                script.display()
            )
        });
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        out.status.success() && dir.is_dir(),
        "OPENAPI TOOLS CANNOT BE HAD: `scripts/openapi-tools ensure` failed (its reason is \
         above). It needs python3 3.10+ with venv (Debian: python3-venv), Node.js 20.19+ with \
         npm, and PyPI and npm reachable; run it by hand to see the install."
    );
    dir
}
