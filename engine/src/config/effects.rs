//! No setting is accepted and ignored: every key the validator accepts
//! (walked from its own types by [`super::keys`]) has a row here naming the
//! tests that show its effect, or saying why it has none. A key added to a
//! layer without a row, a row for a key that no longer exists, and a row
//! naming a test that does not exist each fail
//! `every_key_has_an_effect_or_says_why_not`.

use super::Layer;

/// What shows a key's effect.
enum Effect {
    /// Tests (`file::name`, the file relative to the repository root) that
    /// change the key and see what `trellis` does change with it.
    Shown(&'static [&'static str]),
    /// Accepted with no effect of its own, why, and the test that holds
    /// what it does instead.
    None {
        why: &'static str,
        test: &'static str,
    },
}

use Effect::{None as NoEffect, Shown};

/// Every key, dotted as [`super::keys::keys`] names it.
const EFFECTS: &[(&str, Effect)] = &[
    (
        "build.at_workspace_path",
        Shown(&[
            "lsp/tests/it/slots_at_workspace_path.rs::at_workspace_path_false_builds_each_slot_at_its_own_path",
        ]),
    ),
    (
        "build.rustc_wrapper",
        Shown(&[
            "lsp/tests/it/slots_warm.rs::a_configured_rustc_wrapper_runs_every_slot_compilation",
        ]),
    ),
    (
        "ensemble",
        NoEffect {
            why: "the pre-search table, read only to be refused with the keys that replaced it",
            test: "engine/src/config/mod.rs::a_legacy_ensemble_section_gets_a_migration_message",
        },
    ),
    (
        "exploration.initial_branches",
        NoEffect {
            why: "a search always opens one branch first (PSP-10's default, which the seed keeps \
                  until its evaluation flips it); 1 is its only accepted value, so a \
                  configuration that spells it loads, and any other is refused by name",
            test: "engine/src/config/mod.rs::initial_branches_other_than_one_is_refused_by_name",
        },
    ),
    ("exploration.limits.actions", Shown(&[LIMITS])),
    ("exploration.limits.elapsed_secs", Shown(&[LIMITS])),
    ("exploration.limits.model_turns", Shown(&[LIMITS])),
    ("exploration.limits.mutations", Shown(&[LIMITS])),
    ("exploration.limits.result_bytes", Shown(&[LIMITS])),
    ("exploration.limits.tokens", Shown(&[LIMITS])),
    ("exploration.limits.tool_calls", Shown(&[LIMITS])),
    (
        "exploration.limits.verifier_runs",
        Shown(&[
            LIMITS,
            "lsp/tests/it/output.rs::a_limit_that_runs_out_is_named_with_the_key_to_raise",
        ]),
    ),
    ("exploration.limits.workspace_bytes", Shown(&[LIMITS])),
    ("exploration.limits.workspace_files", Shown(&[LIMITS])),
    (
        "exploration.local_retries",
        Shown(&[
            "lsp/tests/it/cli.rs::a_branch_out_of_local_retries_seeds_a_child_from_its_partial_checkpoint",
        ]),
    ),
    (
        "exploration.max_branches",
        Shown(&[
            "lsp/tests/it/settings.rs::exploration_max_branches_bounds_the_branches_of_a_forest",
        ]),
    ),
    (
        "exploration.max_steps",
        Shown(&[
            "lsp/tests/it/cli.rs::a_continued_repair_counts_its_earlier_steps_against_max_steps",
        ]),
    ),
    ("exploration.workspace_bytes", Shown(&[BOUNDS])),
    ("exploration.workspace_files", Shown(&[BOUNDS])),
    (
        "gate.rejection_budget",
        Shown(&[
            "engine/src/gate.rs::rejection_budget_refuses_without_a_decision",
            "engine/src/config/mod.rs::layers_override_in_order",
        ]),
    ),
    (
        "gate.rho",
        Shown(&[
            "lsp/tests/it/settings.rs::gate_rho_decides_whether_a_fix_that_leaves_a_failing_test_is_kept",
        ]),
    ),
    ("model_turns.edits_per_turn", Shown(&[MODEL])),
    (
        "model_turns.max_turns",
        Shown(&[
            "lsp/tests/it/model_search.rs::model_turns_from_the_config_bound_each_model_branch_and_replay_rebuilds_them",
        ]),
    ),
    ("model_turns.result_bytes", Shown(&[MODEL])),
    ("model_turns.tokens_per_turn", Shown(&[MODEL])),
    ("model_turns.tool_calls_per_turn", Shown(&[MODEL])),
    (
        "model_turns.working_set_turns",
        Shown(&[
            "lsp/tests/it/context_events.rs::a_page_outside_the_working_set_is_tombstoned_with_room_to_spare_and_recall_faults_it_back",
        ]),
    ),
    (
        "models[].adapter=openai-chat",
        Shown(&["lsp/tests/it/model_repair.rs::a_failing_test_is_fixed_by_the_model_and_promoted"]),
    ),
    ("models[].api_key_env", Shown(&[MODEL])),
    (
        "models[].base_url",
        Shown(&["lsp/tests/it/model_repair.rs::a_failing_test_is_fixed_by_the_model_and_promoted"]),
    ),
    (
        "models[].context_window_tokens",
        Shown(&[
            "lsp/tests/it/context_paging.rs::gate_af_a_small_window_evicts_recalls_refuses_stale_pages_and_replays_every_request",
            "lsp/tests/it/context_overhead.rs::an_8192_token_window_sends_every_turn_with_the_compact_form_and_fixes_the_bug",
            "lsp/tests/it/context_overhead.rs::a_large_window_keeps_the_full_form_and_every_section",
        ]),
    ),
    ("models[].family", Shown(&[MODEL])),
    ("models[].max_output_tokens", Shown(&[MODEL])),
    ("models[].model", Shown(&[MODEL])),
    ("models[].name", Shown(&[MODEL])),
    (
        "models[].timeout_secs",
        Shown(&[
            "lsp/tests/it/model_repair.rs::a_hanging_endpoint_is_ended_by_its_deadline_and_the_repair_ends_soon_after",
        ]),
    ),
    (
        "prompts.activation_min_tasks",
        Shown(&[
            "prompts/tests/it/gate_ae.rs::gate_ae_configuration_bounds_refuse",
            "lsp/tests/it/cli.rs::prompt_activation_floors_are_checked_when_a_session_starts",
        ]),
    ),
    (
        "prompts.bundles",
        Shown(&[
            "lsp/tests/it/model_search.rs::pinned_bundles_and_the_allow_flag_shape_the_model_prompts_and_replay_reproduces_them",
        ]),
    ),
    (
        "prompts.noninferiority_margin",
        Shown(&[
            "prompts/tests/it/gate_ae.rs::a_tightened_noninferiority_margin_refuses_a_wider_epsilon",
        ]),
    ),
    (
        "python.interpreter",
        Shown(&["lsp/tests/it/settings.rs::python_interpreter_is_the_interpreter_the_stages_run"]),
    ),
    (
        "sandbox.network=allow",
        Shown(&[
            "lsp/tests/it/sandbox.rs::network_allow_lets_model_written_code_reach_the_machine_and_nothing_more",
        ]),
    ),
    (
        "sandbox.network=loopback",
        Shown(&[
            "lsp/tests/it/sandbox.rs::model_written_code_cannot_write_outside_its_slot_nor_reach_the_machines_network",
        ]),
    ),
    (
        "sandbox.require",
        Shown(&[
            "lsp/tests/it/sandbox.rs::without_a_sandbox_model_code_is_refused_and_nothing_is_shared",
        ]),
    ),
    (
        "sandbox.writable",
        Shown(&[
            "lsp/tests/it/search_rules.rs::a_flaky_test_is_rerun_reported_and_never_becomes_a_no_good",
            "lsp/tests/it/faults_process.rs::sigkill_leaves_no_cargo_or_test_process_behind",
        ]),
    ),
    ("stages.build_timeout_secs", Shown(&[TIMEOUTS])),
    (
        "stages.nondeterministic",
        Shown(&[
            "lsp/tests/it/search_rules.rs::gate_ab_a_failure_in_a_deterministic_stage_is_a_no_good_the_next_repair_honours",
        ]),
    ),
    (
        "stages.required",
        Shown(&[
            "lsp/tests/it/python.rs::a_required_lint_stage_blocks_and_ruffs_safe_fix_repairs_it",
        ]),
    ),
    (
        "stages.test_timeout_secs",
        Shown(&[
            TIMEOUTS,
            "lsp/tests/it/faults_process.rs::a_test_that_escapes_with_setsid_is_bounded_by_the_stage_deadline_and_reported",
        ]),
    ),
    (
        "verification.oracle_command",
        Shown(&[ORACLE_FAILS, ORACLE_MISSING]),
    ),
    (
        "verification.oracle_path",
        Shown(&[ORACLE_FAILS, ORACLE_MISSING]),
    ),
    (
        "verification.test_policy=backward-compatible",
        Shown(&[BACKWARD_COMPATIBLE]),
    ),
    (
        "verification.test_policy=evolving",
        Shown(&[
            BACKWARD_COMPATIBLE,
            "lsp/tests/it/kept_tests.rs::a_model_that_deletes_the_failing_rust_tests_is_refused",
        ]),
    ),
    (
        "verification.test_policy=external-oracle",
        Shown(&[
            ORACLE_FAILS,
            "lsp/tests/it/oracle.rs::an_oracle_that_passes_lets_the_verified_fix_be_written",
        ]),
    ),
];

const LIMITS: &str = "lsp/tests/it/settings.rs::every_exploration_limit_is_the_searchs_budget";
const BOUNDS: &str =
    "lsp/tests/it/settings.rs::the_workspace_bounds_refuse_a_larger_snapshot_naming_the_keys";
const MODEL: &str =
    "lsp/tests/it/settings.rs::model_and_turn_settings_reach_every_request_the_model_gets";
const TIMEOUTS: &str = "lsp/tests/it/settings.rs::the_stage_timeouts_bound_each_stage_by_its_role";
const ORACLE_FAILS: &str =
    "lsp/tests/it/oracle.rs::an_oracle_that_fails_blocks_the_write_and_is_shown";
const ORACLE_MISSING: &str =
    "lsp/tests/it/oracle.rs::a_missing_or_unrunnable_oracle_refuses_the_repair_naming_the_key";
const BACKWARD_COMPATIBLE: &str = "lsp/tests/it/model_search.rs::backward_compatible_runs_the_in_file_tests_as_they_were_and_refuses_a_weakened_assertion";

/// The repository root: the engine's manifest directory's parent.
fn repository() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the engine is a member of the workspace")
        .to_path_buf()
}

/// Whether the test `file::name` is defined.
fn defined(test: &str) -> Result<(), String> {
    let (file, name) = test
        .rsplit_once("::")
        .ok_or_else(|| format!("`{test}` is not `file::name`"))?;
    let text = std::fs::read_to_string(repository().join(file))
        .map_err(|e| format!("`{test}`: {file}: {e}"))?;
    let defines = [format!("fn {name}()"), format!("async fn {name}()")];
    match defines.iter().any(|d| text.contains(d.as_str())) {
        true => Ok(()),
        false => Err(format!("`{test}`: {file} defines no test `{name}`")),
    }
}

#[test]
fn every_key_has_an_effect_or_says_why_not() {
    let mut accepted = super::keys::keys::<Layer>();
    // `[prompts]` is read by `trellis-prompts`, table and keys alike.
    accepted.retain(|key| key != "prompts");
    accepted.extend(
        super::keys::keys::<trellis_prompts::activation::PromptsConfig>()
            .into_iter()
            .map(|key| format!("prompts.{key}")),
    );
    accepted.sort();
    let mut listed: Vec<&str> = EFFECTS.iter().map(|(key, _)| *key).collect();
    listed.sort();
    let unlisted: Vec<&String> = accepted
        .iter()
        .filter(|key| !listed.contains(&key.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "accepted keys with no test of their effect: {unlisted:?} (add a row to EFFECTS)"
    );
    let gone: Vec<&&str> = listed
        .iter()
        .filter(|key| !accepted.iter().any(|a| a == *key))
        .collect();
    assert!(
        gone.is_empty(),
        "rows for keys the validator no longer accepts: {gone:?}"
    );
    let mut missing = Vec::new();
    for (key, effect) in EFFECTS {
        let tests: Vec<&str> = match effect {
            Shown(tests) => tests.to_vec(),
            NoEffect { why, test } => {
                assert!(!why.is_empty(), "{key}: say why it has no effect");
                vec![*test]
            }
        };
        assert!(!tests.is_empty(), "{key}: name a test");
        missing.extend(tests.into_iter().filter_map(|t| defined(t).err()));
    }
    assert!(missing.is_empty(), "{missing:#?}");
}
