//! Compiles the section library beside this crate into typed Rust.
//! A malformed section, an incomplete stage or a stale manifest fails the build.

fn main() {
    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    trellis_prompt_codegen::build_script(&root);
}
