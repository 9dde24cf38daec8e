//! The files a workspace names for the prompt plane: `trellis.toml`'s
//! `[prompts]` (damaged text, FIFOs, huge files, paths leaving the
//! workspace) and bundle directories (link loops).
//!
//! Its properties:
//! `a_damaged_prompts_table_loads_or_is_refused_naming_the_file`,
//! `bundles_outside_the_workspace_are_refused_naming_the_entry`,
//! `a_bundle_with_a_link_loop_is_refused_naming_the_link`,
//! `a_bundle_section_that_is_a_fifo_is_refused_naming_it`, and `trellis.toml`
//! read by the engine's rules:
//! `a_trellis_toml_that_is_a_fifo_is_refused_without_blocking`,
//! `a_trellis_toml_linked_to_dev_zero_is_refused_without_reading_it`,
//! `a_trellis_toml_over_one_mib_is_refused`.

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use trellis_core::fuzz::{self, CountingAllocator};
use trellis_prompts::ResolutionPolicy;
use trellis_prompts::activation::PromptsConfig;
use trellis_prompts::bundles::load_bundles;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const ALLOW: ResolutionPolicy = ResolutionPolicy {
    allow_experimental: true,
    allow_core_override: false,
};

const DOCUMENTED: &str = "[gate]\nrho = 0.5\n\n[prompts]\nbundles = [\"prompts/bundle\"]\nactivation_min_tasks = 40\nnoninferiority_margin = 0.02\n";

fn load(workspace: &Path) -> Result<PromptsConfig, (std::path::PathBuf, String)> {
    fuzz::bounded("PromptsConfig::load", fuzz::budget(64 << 10), || {
        PromptsConfig::load(workspace)
    })
}

fn refusal(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("trellis.toml"), text).unwrap();
    let (path, reason) = load(dir.path()).unwrap_err();
    assert_eq!(path, dir.path().join("trellis.toml"));
    reason
}

proptest! {
    #![proptest_config(fuzz::config(128))]

    /// Damaged text: the settings, or a refusal naming `trellis.toml`.
    #[test]
    fn a_damaged_prompts_table_loads_or_is_refused_naming_the_file(
        text in fuzz::mutated_lines(DOCUMENTED),
    ) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("trellis.toml"), &text).unwrap();
        if let Err((path, reason)) = load(dir.path()) {
            prop_assert_eq!(path, dir.path().join("trellis.toml"));
            prop_assert!(!reason.is_empty());
        }
    }
}

#[test]
fn the_documented_prompts_table_loads() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("trellis.toml"), DOCUMENTED).unwrap();
    let config = load(dir.path()).unwrap();
    assert_eq!(config.bundles, [Path::new("prompts/bundle")]);
}

/// `PromptsConfig::load` used an unbounded `read_to_string`: a FIFO there
/// blocked `trellis prompts` forever.
#[cfg(unix)]
#[test]
fn a_trellis_toml_that_is_a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("trellis.toml");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let (path, reason) = load(dir.path()).unwrap_err();
    assert_eq!(path, fifo);
    assert!(reason.contains("not a regular file"), "{reason}");
}

/// …and a link to `/dev/zero` would have read until memory ran out.
#[cfg(unix)]
#[test]
fn a_trellis_toml_linked_to_dev_zero_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("trellis.toml")).unwrap();
    let (_, reason) = load(dir.path()).unwrap_err();
    assert!(reason.contains("not a regular file"), "{reason}");
}

#[test]
fn a_trellis_toml_over_one_mib_is_refused() {
    let big = format!("# {}\n", "x".repeat(1 << 20));
    assert!(refusal(&big).contains("larger than 1024 KiB"));
}

#[test]
fn bundles_outside_the_workspace_are_refused_naming_the_entry() {
    for entry in ["/etc", "../elsewhere", "a/../../b", ""] {
        let reason = refusal(&format!("[prompts]\nbundles = [\"{entry}\"]\n"));
        assert!(
            reason.contains(&format!("`bundles` entry `{entry}` is not a relative path")),
            "{entry}: {reason}"
        );
    }
}

/// Two links to the bundle's own directory made the walk visit 2^40 paths
/// (it followed every link); a link in a bundle is now refused by name.
#[cfg(unix)]
#[test]
fn a_bundle_with_a_link_loop_is_refused_naming_the_link() {
    let workspace = tempfile::tempdir().unwrap();
    let bundle = workspace.path().join("bundle");
    fs::create_dir(&bundle).unwrap();
    std::os::unix::fs::symlink(".", bundle.join("a")).unwrap();
    std::os::unix::fs::symlink(".", bundle.join("b")).unwrap();
    let store = tempfile::tempdir().unwrap();
    let errors = fuzz::bounded("load_bundles", fuzz::budget(1 << 10), || {
        load_bundles(&["bundle".into()], workspace.path(), store.path(), ALLOW)
    })
    .unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].reason.contains("is a symbolic link"),
        "{:?}",
        errors[0]
    );
}

/// A section file that is a FIFO is refused instead of blocking the session start.
#[cfg(unix)]
#[test]
fn a_bundle_section_that_is_a_fifo_is_refused_naming_it() {
    let workspace = tempfile::tempdir().unwrap();
    let bundle = workspace.path().join("bundle");
    fs::create_dir(&bundle).unwrap();
    let fifo = bundle.join("role.md");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let store = tempfile::tempdir().unwrap();
    let errors =
        load_bundles(&["bundle".into()], workspace.path(), store.path(), ALLOW).unwrap_err();
    assert_eq!(errors[0].file, fifo);
    assert!(
        errors[0].reason.contains("not a regular file"),
        "{errors:?}"
    );
}
