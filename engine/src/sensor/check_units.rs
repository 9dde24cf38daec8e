//! What `cargo check --workspace --all-targets` compiles, so that one
//! `cargo test` run can stand in for it.
//!
//! A measurement runs the build stage (`cargo check`), then the test stage
//! (`cargo test`), whose build compiles the workspace's targets again, with
//! code generation. rustc reports the same diagnostics for a compilation
//! whether or not it goes on to generate code (code generation can only add
//! errors), so once a test build has succeeded having compiled, in the same
//! mode, every compilation the check would make, the check could only
//! repeat what the test build printed. The build stage is then decided by
//! the test run ([`crate::measure`]), and a branch is measured by one cargo
//! run instead of two.
//!
//! The check's compilations are modelled from `cargo metadata` and the
//! members' manifests, and only ever over-estimated. A compilation listed
//! that the check does not make costs a check run (the test build does not
//! make it either); one missed would hide its diagnostics. So every library
//! and binary is expected as itself and as a test (a check compiles it as a
//! test for `--benches` even when it says `test = false`), every integration
//! test and bench as a test, every build script as itself, and an example
//! as itself and, when its manifest entry sets `test` or `bench`, as a test.
//!
//! The same model says what a failed check did not reach: with
//! `--keep-going` cargo compiles every target it can, so a workspace target
//! the run neither compiled nor reported on is one that something it
//! depends on kept from building, and its own errors are missing from the
//! measurement (`StageReport::unchecked`, compared by `search::coverage`).
//!
//! # Architecture invariant
//!
//! A build stage is decided by a test run only when that run's build
//! succeeded and covered this model, and then says what the check says
//! (`sensors::a_test_run_that_compiled_every_checked_target_decides_the_build_as_the_check_would`);
//! a bench the test build never compiles keeps a branch's check running
//! (`implied_stages::a_bench_the_tests_never_build_keeps_the_branchs_check_running`).
//!
//! The other way round, a test stage a library error decides is reported failed
//! without running
//! (`implied_stages::a_test_stage_that_a_library_error_decides_is_reported_failed_without_running`;
//! control `a_bench_error_leaves_the_test_stage_to_run`), and a branch's build
//! decided by its test build checks as measured once written
//! (`a_branchs_build_stage_is_decided_by_its_test_build_and_the_written_repair_checks_as_measured`);
//! a test run decides no build it did not cover
//! (`sensors::a_test_run_decides_no_build_it_did_not_cover`).

use std::collections::BTreeSet;
use std::path::Path;

use cargo_metadata::{Metadata, Target, TargetKind};

use super::rustc_json::{Compilation, TargetId, WorkspacePaths};

/// The compilations of `cargo check --workspace --all-targets` on the
/// workspace `metadata` (the output of `cargo metadata --no-deps
/// --format-version 1`) describes, named by `paths`. `None` when a target
/// cannot be modelled: an unknown kind, a source outside the workspace, a
/// manifest that cannot be read.
pub(super) fn check_compilations(
    metadata: &str,
    paths: &mut WorkspacePaths,
) -> Option<BTreeSet<Compilation>> {
    let metadata: Metadata = serde_json::from_str(metadata).ok()?;
    let mut expected = BTreeSet::new();
    for package in metadata
        .packages
        .iter()
        .filter(|package| metadata.workspace_members.contains(&package.id))
    {
        let tested_examples = examples_compiled_as_tests(package.manifest_path.as_std_path())?;
        for target in &package.targets {
            let source = paths.relative(target.src_path.as_str())?;
            let modes: &[bool] = match role(target)? {
                Role::Crate => &[false, true],
                Role::Test => &[true],
                Role::BuildScript => &[false],
                Role::Example if target.test || tested_examples.contains(&target.name) => {
                    &[false, true]
                }
                Role::Example => &[false],
            };
            expected.extend(modes.iter().map(|&test| Compilation {
                source: source.clone(),
                target: target.name.clone(),
                test,
            }));
        }
    }
    Some(expected)
}

/// A workspace target, by what cargo's messages name it by, and the name a
/// person knows it by (see [`StageReport::unchecked`](super::StageReport::unchecked)).
pub(super) struct WorkspaceTarget {
    id: TargetId,
    label: String,
}

/// Every target of the workspace's members in `metadata` (as
/// [`check_compilations`] reads it), named by `paths`. `None` when the
/// metadata cannot be read or a source is outside the workspace.
pub(super) fn workspace_targets(
    metadata: &str,
    paths: &mut WorkspacePaths,
) -> Option<Vec<WorkspaceTarget>> {
    let metadata: Metadata = serde_json::from_str(metadata).ok()?;
    let mut targets = Vec::new();
    for package in metadata
        .packages
        .iter()
        .filter(|package| metadata.workspace_members.contains(&package.id))
    {
        for target in &package.targets {
            let label = if role(target) == Some(Role::Crate) && !target.is_bin() {
                package.name.to_string()
            } else {
                let kind = target
                    .kind
                    .first()
                    .map_or_else(|| "target".to_owned(), ToString::to_string);
                format!("{} {kind} {}", package.name, target.name)
            };
            let id = (
                paths.relative(target.src_path.as_str())?,
                target.name.clone(),
            );
            targets.push(WorkspaceTarget { id, label });
        }
    }
    Some(targets)
}

/// The labels of the `targets` whose id `selected`, sorted and distinct.
pub(super) fn labels(
    targets: &[WorkspaceTarget],
    selected: impl Fn(&TargetId) -> bool,
) -> Vec<String> {
    let labels: BTreeSet<&str> = targets
        .iter()
        .filter(|target| selected(&target.id))
        .map(|target| target.label.as_str())
        .collect();
    labels.into_iter().map(str::to_owned).collect()
}

/// How a check compiles a target, by its kind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A library or binary: as itself, and as a test.
    Crate,
    /// An integration test or bench: as a test only.
    Test,
    BuildScript,
    Example,
}

/// The role of `target`; `None` for a kind this model does not know, or
/// kinds that disagree.
fn role(target: &Target) -> Option<Role> {
    let mut roles = target.kind.iter().map(|kind| match kind {
        TargetKind::Lib
        | TargetKind::RLib
        | TargetKind::DyLib
        | TargetKind::CDyLib
        | TargetKind::StaticLib
        | TargetKind::ProcMacro
        | TargetKind::Bin => Some(Role::Crate),
        TargetKind::Test | TargetKind::Bench => Some(Role::Test),
        TargetKind::CustomBuild => Some(Role::BuildScript),
        TargetKind::Example => Some(Role::Example),
        _ => None,
    });
    let first = roles.next()??;
    roles.all(|role| role == Some(first)).then_some(first)
}

/// The examples the manifest at `manifest` declares with `test = true` or
/// `bench = true`, which a check compiles as tests too (`cargo metadata`
/// shows `test`, never `bench`). `None` when the manifest cannot be read.
fn examples_compiled_as_tests(manifest: &Path) -> Option<BTreeSet<String>> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let manifest: toml::Table = toml::from_str(&text).ok()?;
    let Some(examples) = manifest.get("example") else {
        return Some(BTreeSet::new());
    };
    let mut tested = BTreeSet::new();
    for example in examples.as_array()? {
        let example = example.as_table()?;
        let set = |key: &str| example.get(key).and_then(toml::Value::as_bool) == Some(true);
        if set("test") || set("bench") {
            tested.insert(example.get("name")?.as_str()?.to_owned());
        }
    }
    Some(tested)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::workspace_path::WorkspacePath;

    fn target(kind: &str, name: &str, src: &str, test: bool) -> serde_json::Value {
        json!({
            "kind": [kind], "crate_types": ["lib"], "name": name, "src_path": src,
            "edition": "2024", "doc": true, "doctest": false, "test": test
        })
    }

    /// A package `demo` at `dir` with `targets`, as `cargo metadata --no-deps`
    /// prints it.
    fn metadata(dir: &Path, targets: Vec<serde_json::Value>) -> String {
        let id = format!("path+file://{}#demo@0.1.0", dir.display());
        json!({
            "packages": [{
                "name": "demo", "version": "0.1.0", "id": id, "license": null,
                "license_file": null, "description": null, "source": null,
                "dependencies": [], "targets": targets, "features": {},
                "manifest_path": dir.join("Cargo.toml"), "metadata": null,
                "publish": null, "authors": [], "categories": [], "keywords": [],
                "readme": null, "repository": null, "homepage": null,
                "documentation": null, "edition": "2024", "links": null,
                "default_run": null, "rust_version": null
            }],
            "workspace_members": [id],
            "workspace_default_members": [id],
            "resolve": null,
            "target_directory": dir.join("target"),
            "version": 1,
            "workspace_root": dir,
            "metadata": null
        })
        .to_string()
    }

    fn workspace(manifest_tail: &str, files: &[&str]) -> (tempfile::TempDir, WorkspacePaths) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Cargo.toml"),
            format!("[package]\nname = \"demo\"\n{manifest_tail}"),
        )
        .unwrap();
        for file in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        (dir, paths)
    }

    fn shown(compilations: &BTreeSet<Compilation>) -> Vec<String> {
        compilations
            .iter()
            .map(|c| {
                format!(
                    "{} {}{}",
                    c.source,
                    c.target,
                    if c.test { " test" } else { "" }
                )
            })
            .collect()
    }

    #[test]
    fn every_target_is_expected_in_each_mode_a_check_may_compile_it_in() {
        let tail = "[[example]]\nname = \"benched\"\nbench = true\n";
        let files = [
            "src/lib.rs",
            "src/main.rs",
            "tests/it.rs",
            "benches/b.rs",
            "examples/plain.rs",
            "examples/benched.rs",
            "build.rs",
        ];
        let (dir, mut paths) = workspace(tail, &files);
        let at = |file: &str| dir.path().join(file).display().to_string();
        let targets = vec![
            // `test = false` still gets a test-mode check (for `--benches`).
            target("lib", "demo", &at("src/lib.rs"), false),
            target("bin", "demo", &at("src/main.rs"), true),
            target("test", "it", &at("tests/it.rs"), true),
            target("bench", "b", &at("benches/b.rs"), false),
            target("example", "plain", &at("examples/plain.rs"), false),
            target("example", "benched", &at("examples/benched.rs"), false),
            target("custom-build", "build-script-build", &at("build.rs"), false),
        ];
        let expected = check_compilations(&metadata(dir.path(), targets), &mut paths).unwrap();
        assert_eq!(
            shown(&expected),
            [
                "benches/b.rs b test",
                "build.rs build-script-build",
                "examples/benched.rs benched",
                "examples/benched.rs benched test",
                "examples/plain.rs plain",
                "src/lib.rs demo",
                "src/lib.rs demo test",
                "src/main.rs demo",
                "src/main.rs demo test",
                "tests/it.rs it test",
            ]
        );
    }

    #[test]
    fn a_target_it_cannot_model_leaves_the_check_to_run() {
        let (dir, mut paths) = workspace("", &["src/lib.rs"]);
        let at = dir.path().join("src/lib.rs").display().to_string();
        let unknown = target("something-new", "demo", &at, true);
        assert!(check_compilations(&metadata(dir.path(), vec![unknown]), &mut paths).is_none());
        let outside = target("lib", "demo", "/nonexistent/src/lib.rs", true);
        assert!(check_compilations(&metadata(dir.path(), vec![outside]), &mut paths).is_none());
        assert!(check_compilations("{\"packages\": 3}", &mut paths).is_none());
    }

    /// A failed check that reached the library (it reported its error) and
    /// nothing else: the test and the binary, which need the library, are
    /// named by package and kind; the library by its package.
    #[test]
    fn targets_are_named_by_their_package_and_kind() {
        let files = ["src/lib.rs", "src/main.rs", "tests/it.rs"];
        let (dir, mut paths) = workspace("", &files);
        let at = |file: &str| dir.path().join(file).display().to_string();
        let targets = vec![
            target("lib", "demo", &at("src/lib.rs"), true),
            target("bin", "demo", &at("src/main.rs"), true),
            target("test", "it", &at("tests/it.rs"), true),
        ];
        let targets = workspace_targets(&metadata(dir.path(), targets), &mut paths).unwrap();
        let library = (WorkspacePath::new("src/lib.rs").unwrap(), "demo".to_owned());
        assert_eq!(
            labels(&targets, |id| *id != library),
            ["demo bin demo", "demo test it"]
        );
        assert_eq!(labels(&targets, |id| *id == library), ["demo"]);
    }
}
