//! Gate AE: one fixture per activation condition, each refusing activation,
//! plus the passing control that proves the refusals are specific.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use trellis_prompt_codegen::manifest::{self, ActivationState};
use trellis_prompt_codegen::{Library, load_library};
use trellis_prompts::activation::{
    ArmOutcome, Decision, PairedResults, PairedTask, PromptsConfig, SectionIdentity, activate,
    evaluate, verify_activations, write_record,
};

fn section(id: &str, body: &str) -> String {
    format!(
        "---\nid: {id}\nversion: 1\nrole: system\nrequired: true\npriority: 1\nmax_bytes: 200\n\
         owner: t\nrationale: t\nreview: 2026-11-30\nvars: {{}}\n---\n{body}\n"
    )
}

/// A one-section library with an experimental qwen override and a manifest.
fn fixture_library() -> (tempfile::TempDir, Library) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::write(
        root.join("stages.toml"),
        "[coding]\nbranch_correct = [\"role\"]\n",
    )
    .unwrap();
    fs::create_dir_all(root.join("coding/branch_correct")).unwrap();
    fs::write(
        root.join("coding/branch_correct/10_role.md"),
        section("branch_correct/role", "Base text."),
    )
    .unwrap();
    fs::write(
        root.join("coding/branch_correct/10_role.qwen.md"),
        section("branch_correct/role", "Override text."),
    )
    .unwrap();
    let library = load_library(root).unwrap();
    manifest::write_manifest(&library).unwrap();
    (dir, library)
}

fn identity(library: &Library, file: &str) -> SectionIdentity {
    let s = library
        .sections
        .iter()
        .find(|s| s.rel_path == file)
        .unwrap();
    SectionIdentity {
        file: file.to_owned(),
        version: s.spec.version,
        content_hash: s.spec.content_hash.clone(),
    }
}

/// 40 paired tasks where the candidate passes 34 and the baseline 20.
fn passing_results(library: &Library) -> PairedResults {
    let arm = |pass: bool, cost: f64| ArmOutcome {
        hard_pass: pass,
        escaped_hard_gate_regression: false,
        cost,
    };
    PairedResults {
        section_id: "branch_correct/role".into(),
        route: "scripted/qwen/qwen3-coder".into(),
        stage: "branch_correct".into(),
        base: identity(library, "coding/branch_correct/10_role.md"),
        candidate: identity(library, "coding/branch_correct/10_role.qwen.md"),
        baseline_manifest_digest: "sha256:baseline".into(),
        candidate_manifest_digest: "sha256:candidate".into(),
        benchmark_digest: "sha256:corpus".into(),
        model_revision: "qwen3-coder@2026-10".into(),
        catalog_digest: "sha256:catalog".into(),
        task_order_seed: 11,
        resampling_seed: Some(20_261_130),
        resamples: 10_000,
        noninferiority_margin: 0.02,
        cost_metric: None,
        budgets: BTreeMap::from([("turns".to_owned(), 12), ("tokens".to_owned(), 200_000)]),
        reviewer: "reviewer@example.invalid".into(),
        tasks: (0..40)
            .map(|i| PairedTask {
                task_id: format!("task-{i:02}"),
                baseline: arm(i % 2 == 0, 1.0),
                candidate: arm(i % 2 == 0 || i % 10 != 1, 1.0),
            })
            .collect(),
    }
}

fn refusal(results: PairedResults, config: &PromptsConfig) -> Vec<String> {
    match evaluate(results, config).decision {
        Decision::Refuse(reasons) => reasons,
        Decision::Activate => panic!("activation must be refused"),
    }
}

/// Stores the record and tries to activate it: must fail, manifest untouched.
fn assert_activation_refused(
    dir: &Path,
    library: &Library,
    results: PairedResults,
    config: &PromptsConfig,
) {
    let before = fs::read_to_string(dir.join("manifest.toml")).unwrap();
    let record = evaluate(results, config);
    write_record(dir, &record).unwrap();
    assert!(activate(library, &record.record_digest).is_err());
    assert_eq!(
        fs::read_to_string(dir.join("manifest.toml")).unwrap(),
        before
    );
}

#[test]
fn gate_ae_passing_evidence_activates_and_binds_the_manifest() {
    let (dir, library) = fixture_library();
    let record = evaluate(passing_results(&library), &PromptsConfig::default());
    assert_eq!(record.decision, Decision::Activate, "{:?}", record.metrics);
    assert!(record.metrics.hard_pass_difference.unwrap().lower > 0.0);
    write_record(dir.path(), &record).unwrap();
    assert_eq!(
        activate(&library, &record.record_digest).unwrap(),
        "coding/branch_correct/10_role.qwen.md"
    );

    let text = fs::read_to_string(dir.path().join("manifest.toml")).unwrap();
    let m = manifest::parse_manifest(Path::new("manifest.toml"), &text).unwrap();
    let entry = m.entry("coding/branch_correct/10_role.qwen.md").unwrap();
    assert_eq!(entry.activation, Some(ActivationState::Active));
    assert_eq!(
        entry.change_record.as_deref(),
        Some(record.record_digest.as_str())
    );
    assert!(verify_activations(&library, &m).is_empty());
    // The activated manifest is what the build accepts.
    assert!(manifest::check_manifest(&library).is_ok());
}

#[test]
fn gate_ae_sample_floor_refuses_fewer_than_30_tasks() {
    let (dir, library) = fixture_library();
    let mut results = passing_results(&library);
    results.tasks.truncate(29);
    assert!(
        refusal(results.clone(), &PromptsConfig::default())[0]
            .starts_with("sample floor: 29 paired tasks")
    );
    assert_activation_refused(dir.path(), &library, results, &PromptsConfig::default());
}

#[test]
fn gate_ae_new_escaped_regression_refuses() {
    let (dir, library) = fixture_library();
    let mut results = passing_results(&library);
    results.tasks[3].candidate.escaped_hard_gate_regression = true;
    assert_eq!(
        refusal(results.clone(), &PromptsConfig::default()),
        ["safety: 1 new escaped hard-gate regression(s)"]
    );
    assert_activation_refused(dir.path(), &library, results, &PromptsConfig::default());
}

#[test]
fn gate_ae_noninferiority_failure_refuses() {
    let (dir, library) = fixture_library();
    let mut results = passing_results(&library);
    // The candidate now loses ten tasks the baseline passed.
    for task in results
        .tasks
        .iter_mut()
        .filter(|t| t.baseline.hard_pass)
        .take(10)
    {
        task.candidate.hard_pass = false;
    }
    for task in results.tasks.iter_mut().filter(|t| !t.baseline.hard_pass) {
        task.candidate.hard_pass = false;
    }
    let reasons = refusal(results.clone(), &PromptsConfig::default());
    assert!(reasons[0].starts_with("noninferiority:"), "{reasons:?}");
    assert_activation_refused(dir.path(), &library, results, &PromptsConfig::default());
}

#[test]
fn gate_ae_missing_benefit_refuses_and_cost_benefit_suffices() {
    let (dir, library) = fixture_library();
    let mut results = passing_results(&library);
    for task in &mut results.tasks {
        task.candidate = task.baseline;
    }
    let reasons = refusal(results.clone(), &PromptsConfig::default());
    assert!(
        reasons[0].starts_with("benefit:") && reasons[0].contains("no cost metric"),
        "{reasons:?}"
    );
    assert_activation_refused(
        dir.path(),
        &library,
        results.clone(),
        &PromptsConfig::default(),
    );

    // Equal pass rates but a predeclared, clearly lower cost: benefit holds.
    results.cost_metric = Some("normalized_tokens".into());
    for task in &mut results.tasks {
        task.candidate.cost = 0.7;
    }
    assert_eq!(
        evaluate(results, &PromptsConfig::default()).decision,
        Decision::Activate
    );
}

#[test]
fn gate_ae_configuration_bounds_refuse() {
    let (dir, library) = fixture_library();
    let lowered = PromptsConfig {
        activation_min_tasks: 20,
        ..PromptsConfig::default()
    };
    assert!(refusal(passing_results(&library), &lowered)[0].contains("below the floor of 30"));
    let loose = PromptsConfig {
        noninferiority_margin: 0.06,
        ..PromptsConfig::default()
    };
    assert!(refusal(passing_results(&library), &loose)[0].contains("outside [0, 0.05]"));
    let mut wide_margin = passing_results(&library);
    wide_margin.noninferiority_margin = 0.08;
    assert!(
        refusal(wide_margin.clone(), &PromptsConfig::default())[0].starts_with("margin: ε = 0.08")
    );
    assert_activation_refused(dir.path(), &library, wide_margin, &PromptsConfig::default());

    // Invalid configuration fails when it is loaded, naming the file.
    fs::write(
        dir.path().join("trellis.toml"),
        "[prompts]\nactivation_min_tasks = 10\n",
    )
    .unwrap();
    let (path, reason) = PromptsConfig::load(dir.path()).unwrap_err();
    assert!(path.ends_with("trellis.toml"));
    assert!(reason.contains("activation_min_tasks = 10"), "{reason}");
    fs::write(
        dir.path().join("trellis.toml"),
        "[prompts]\nactivation_min_tasks = 50\nnoninferiority_margin = 0.01\n",
    )
    .unwrap();
    let raised = PromptsConfig::load(dir.path()).unwrap();
    assert_eq!(
        (raised.activation_min_tasks, raised.noninferiority_margin),
        (50, 0.01)
    );
    assert!(
        refusal(passing_results(&library), &raised)[0]
            .starts_with("sample floor: 40 paired tasks, at least 50")
    );
}

#[test]
fn gate_ae_resampling_seed_and_count_are_enforced() {
    let (dir, library) = fixture_library();
    let mut unseeded = passing_results(&library);
    unseeded.resampling_seed = None;
    assert_eq!(
        refusal(unseeded.clone(), &PromptsConfig::default()),
        ["resampling: no resampling seed was recorded"]
    );
    assert_activation_refused(dir.path(), &library, unseeded, &PromptsConfig::default());

    let mut fewer = passing_results(&library);
    fewer.resamples = 2_000;
    assert!(
        refusal(fewer.clone(), &PromptsConfig::default())[0].contains("requires exactly 10000")
    );
    assert_activation_refused(dir.path(), &library, fewer, &PromptsConfig::default());

    // A record whose intervals were not produced by the recorded procedure.
    let mut record = evaluate(passing_results(&library), &PromptsConfig::default());
    let hard = record.metrics.hard_pass_difference.as_mut().unwrap();
    hard.lower += 0.01;
    record.record_digest = record.compute_digest();
    write_record(dir.path(), &record).unwrap();
    let reasons = activate(&library, &record.record_digest).unwrap_err();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("resampling: recomputing")),
        "{reasons:?}"
    );
}

#[test]
fn gate_ae_record_must_bind_the_current_override_hash() {
    let (dir, library) = fixture_library();
    let mut results = passing_results(&library);
    results.candidate.content_hash = "sha256:some-other-text".into();
    let record = evaluate(results, &PromptsConfig::default());
    assert_eq!(
        record.decision,
        Decision::Activate,
        "the statistics alone pass"
    );
    write_record(dir.path(), &record).unwrap();
    let reasons = activate(&library, &record.record_digest).unwrap_err();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("binding: the record is for sha256:some-other-text")),
        "{reasons:?}"
    );

    // A tampered stored record no longer hashes to its digest.
    let good = evaluate(passing_results(&library), &PromptsConfig::default());
    let path = write_record(dir.path(), &good).unwrap();
    let tampered = fs::read_to_string(&path)
        .unwrap()
        .replace("reviewer@example.invalid", "someone-else");
    fs::write(&path, tampered).unwrap();
    let reasons = activate(&library, &good.record_digest).unwrap_err();
    assert!(
        reasons.iter().any(|r| r.starts_with("digest:")),
        "{reasons:?}"
    );
}

#[test]
fn gate_ae_unledgered_active_override_is_refused() {
    let (dir, library) = fixture_library();
    // Hand-edit the manifest to activate the override without evidence.
    let path = dir.path().join("manifest.toml");
    let text = fs::read_to_string(&path).unwrap().replace(
        "activation = \"experimental\"",
        "activation = \"active\"\nchange_record = \"sha256:0000\"",
    );
    fs::write(&path, &text).unwrap();
    let error = manifest::check_manifest(&library).expect_err("the build refuses it");
    assert!(
        error.message.contains("without a stored change record"),
        "{error}"
    );
    let m = manifest::parse_manifest(&path, &text).unwrap();
    let problems = verify_activations(&library, &m);
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].contains("no change record for sha256:0000"),
        "{problems:?}"
    );
}

#[test]
fn gate_ae_experimental_use_is_ledgered_in_the_program_record() {
    use trellis_prompts::fixtures::default_composition;
    use trellis_prompts::{
        CompileOptions, ModelDialect, ModelFamily, ProgramRecord, PromptRoute, PromptStage,
        ResolutionPolicy, compile,
    };
    let route = PromptRoute::new("scripted", ModelFamily::Qwen, Some("qwen3-coder"));
    let dialect = ModelDialect::for_route(&route);
    let composition = default_composition(PromptStage::BranchCorrect, dialect);
    let options = CompileOptions {
        route: &route,
        dialect,
        budget_tokens: dialect.default_budget_tokens(),
        tool_spec_hash: String::new(),
        policy: ResolutionPolicy {
            allow_experimental: true,
            allow_core_override: false,
        },
        replacements: &[],
    };
    let program = compile(&composition, &options).unwrap();
    let record = ProgramRecord::new("s-9", &composition, &options, &program, None);
    assert!(record.policy.allow_experimental);
    let experimental: Vec<_> = record.sections.iter().filter(|s| s.experimental).collect();
    assert_eq!(experimental.len(), 1);
    assert_eq!(experimental[0].id, "branch_correct/tool_protocol");
    assert_eq!(experimental[0].origin, "qwen");
    // The same call without the flag is a different program with no experimental text.
    let default = compile(
        &composition,
        &CompileOptions {
            policy: ResolutionPolicy::default(),
            ..options.clone()
        },
    )
    .unwrap();
    assert_ne!(default.program_digest, program.program_digest);
    assert!(default.sections().all(|s| !s.experimental));
}

#[test]
fn a_tightened_noninferiority_margin_refuses_a_wider_epsilon() {
    let (_dir, library) = fixture_library();
    assert_eq!(
        evaluate(passing_results(&library), &PromptsConfig::default()).decision,
        Decision::Activate
    );
    let tight = PromptsConfig {
        noninferiority_margin: 0.01,
        ..PromptsConfig::default()
    };
    assert_eq!(
        refusal(passing_results(&library), &tight),
        ["margin: ε = 0.02 is outside [0, 0.01]"]
    );
}
