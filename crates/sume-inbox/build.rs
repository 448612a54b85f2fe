//! Turns the named statements of `sql/queries/*.sql` into the constants of `db::sql`.

fn main() {
    let manifest = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    if let Err(e) = sume_sql::generate(
        &manifest.join("../../sql/queries"),
        &out.join("statements.rs"),
    ) {
        panic!("sql/queries: {e}");
    }
}
