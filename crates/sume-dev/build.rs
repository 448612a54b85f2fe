//! Turns the demo's named statements (`sql/*.sql` of this crate) into the constants of
//! `sume_dev::sql`.

fn main() {
    let manifest = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    if let Err(e) = sume_sql::generate(&manifest.join("sql"), &out.join("statements.rs")) {
        panic!("sql: {e}");
    }
}
