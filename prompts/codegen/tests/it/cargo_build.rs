//! A real `cargo build` of a tiny section-owning crate with a broken section
//! fails, and cargo's output names the section file and line.

use std::fs;
use std::path::Path;
use std::process::Command;

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[test]
fn cargo_build_fails_naming_the_broken_section() {
    let codegen = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace_lock = codegen.join("../../Cargo.lock");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"tiny-sections\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
             [build-dependencies]\ntrellis-prompt-codegen = {{ path = {:?} }}\n\n[workspace]\n",
            codegen.display().to_string()
        ),
    );
    // Reuse the workspace's resolved versions so the build stays offline.
    fs::copy(&workspace_lock, root.join("Cargo.lock")).unwrap();
    write(&root.join("src/lib.rs"), "");
    write(
        &root.join("build.rs"),
        "fn main() { trellis_prompt_codegen::build_script(&std::path::Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"prompts\")); }\n",
    );
    write(
        &root.join("prompts/stages.toml"),
        "[coding]\ndemo = [\"role\"]\n",
    );
    write(
        &root.join("prompts/coding/demo/10_role.md"),
        "---\nid: demo/role\nversion: 1\nrole: system\nrequired: true\npriority: 1\nmax_bytes: 100\n\
         owner: t\nrationale: t\nreview: 2026-11-30\nvars: {}\n---\nHello {{missing}}.\n",
    );

    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tiny-sections-target");
    let output = build(root, &target);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the build must fail:\n{stderr}");
    assert!(
        stderr.contains("prompts/coding/demo/10_role.md:13: undeclared placeholder `{{missing}}`"),
        "cargo output must name the file and line:\n{stderr}"
    );
    // The build never writes into the source tree.
    assert!(!root.join("prompts/manifest.toml").exists());

    // Fixed section, but no committed manifest: the build names the command.
    write(
        &root.join("prompts/coding/demo/10_role.md"),
        "---\nid: demo/role\nversion: 1\nrole: system\nrequired: true\npriority: 1\nmax_bytes: 100\n\
         owner: t\nrationale: t\nreview: 2026-11-30\nvars: {}\n---\nHello.\n",
    );
    let output = build(root, &target);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("manifest is missing; run `trellis prompts manifest"),
        "{stderr}"
    );
    assert!(!root.join("prompts/manifest.toml").exists());

    // Once the manifest is generated the same crate builds.
    let library = trellis_prompt_codegen::load_library(&root.join("prompts")).unwrap();
    trellis_prompt_codegen::manifest::write_manifest(&library).unwrap();
    let output = build(root, &target);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn build(root: &Path, target: &Path) -> std::process::Output {
    Command::new(env!("CARGO"))
        .args(["build", "--offline", "--quiet"])
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("cargo runs")
}
