//! Build-time half of the Trellis prompt plane.
//!
//! A section library is a directory of small markdown files with typed front
//! matter (see [`section`]). This crate parses and validates the library,
//! generates one typed Rust struct per section, and renders and checks the
//! committed `manifest.toml`. It runs from the `build.rs` of the crate that
//! owns the sections, so a malformed section fails `cargo build` with a
//! message naming the file and line; it never edits the source tree.
//!
//! The runtime crate (`trellis-prompts`) also links this crate to lint
//! external bundles and regenerate the manifest with the same code.

pub mod canonical;
pub mod error;
pub mod generate;
pub mod library;
pub mod manifest;
pub mod schema;
pub mod section;

use std::path::{Path, PathBuf};

pub use error::{CodegenError, CodegenErrors};
pub use library::{Library, OverrideTarget, SectionFile, load_library};
pub use manifest::{ActivationState, Manifest, ManifestEntry};
pub use section::{SectionRole, SectionSpec, parse_section};

/// Name of the generated file inside `OUT_DIR`.
pub const GENERATED_FILE: &str = "prompt_sections.rs";

/// Validates the library at `root` (sections, stage completeness, manifest
/// freshness) and writes the generated Rust source into `out_dir`. Returns
/// every path the build depends on.
pub fn generate_into(root: &Path, out_dir: &Path) -> Result<Vec<PathBuf>, CodegenErrors> {
    let library = load_library(root)?;
    let manifest = manifest::check_manifest(&library)?;
    let mut source = generate::generate(&library, &manifest::activations(&manifest));
    let manifest_text =
        std::fs::read_to_string(root.join(manifest::MANIFEST_FILE)).unwrap_or_default();
    source.push_str(&format!(
        "\n/// Digest of the manifest this library was compiled against.\npub const MANIFEST_DIGEST: &str = {:?};\n",
        manifest::manifest_digest(&manifest_text)
    ));
    let target = out_dir.join(GENERATED_FILE);
    std::fs::write(&target, source)
        .map_err(|e| CodegenError::new(&target, 0, format!("cannot write generated code: {e}")))?;
    let mut inputs = vec![
        root.join(library::STAGES_FILE),
        root.join(manifest::MANIFEST_FILE),
    ];
    for decl in &library.stages {
        inputs.push(root.join(&decl.library));
        inputs.push(root.join(&decl.library).join(&decl.stage));
    }
    inputs.extend(library.sections.iter().map(|s| s.path.clone()));
    Ok(inputs)
}

/// The whole `build.rs` of a section-owning crate: generate from `root` into
/// `$OUT_DIR`, or print every error and fail the build.
pub fn build_script(root: &Path) {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed={}", root.display());
    match generate_into(root, &out_dir) {
        Ok(inputs) => {
            for input in inputs {
                println!("cargo:rerun-if-changed={}", input.display());
            }
        }
        Err(errors) => {
            eprintln!("error: the prompt section library is invalid:");
            for error in &errors.0 {
                eprintln!("  {error}");
            }
            std::process::exit(1);
        }
    }
}
