//! End-to-end tests of `trellis prompts …`: the built binary, run in the
//! Trellis source tree for the commands that edit library sources, and in
//! empty temp dirs to show which commands work anywhere on the built-in
//! library and which refuse, naming what they need.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Trellis source tree: the directory that holds `prompts/`.
fn source_tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `trellis prompts <args>` with `dir` as the current directory and no user
/// configuration.
fn prompts(dir: &Path, args: &[&str]) -> Run {
    let config = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_trellis"))
        .arg("prompts")
        .args(args)
        .current_dir(dir)
        .env("XDG_CONFIG_HOME", config.path())
        .env("TRELLIS_CACHE_DIR", config.path().join("cache"))
        .output()
        .unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// The files under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walk(dir)
        .into_iter()
        .map(|p| p.strip_prefix(dir).unwrap().to_path_buf())
        .collect();
    files.sort();
    files
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

#[test]
fn list_shows_every_section_with_override_state() {
    let run = prompts(&source_tree(), &["list"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout.lines().count(),
        1 + trellis_prompts::sections::ALL_SECTIONS.len()
    );
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("branch_correct/tool_protocol "))
        .unwrap();
    assert!(
        line.contains("qwen:experimental") && line.contains("sha256:"),
        "{line}"
    );
}

#[test]
fn render_shows_the_drop_set_under_a_tight_budget() {
    let run = prompts(
        &source_tree(),
        &[
            "render",
            "branch_correct",
            "--route",
            "scripted/qwen/qwen3-coder",
            "--budget",
            "1600",
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let out = &run.stdout;
    assert!(out.contains("json_single_slot_v1"), "{out}");
    assert!(
        out.contains("dropped: branch_correct/repository_hints"),
        "{out}"
    );
    assert!(out.contains("program digest: sha256:"));
}

#[test]
fn render_reads_variables_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let vars = dir.path().join("vars.json");
    fs::write(&vars, r#"{ "branch_correct/correction": { "packet": "error[E0432]: unresolved import `crate::parser`" } }"#).unwrap();
    let run = prompts(
        &source_tree(),
        &[
            "render",
            "branch-correct",
            "--route",
            "scripted/anthropic",
            "--vars",
            vars.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stdout
            .contains("error\\[E0432\\]: unresolved import `crate::parser`"),
        "{}",
        run.stdout
    );

    fs::write(&vars, r#"{ "branch_correct/correction": { "packet": 7 } }"#).unwrap();
    let run = prompts(
        &source_tree(),
        &[
            "render",
            "branch_correct",
            "--route",
            "a/b",
            "--vars",
            vars.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("vars.json")
            && run.stderr.contains("`branch_correct/correction`.`packet`"),
        "{}",
        run.stderr
    );
}

#[test]
fn render_refuses_an_unknown_stage_and_an_infeasible_budget() {
    let run = prompts(&source_tree(), &["render", "nonsense", "--route", "a/b"]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.starts_with("error: unknown stage `nonsense`"),
        "{}",
        run.stderr
    );
    let run = prompts(
        &source_tree(),
        &[
            "render",
            "branch_correct",
            "--route",
            "a/b",
            "--budget",
            "10",
        ],
    );
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("required sections alone need"),
        "{}",
        run.stderr
    );
}

#[test]
fn diff_compares_base_and_override() {
    let run = prompts(
        &source_tree(),
        &[
            "diff",
            "branch_correct/tool_protocol",
            "branch_correct/tool_protocol@qwen",
        ],
    );
    assert_eq!(run.code, Some(1), "bodies differ: {}", run.stderr);
    assert!(
        run.stdout.contains("+Work in this order every turn."),
        "{}",
        run.stdout
    );
}

#[test]
fn lint_accepts_the_committed_library() {
    let run = prompts(&source_tree(), &["lint"]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("manifest fresh"));
}

#[test]
fn lint_names_the_file_and_line_of_a_bad_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    fs::create_dir_all(&bundle).unwrap();
    fs::write(
        bundle.join("role.md"),
        "---\nid: branch_correct/role\nversion: 2\nrole: system\nrequired: true\npriority: 100\nmax_bytes: 1024\n\
         owner: me\nrationale: r\nreview: 2026-11-30\nvars:\n  extra: { type: \"u32\" }\n---\nRole {{extra}}.\n",
    )
    .unwrap();
    let run = prompts(&source_tree(), &["lint", bundle.to_str().unwrap()]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr
            .contains("role.md:2: must keep the compiled schema of `branch_correct/role`"),
        "{}",
        run.stderr
    );
}

#[test]
fn evaluate_then_activate_round_trip_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("prompts");
    fs::create_dir_all(root.join("coding/branch_correct")).unwrap();
    fs::write(
        root.join("stages.toml"),
        "[coding]\nbranch_correct = [\"role\"]\n",
    )
    .unwrap();
    let section = |body: &str| {
        format!(
            "---\nid: branch_correct/role\nversion: 1\nrole: system\nrequired: true\npriority: 1\nmax_bytes: 200\n\
             owner: t\nrationale: t\nreview: 2026-11-30\nvars: {{}}\n---\n{body}\n"
        )
    };
    fs::write(
        root.join("coding/branch_correct/10_role.md"),
        section("Base."),
    )
    .unwrap();
    fs::write(
        root.join("coding/branch_correct/10_role.qwen.md"),
        section("Override."),
    )
    .unwrap();
    let run = prompts(dir.path(), &["manifest"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, "wrote ./prompts/manifest.toml\n");

    let library = trellis_prompt_codegen::load_library(&root).unwrap();
    let hash = |file: &str| {
        library
            .sections
            .iter()
            .find(|s| s.rel_path == file)
            .unwrap()
            .spec
            .content_hash
            .clone()
    };
    let tasks: Vec<serde_json::Value> = (0..40)
        .map(|i| {
            serde_json::json!({
                "task_id": format!("t{i}"),
                "baseline": { "hard_pass": i % 2 == 0, "escaped_hard_gate_regression": false, "cost": 1.0 },
                "candidate": { "hard_pass": i % 2 == 0 || i % 10 != 1, "escaped_hard_gate_regression": false, "cost": 1.0 }
            })
        })
        .collect();
    let results = serde_json::json!({
        "section_id": "branch_correct/role",
        "route": "scripted/qwen",
        "stage": "branch_correct",
        "base": { "file": "coding/branch_correct/10_role.md", "version": 1, "content_hash": hash("coding/branch_correct/10_role.md") },
        "candidate": { "file": "coding/branch_correct/10_role.qwen.md", "version": 1, "content_hash": hash("coding/branch_correct/10_role.qwen.md") },
        "baseline_manifest_digest": "sha256:a", "candidate_manifest_digest": "sha256:b",
        "benchmark_digest": "sha256:c", "model_revision": "r1", "catalog_digest": "sha256:d",
        "task_order_seed": 1, "resampling_seed": 2, "resamples": 10000,
        "noninferiority_margin": 0.0, "cost_metric": null, "budgets": {}, "reviewer": "rev",
        "tasks": tasks
    });
    let results_path = dir.path().join("paired.json");
    fs::write(&results_path, results.to_string()).unwrap();
    let run = prompts(dir.path(), &["evaluate", results_path.to_str().unwrap()]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let digest = run
        .stdout
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("change record ")
        .to_owned();

    let run = prompts(dir.path(), &["activate", &digest]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let manifest = fs::read_to_string(root.join("manifest.toml")).unwrap();
    assert!(manifest.contains("activation = \"active\"") && manifest.contains(&digest));
    // The activated library still lints clean: its record verifies.
    let run = prompts(dir.path(), &["lint"]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    // Activating an unknown digest is refused.
    let run = prompts(dir.path(), &["activate", "sha256:00"]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.starts_with("error: activation refused:"),
        "{}",
        run.stderr
    );
}

#[test]
fn explain_session_of_an_unknown_session_names_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let run = prompts(dir.path(), &["explain-session", "s-1"]);
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("no session `s-1` in") && run.stderr.contains("ledger.db"),
        "{}",
        run.stderr
    );
}

#[test]
fn built_in_library_commands_work_in_any_directory() {
    let dir = tempfile::tempdir().unwrap();
    let list = prompts(dir.path(), &["list"]);
    assert_eq!(list.code, Some(0), "{}", list.stderr);
    assert_eq!(
        list.stdout,
        prompts(&source_tree(), &["list"]).stdout,
        "the built-in library, not the directory, decides the listing"
    );
    let render = prompts(
        dir.path(),
        &["render", "branch_correct", "--route", "scripted/anthropic"],
    );
    assert_eq!(render.code, Some(0), "{}", render.stderr);
    assert!(render.stdout.contains("program digest: sha256:"));
    let diff = prompts(
        dir.path(),
        &[
            "diff",
            "branch_correct/tool_protocol",
            "branch_correct/tool_protocol@qwen",
        ],
    );
    assert_eq!(diff.code, Some(1), "{}", diff.stderr);
    assert!(tree(dir.path()).is_empty(), "{:?}", tree(dir.path()));
}

#[test]
fn source_library_commands_outside_the_source_tree_say_what_they_need() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("paired.json");
    fs::write(&results, "{}").unwrap();
    for args in [
        &["lint"][..],
        &["manifest"],
        &["evaluate", results.to_str().unwrap()],
        &["activate", "sha256:00"],
    ] {
        let run = prompts(dir.path(), args);
        assert_eq!(run.code, Some(2), "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.starts_with(&format!(
                "error: `trellis prompts {}` acts on the prompt library sources, and ./prompts/stages.toml does not exist",
                args[0]
            )) && run.stderr.contains("run it from the Trellis source tree"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
    // Refusing up front means no half library was created here.
    assert_eq!(tree(dir.path()), [PathBuf::from("paired.json")]);
    let run = prompts(dir.path(), &["lint"]);
    assert!(
        run.stderr.contains("trellis prompts lint <path>"),
        "{}",
        run.stderr
    );
}
