//! The `trellis prompts` surface, driven exactly as the binary will drive it.

mod common;

use std::fs;
use std::path::Path;

use clap::Parser;
use trellis_prompts::fixtures::default_composition;
use trellis_prompts::{
    ModelDialect, ModelFamily, ProgramRecord, PromptStage, PromptsCommand, PromptsError, compile,
    explain_session, run, run_with_records,
};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: PromptsCommand,
}

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn run_args(args: &[&str], workspace: &Path) -> (Result<i32, PromptsError>, String) {
    let cli = Cli::try_parse_from(std::iter::once("prompts").chain(args.iter().copied()))
        .expect("arguments parse");
    let mut out = Vec::new();
    let status = run(cli.cmd, workspace, &mut out);
    (status, String::from_utf8(out).unwrap())
}

#[test]
fn list_shows_every_section_with_override_state() {
    let (status, out) = run_args(&["list"], repo_root());
    assert_eq!(status.unwrap(), 0);
    assert_eq!(
        out.lines().count(),
        1 + trellis_prompts::sections::ALL_SECTIONS.len()
    );
    let line = out
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
    let (status, out) = run_args(
        &[
            "render",
            "branch_correct",
            "--route",
            "scripted/qwen/qwen3-coder",
            "--budget",
            "1600",
        ],
        repo_root(),
    );
    assert_eq!(status.unwrap(), 0);
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
    let (status, out) = run_args(
        &[
            "render",
            "branch-correct",
            "--route",
            "scripted/anthropic",
            "--vars",
            vars.to_str().unwrap(),
        ],
        repo_root(),
    );
    assert_eq!(status.unwrap(), 0);
    assert!(
        out.contains("error\\[E0432\\]: unresolved import `crate::parser`"),
        "{out}"
    );

    fs::write(&vars, r#"{ "branch_correct/correction": { "packet": 7 } }"#).unwrap();
    let (status, _) = run_args(
        &[
            "render",
            "branch_correct",
            "--route",
            "a/b",
            "--vars",
            vars.to_str().unwrap(),
        ],
        repo_root(),
    );
    let error = status.unwrap_err().to_string();
    assert!(
        error.contains("vars.json") && error.contains("`branch_correct/correction`.`packet`"),
        "{error}"
    );
}

#[test]
fn render_refuses_an_unknown_stage_and_an_infeasible_budget() {
    let (status, _) = run_args(&["render", "nonsense", "--route", "a/b"], repo_root());
    assert!(
        status
            .unwrap_err()
            .to_string()
            .starts_with("unknown stage `nonsense`")
    );
    let (status, _) = run_args(
        &[
            "render",
            "branch_correct",
            "--route",
            "a/b",
            "--budget",
            "10",
        ],
        repo_root(),
    );
    assert!(
        status
            .unwrap_err()
            .to_string()
            .contains("required sections alone need")
    );
}

#[test]
fn diff_compares_base_and_override() {
    let (status, out) = run_args(
        &[
            "diff",
            "branch_correct/tool_protocol",
            "branch_correct/tool_protocol@qwen",
        ],
        repo_root(),
    );
    assert_eq!(status.unwrap(), 1, "bodies differ");
    assert!(out.contains("+Work in this order every turn."), "{out}");
}

#[test]
fn lint_accepts_the_committed_library() {
    let (status, out) = run_args(&["lint"], repo_root());
    assert_eq!(status.unwrap(), 0, "{out}");
    assert!(out.contains("manifest fresh"));
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
    let (status, _) = run_args(&["lint", bundle.to_str().unwrap()], repo_root());
    let error = status.unwrap_err().to_string();
    assert!(
        error.contains("role.md:2: must keep the compiled schema of `branch_correct/role`"),
        "{error}"
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
    let (status, _) = run_args(&["manifest"], dir.path());
    assert_eq!(status.unwrap(), 0);

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
    let (status, out) = run_args(&["evaluate", results_path.to_str().unwrap()], dir.path());
    assert_eq!(status.unwrap(), 0, "{out}");
    let digest = out
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("change record ")
        .to_owned();

    let (status, out) = run_args(&["activate", &digest], dir.path());
    assert_eq!(status.unwrap(), 0, "{out}");
    let manifest = fs::read_to_string(root.join("manifest.toml")).unwrap();
    assert!(manifest.contains("activation = \"active\"") && manifest.contains(&digest));
    // The activated library still lints clean: its record verifies.
    let (status, out) = run_args(&["lint"], dir.path());
    assert_eq!(status.unwrap(), 0, "{out}");
    // Activating an unknown digest is refused.
    let (status, _) = run_args(&["activate", "sha256:00"], dir.path());
    assert!(matches!(status, Err(PromptsError::ActivationRefused(_))));
}

#[test]
fn explain_session_reports_recorded_programs() {
    let dialect = &ModelDialect::NATIVE_TOOLS_V1;
    let route = common::route(ModelFamily::Anthropic, Some("claude-x"));
    let composition = default_composition(PromptStage::BranchCorrect, dialect);
    let options = common::options(&route, dialect, 1_200);
    let program = compile(&composition, &options).unwrap();
    let record = ProgramRecord::new("s-42", &composition, &options, &program, None);

    let mut out = Vec::new();
    let cli = Cli::try_parse_from(["prompts", "explain-session", "s-42"]).unwrap();
    let status = run_with_records(cli.cmd, repo_root(), &mut out, |id| {
        assert_eq!(id, "s-42");
        Ok(vec![record.clone()])
    });
    assert_eq!(status.unwrap(), 0);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(&program.program_digest));
    assert!(text.contains("branch_correct/role@1 [base]"));
    assert!(
        text.contains("dropped: branch_correct/repository_hints"),
        "{text}"
    );

    // A section this build cannot reconstruct, or a missing digest, fails.
    let mut foreign = record.clone();
    foreign.sections[0].content_hash = "sha256:elsewhere".into();
    foreign.program_digest.clear();
    let mut out = Vec::new();
    assert_eq!(explain_session(&[foreign], &mut out).unwrap(), 1);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("program digest: MISSING") && text.contains("NOT in this build"));
    assert!(text.contains("reconstruction: FAILED"), "{text}");

    // Without a ledger reader the command says what it needs.
    let (status, _) = run_args(&["explain-session", "s-1"], repo_root());
    assert!(matches!(status, Err(PromptsError::LedgerRequired(id)) if id == "s-1"));
}
