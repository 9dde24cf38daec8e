//! Pinning configured bundles is all or nothing: when any bundle is
//! refused, no bundle's sections are copied into the store.

use std::fs;
use std::path::Path;

use trellis_prompts::ResolutionPolicy;
use trellis_prompts::bundles::load_bundles;

fn write_section(dir: &Path, id: &str, priority: u16) {
    fs::create_dir_all(dir).unwrap();
    fs::write(
        dir.join("role.md"),
        format!(
            "---\nid: {id}\nversion: 1\nrole: system\nrequired: true\npriority: {priority}\n\
             max_bytes: 1024\nowner: bundle\nrationale: r\nreview: 2026-11-30\nvars: {{}}\n---\nText.\n"
        ),
    )
    .unwrap();
}

#[test]
fn a_refused_later_bundle_leaves_no_copy_of_an_earlier_one() {
    let workspace = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    write_section(&workspace.path().join("good"), "branch_correct/role", 100);
    // The wrong priority breaks the compiled schema: refused.
    write_section(&workspace.path().join("bad"), "branch_propose/role", 1);
    let policy = ResolutionPolicy {
        allow_experimental: true,
        allow_core_override: false,
    };
    let errors = load_bundles(
        &["good".into(), "bad".into()],
        workspace.path(),
        store.path(),
        policy,
    )
    .unwrap_err();
    assert!(
        errors.iter().any(|e| e.file.ends_with("bad/role.md")),
        "{errors:?}"
    );
    assert!(
        !store.path().join("prompt-bundles").exists(),
        "nothing was copied for the good bundle"
    );
    // Alone, the good bundle is pinned.
    let pinned = load_bundles(&["good".into()], workspace.path(), store.path(), policy).unwrap();
    assert!(pinned[0].stored.is_file());
}
