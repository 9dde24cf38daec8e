//! External replacement bundles: validated at start, pinned, never reread.

use crate::common;

use std::fs;
use std::path::Path;

use trellis_prompts::bundles::load_bundles;
use trellis_prompts::fixtures::default_composition;
use trellis_prompts::{
    CompileOptions, ModelDialect, ModelFamily, PromptStage, ResolutionPolicy, compile,
};

const ALLOW: ResolutionPolicy = ResolutionPolicy {
    allow_experimental: true,
    allow_core_override: false,
};

fn write_section(dir: &Path, name: &str, id: &str, priority: u16, body: &str) {
    fs::create_dir_all(dir).unwrap();
    fs::write(
        dir.join(name),
        format!(
            "---\nid: {id}\nversion: 7\nrole: system\nrequired: true\npriority: {priority}\nmax_bytes: 1024\n\
             owner: bundle\nrationale: r\nreview: 2026-11-30\nvars: {{}}\n---\n{body}\n"
        ),
    )
    .unwrap();
}

#[test]
fn a_valid_bundle_is_pinned_and_replaces_its_section() {
    let workspace = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    write_section(
        &workspace.path().join("bundle"),
        "role.md",
        "branch_correct/role",
        100,
        "Bundle role text.",
    );

    let pinned = load_bundles(&["bundle".into()], workspace.path(), store.path(), ALLOW).unwrap();
    assert_eq!(pinned.len(), 1);
    assert!(pinned[0].stored.starts_with(store.path()));
    assert!(pinned[0].stored.is_file());

    // The session never rereads the source: deleting it changes nothing.
    fs::remove_dir_all(workspace.path().join("bundle")).unwrap();
    let dialect = &ModelDialect::NATIVE_TOOLS_V1;
    let route = common::route(ModelFamily::Anthropic, None);
    let options = CompileOptions {
        replacements: &pinned,
        ..common::options(&route, dialect, u64::MAX)
    };
    let program = compile(
        &default_composition(PromptStage::BranchCorrect, dialect),
        &options,
    )
    .unwrap();
    assert_eq!(program.messages[0].content, "Bundle role text.");
    let role = program.sections().next().unwrap();
    assert_eq!(
        (role.origin.as_str(), role.version, role.experimental),
        ("bundle", 7, true)
    );
}

#[test]
fn gate_y_bundle_replacing_an_unknown_section_fails() {
    let workspace = tempfile::tempdir().unwrap();
    write_section(
        &workspace.path().join("bundle"),
        "new.md",
        "branch_correct/brand_new",
        1,
        "New.",
    );
    let errors = load_bundles(
        &["bundle".into()],
        workspace.path(),
        workspace.path(),
        ALLOW,
    )
    .unwrap_err();
    assert!(
        errors[0]
            .to_string()
            .contains("new.md:2: replaces unknown section `branch_correct/brand_new`"),
        "{}",
        errors[0]
    );
}

#[test]
fn bundles_need_the_experimental_flag_and_platform_needs_the_core_flag() {
    let workspace = tempfile::tempdir().unwrap();
    write_section(
        &workspace.path().join("b"),
        "role.md",
        "branch_correct/role",
        100,
        "X.",
    );
    let errors = load_bundles(
        &["b".into()],
        workspace.path(),
        workspace.path(),
        ResolutionPolicy::default(),
    )
    .unwrap_err();
    assert!(errors[0].reason.contains("--allow-experimental-prompts"));

    write_section(
        &workspace.path().join("p"),
        "role.md",
        "graph_plan/role",
        100,
        "X.",
    );
    let errors =
        load_bundles(&["p".into()], workspace.path(), workspace.path(), ALLOW).unwrap_err();
    assert!(errors[0].reason.contains("--allow-core-prompt-override"));
    let both = ResolutionPolicy {
        allow_experimental: true,
        allow_core_override: true,
    };
    assert!(load_bundles(&["p".into()], workspace.path(), workspace.path(), both).is_ok());
}

#[test]
fn bundle_must_keep_the_compiled_priority_and_schema() {
    let workspace = tempfile::tempdir().unwrap();
    write_section(
        &workspace.path().join("b"),
        "role.md",
        "branch_correct/role",
        5,
        "X.",
    );
    let errors =
        load_bundles(&["b".into()], workspace.path(), workspace.path(), ALLOW).unwrap_err();
    assert!(
        errors[0].reason.contains("must keep the compiled schema"),
        "{}",
        errors[0]
    );
}
