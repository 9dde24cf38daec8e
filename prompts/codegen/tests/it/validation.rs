//! Codegen-failure fixtures: each malformed section is refused with the exact
//! error, naming its file and line.

use std::fs;
use std::path::Path;

use trellis_prompt_codegen::{load_library, parse_section};

const HEADER: &str = "---
id: demo/tool_protocol
version: 3
role: system
required: true
priority: 90
max_bytes: 4096
owner: coding
rationale: \"test fixture\"
review: 2026-11-30
";

fn errors_of(text: &str) -> Vec<String> {
    match parse_section(Path::new("demo/20_tool_protocol.md"), text) {
        Ok(spec) => panic!("expected the section to be refused, got {spec:?}"),
        Err(errors) => errors.0.iter().map(ToString::to_string).collect(),
    }
}

fn section(vars: &str, body: &str) -> String {
    format!("{HEADER}vars:\n{vars}---\n{body}")
}

#[test]
fn accepts_a_well_formed_section() {
    let text = section(
        "  tool_names: { type: \"BoundedList<64,128>\", style: bullet_list }\n  budget_note: { type: \"Option<BoundedText<512>>\" }\n",
        "Use only these tools:\n{{tool_names}}\n{{budget_note}}\n",
    );
    let spec = parse_section(Path::new("x.md"), &text).expect("valid");
    assert_eq!(spec.id, "demo/tool_protocol");
    assert_eq!(spec.vars.len(), 2);
    assert!(spec.content_hash.starts_with("sha256:"));
}

#[test]
fn undeclared_placeholder_names_its_line() {
    let text = section(
        "  a: { type: \"BoundedText<8>\" }\n",
        "Hello {{a}}\nand {{b}} here\n",
    );
    assert_eq!(
        errors_of(&text),
        ["demo/20_tool_protocol.md:15: undeclared placeholder `{{b}}`: declare it under `vars:`"]
    );
}

#[test]
fn orphan_variable_names_its_declaration_line() {
    let text = section(
        "  a: { type: \"BoundedText<8>\" }\n  unused: { type: \"u32\" }\n",
        "Hello {{a}}\n",
    );
    assert_eq!(
        errors_of(&text),
        [
            "demo/20_tool_protocol.md:13: orphan variable `unused` is declared but never used in the body"
        ]
    );
}

#[test]
fn unbounded_string_is_refused() {
    let text = section("  a: { type: \"String\" }\n", "Hello {{a}}\n");
    assert_eq!(
        errors_of(&text),
        [
            "demo/20_tool_protocol.md:12: variable `a`: unbounded type `String` is not a section variable; \
          use BoundedText<N>, ObservationText<N> or BoundedList<COUNT, BYTES>"
        ]
    );
}

#[test]
fn unbounded_vec_is_refused() {
    let text = section(
        "  a: { type: \"Vec<String>\", style: bullet_list }\n",
        "{{a}}\n",
    );
    assert_eq!(
        errors_of(&text),
        [
            "demo/20_tool_protocol.md:12: variable `a`: unbounded type `Vec<String>` is not a section variable; \
          use BoundedText<N>, ObservationText<N> or BoundedList<COUNT, BYTES>"
        ]
    );
}

#[test]
fn unsupported_type_is_refused() {
    let text = section("  a: { type: \"bool\" }\n", "Hello {{a}}\n");
    assert_eq!(
        errors_of(&text),
        [
            "demo/20_tool_protocol.md:12: variable `a`: unsupported type `bool`; supported: BoundedText<N>, \
          ObservationText<N>, BoundedList<COUNT, BYTES>, Option<T>, u32, u64, i64, f64"
        ]
    );
}

#[test]
fn optional_placeholder_sharing_its_line_is_refused() {
    let text = section(
        "  note: { type: \"Option<BoundedText<64>>\" }\n",
        "Budget: {{note}}\n",
    );
    assert_eq!(
        errors_of(&text),
        [
            "demo/20_tool_protocol.md:14: an optional placeholder `{{note}}` must be the only content on its line, \
          because absence or block rendering replaces the whole line"
        ]
    );
}

#[test]
fn list_placeholder_sharing_its_line_is_refused() {
    let text = section(
        "  tools: { type: \"BoundedList<4,16>\", style: comma_list }\n",
        "Tools: {{tools}}.\n",
    );
    assert_eq!(
        errors_of(&text),
        [
            "demo/20_tool_protocol.md:14: a list placeholder `{{tools}}` must be the only content on its line, \
          because absence or block rendering replaces the whole line"
        ]
    );
}

#[test]
fn static_body_over_max_bytes_is_refused() {
    let text = format!(
        "{}vars: {{}}\n---\n{}\n",
        HEADER.replace("max_bytes: 4096", "max_bytes: 10"),
        "x".repeat(11)
    );
    assert_eq!(
        errors_of(&text),
        ["demo/20_tool_protocol.md:7: static body is 11 bytes, over max_bytes 10"]
    );
}

#[test]
fn missing_and_malformed_keys_are_refused() {
    let text = HEADER
        .replace("version: 3\n", "")
        .replace("role: system", "role: narrator")
        .replace("required: true", "required: yes")
        .replace("priority: 90", "priority: high");
    let text = format!("{text}vars: {{}}\n---\nBody.\n");
    assert_eq!(
        errors_of(&text),
        [
            "demo/20_tool_protocol.md:1: missing front-matter key `version`",
            "demo/20_tool_protocol.md:3: malformed role `narrator`: expected `system` or `user`",
            "demo/20_tool_protocol.md:4: malformed required `yes`: expected `true` or `false`",
            "demo/20_tool_protocol.md:5: malformed priority `high`: expected an integer 0..=65535",
        ]
    );
}

#[test]
fn malformed_id_is_refused() {
    let text = format!(
        "{}vars: {{}}\n---\nBody.\n",
        HEADER.replace("demo/tool_protocol", "ToolProtocol")
    );
    assert_eq!(
        errors_of(&text),
        ["demo/20_tool_protocol.md:2: malformed id `ToolProtocol`: expected `stage/section_name`"]
    );
}

#[test]
fn template_syntax_is_refused() {
    let text = section(
        "  a: { type: \"BoundedText<8>\" }\n",
        "{{a}}\n{{#if a}}x{{/if}}\n",
    );
    assert_eq!(
        errors_of(&text),
        [
            "demo/20_tool_protocol.md:15: malformed placeholder `{{#if a}}`: the body admits only `{{variable}}` \
          with a snake_case name (there is no template language)"
        ]
    );
}

/// A minimal library on disk: `stages.toml` plus the given files.
fn library(stages: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("stages.toml"), stages).unwrap();
    for (path, text) in files {
        let full = dir.path().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, text).unwrap();
    }
    dir
}

fn simple(id: &str) -> String {
    format!(
        "---\nid: {id}\nversion: 1\nrole: system\nrequired: true\npriority: 1\nmax_bytes: 100\n\
         owner: t\nrationale: t\nreview: 2026-11-30\nvars: {{}}\n---\nBody of {id}.\n"
    )
}

#[test]
fn declared_stage_lacking_a_base_section_is_refused() {
    let dir = library(
        "[coding]\ndemo = [\"role\", \"tool_protocol\"]\n",
        &[("coding/demo/10_role.md", &simple("demo/role"))],
    );
    let errors = load_library(dir.path()).expect_err("missing base").0;
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].file, dir.path().join("stages.toml"));
    assert_eq!(errors[0].line, 2);
    assert_eq!(
        errors[0].message,
        "stage `demo` declares section `tool_protocol` but has no base section file \
         `coding/demo/NN_tool_protocol.md`"
    );
}

#[test]
fn override_without_its_base_schema_is_refused() {
    let override_text = simple("demo/role").replace(
        "vars: {}\n---\nBody of demo/role.",
        "vars:\n  x: { type: \"u32\" }\n---\nBody {{x}}.",
    );
    let dir = library(
        "[coding]\ndemo = [\"role\"]\n",
        &[
            ("coding/demo/10_role.md", &simple("demo/role")),
            ("coding/demo/10_role.qwen.md", &override_text),
        ],
    );
    let errors = load_library(dir.path()).expect_err("schema mismatch").0;
    assert_eq!(errors.len(), 1);
    assert!(errors[0].file.ends_with("coding/demo/10_role.qwen.md"));
    assert_eq!(
        errors[0].message,
        "override must keep its base's schema: base has `role=system required=true priority=1 vars=[]`, \
         override has `role=system required=true priority=1 vars=[x: u32]`"
    );
}

#[test]
fn id_must_match_file_location() {
    let dir = library(
        "[coding]\ndemo = [\"role\"]\n",
        &[("coding/demo/10_role.md", &simple("demo/other"))],
    );
    let errors = load_library(dir.path()).expect_err("id mismatch").0;
    assert_eq!(
        errors[0].message,
        "id `demo/other` does not match its location; expected `demo/role`"
    );
    assert_eq!(errors[0].line, 2);
}

#[test]
fn stale_manifest_names_the_command() {
    let dir = library(
        "[coding]\ndemo = [\"role\"]\n",
        &[("coding/demo/10_role.md", &simple("demo/role"))],
    );
    let library = load_library(dir.path()).unwrap();
    trellis_prompt_codegen::manifest::write_manifest(&library).unwrap();
    assert!(trellis_prompt_codegen::manifest::check_manifest(&library).is_ok());

    fs::write(
        dir.path().join("coding/demo/10_role.md"),
        simple("demo/role").replace("Body of", "New body of"),
    )
    .unwrap();
    let library = load_library(dir.path()).unwrap();
    let error = trellis_prompt_codegen::manifest::check_manifest(&library).expect_err("stale");
    assert!(error.file.ends_with("manifest.toml"));
    assert!(
        error.message.contains("manifest is stale")
            && error.message.contains("trellis prompts manifest"),
        "{error}"
    );
}
