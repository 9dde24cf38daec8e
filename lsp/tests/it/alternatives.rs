//! Proposition 5's first key acts (issue 36): with the default settings, a
//! descent that is no hard pass is kept only once the alternatives the
//! compiler offered are measured too, so the crate's own tests choose
//! between them. Through the shipped binary and the real cargo: from the
//! CLI, through the language server (Apply offered and applied), and after
//! a SIGKILL mid-search and a resume, on an ambiguous import with two
//! candidates, with three, and used in two files, and on a published crate
//! (semver 1.0.28, read from cargo's registry copy) whose removed `use`
//! leaves sites that also offer a look-alike builtin.

use serde_json::Value;
use trellis_engine::ledger::{Ledger, SearchEvent, fold_resume};

use crate::support;

use support::kill::{count_rows, kill_repair_when};
use support::repair_loop::ApplyBy;
use support::workspace::{Workspace, branches};
use support::{Client, cargo_test_passes, vscode_capabilities};

/// A repair the search must get right, and what the right one writes.
struct Case {
    /// A fresh copy of the broken crate.
    workspace: fn() -> Workspace,
    /// Each file the right repair changes, with the line it adds.
    fixed: &'static [(&'static str, &'static str)],
    /// What a wrong alternative would have written.
    wrong: &'static [&'static str],
    /// The file and error code of a diagnostic the editor repairs from.
    diagnostic: (&'static str, &'static str),
}

const TWO_WAY: Case = Case {
    workspace: || Workspace::of("ambiguous-import"),
    fixed: &[("src/lib.rs", "use crate::exact::scale;")],
    wrong: &["approx::scale"],
    diagnostic: ("src/lib.rs", "E0425"),
};

const THREE_WAY: Case = Case {
    workspace: || Workspace::of("ambiguous-three"),
    fixed: &[("src/lib.rs", "use crate::fnv::Digest;")],
    wrong: &["adler::Digest", "crc::Digest"],
    diagnostic: ("src/lib.rs", "E0433"),
};

const TWO_FILES: Case = Case {
    workspace: || Workspace::of("ambiguous-two-files"),
    fixed: &[
        ("src/lib.rs", "use crate::exact::scale;"),
        ("src/report.rs", "use crate::exact::scale;"),
    ],
    wrong: &["approx::scale"],
    diagnostic: ("src/report.rs", "E0425"),
};

const SEMVER: Case = Case {
    workspace: semver_without_its_ptr_import,
    fixed: &[("src/identifier.rs", "use std::ptr;")],
    wrong: &["str::copy_nonoverlapping", "str::write"],
    diagnostic: ("src/identifier.rs", "E0433"),
};

/// semver 1.0.28 as cargo packaged it, without its benchmark and its
/// optional serde support (so it has no dependency and resolves offline),
/// and with `ptr` removed from `use core::ptr::{self, NonNull};` in
/// `src/identifier.rs`: at each of the 13 sites rustc offers both
/// `use std::ptr;` and "a builtin type with a similar name exists: `str`".
fn semver_without_its_ptr_import() -> Workspace {
    let ws = Workspace::of_registry_package("semver", "1.0.28");
    let cut = |file: &str, from: &str, to: &str| {
        let text = ws.read(file);
        assert!(text.contains(from), "semver's {file} changed: {text}");
        std::fs::write(ws.path().join(file), text.replacen(from, to, 1)).unwrap();
    };
    cut(
        "src/lib.rs",
        "#[cfg(feature = \"serde\")]\nmod serde;\n",
        "",
    );
    std::fs::remove_file(ws.path().join("src/serde.rs")).unwrap();
    cut(
        "src/identifier.rs",
        "use core::ptr::{self, NonNull};",
        "use core::ptr::NonNull;",
    );
    std::fs::write(
        ws.path().join("Cargo.toml"),
        "[package]\nname = \"semver\"\nversion = \"1.0.28\"\nedition = \"2021\"\n\n\
         [features]\ndefault = [\"std\"]\nstd = []\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("Cargo.lock"),
        "version = 4\n\n[[package]]\nname = \"semver\"\nversion = \"1.0.28\"\n",
    )
    .unwrap();
    ws
}

/// The workspace holds the right repair, nothing of a wrong one, and the
/// crate's own tests pass.
fn assert_repaired(ws: &Workspace, case: &Case) {
    for (file, line) in case.fixed {
        let text = ws.read(file);
        assert!(text.contains(line), "{file}: {text}");
        for wrong in case.wrong {
            assert!(!text.contains(wrong), "{file} took `{wrong}`: {text}");
        }
    }
    assert!(ws.cargo_test_passes(), "the crate's own tests pass");
}

/// `repair --commit` on a copy of the case's fixture: the right repair is
/// written and the crate's tests pass. The workspace and the report.
fn repaired_from_the_cli(case: &Case) -> (Workspace, Value) {
    let ws = (case.workspace)();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert_repaired(&ws, case);
    let files: Vec<&str> = case.fixed.iter().map(|(file, _)| *file).collect();
    assert_eq!(
        doc["promotion"]["files"],
        serde_json::json!(files),
        "{doc:#}"
    );
    (ws, doc)
}

/// The labels and outcomes of the first step's branches.
fn tried(doc: &Value) -> Vec<(String, String)> {
    branches(doc)
        .map(|b| {
            (
                b["label"].as_str().unwrap_or_default().to_owned(),
                b["outcome"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The first import builds and fails the crate's test: a descent, not a
/// hard pass. The other import is measured before anything is kept, and
/// its hard pass is selected and written.
#[test]
fn the_crates_test_chooses_between_two_imports() {
    let (_, doc) = repaired_from_the_cli(&TWO_WAY);
    let tried = tried(&doc);
    assert_eq!(tried.len(), 2, "{doc:#}");
    assert!(
        tried[0].0.contains("approx") && tried[0].1 == "not_selected",
        "{tried:?}"
    );
    assert!(
        tried[1].0.contains("exact") && tried[1].1 == "selected",
        "{tried:?}"
    );
}

/// Three `Digest`s build alike; only the third the compiler lists passes
/// the test, so each is measured, one branch each. Three measurements are
/// previews: the gate takes one decision, the commit of the hard pass.
#[test]
fn the_crates_test_chooses_among_three_imports() {
    let (ws, doc) = repaired_from_the_cli(&THREE_WAY);
    let tried = tried(&doc);
    let outcomes: Vec<&str> = tried.iter().map(|(_, o)| o.as_str()).collect();
    assert_eq!(
        outcomes,
        ["not_selected", "not_selected", "selected"],
        "{doc:#}"
    );
    assert!(tried[2].0.contains("fnv"), "{tried:?}");
    let measured = ws.search_events_named("branch_candidate_measured").len();
    let (_, replay) = ws.json(&["ledger", "replay"]);
    let decisions = replay["decisions"].as_array().unwrap();
    assert_eq!((measured, decisions.len()), (3, 1), "{replay:#}");
}

/// The ambiguous name is used in two files: each candidate imports the same
/// function in both, never one in one file and the other in the next.
#[test]
fn one_import_is_taken_in_both_files_that_need_it() {
    let (_, doc) = repaired_from_the_cli(&TWO_FILES);
    assert_eq!(tried(&doc).len(), 2, "{doc:#}");
    // The wrong import builds: it was made in both files, and both files'
    // tests fail on it.
    let wrong = branches(&doc).next().unwrap();
    let build = wrong["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "build")
        .unwrap();
    assert_eq!(build["status"], "passed", "{wrong:#}");
    assert_eq!(wrong["clusters"].as_array().unwrap().len(), 2, "{wrong:#}");
}

/// semver with `ptr` removed from one module's `use`: at each site rustc
/// offers both `use std::ptr;` and the builtin `str`. They are one choice:
/// one candidate renames every site to `str` (worse, no descent), the
/// other imports `ptr` alone, and that one passes the crate's tests.
#[test]
fn a_published_crate_gets_its_import_alone_never_mixed_with_the_look_alike_builtin() {
    let (_, doc) = repaired_from_the_cli(&SEMVER);
    let tried = tried(&doc);
    assert_eq!(tried.len(), 2, "{doc:#}");
    assert!(
        tried[0].0.contains("`str`") && tried[0].1 == "ineligible",
        "{tried:?}"
    );
    assert!(
        tried[1].0.contains("use std::ptr;") && tried[1].1 == "selected",
        "{tried:?}"
    );
    let edits = doc["changes"][0]["edits"].as_array().unwrap();
    assert_eq!(edits.len(), 1, "the import alone: {doc:#}");
}

/// The three-way case with two more `Digest`s whose API does not fit: five
/// alternatives, more than the three branches, so a probe builds each one
/// alone first. The three that fit tie (they all build), and each is
/// measured in full, the two that do not are passed over; without the tie
/// rule only the first would be, and the next branches would take the
/// ones that do not build.
#[test]
fn alternatives_tied_in_the_build_probe_are_each_measured_in_full() {
    let ws = (THREE_WAY.workspace)();
    let misfit = |name: &str| {
        format!(
            "pub mod {name} {{\n    /// Another digest, of another API.\n    pub struct Digest;\n}}\n\n"
        )
    };
    let source = ws.read("src/lib.rs").replacen(
        "pub mod crc {",
        &format!("{}{}pub mod crc {{", misfit("blake"), misfit("cksum")),
        1,
    );
    std::fs::write(ws.path().join("src/lib.rs"), source).unwrap();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert_repaired(&ws, &THREE_WAY);
    let tried = tried(&doc);
    let labels: Vec<&str> = tried.iter().map(|(label, _)| label.as_str()).collect();
    assert_eq!(labels.len(), 3, "{doc:#}");
    for (label, module) in labels.iter().zip(["adler", "crc", "fnv"]) {
        assert!(label.contains(&format!("::{module}::")), "{labels:?}");
    }
    assert_eq!(
        branches(&doc).next().unwrap()["strategy"],
        "diagnostic_probe"
    );
    let observed: Vec<String> = ws
        .search_events()
        .into_iter()
        .filter_map(|e| match e {
            SearchEvent::BranchObservation { observation, .. } => Some(observation),
            _ => None,
        })
        .collect();
    assert!(
        observed
            .iter()
            .any(|o| o.starts_with("probe implicates #1, #4, #5")),
        "{observed:#?}"
    );
}

/// The wrong import also returns the wrong type, which the compiler offers
/// a conversion for: no descent, but kept as a partial checkpoint, whose
/// child (the conversion) is a descent and no hard pass. Nothing is left
/// to try on the checkpoint's own plan, but the other import, an
/// alternative of the choice made at the accepted state, is measured
/// before that descent is kept, and it is the hard pass.
#[test]
fn a_descent_reached_through_a_partial_checkpoint_waits_for_the_other_import() {
    let ws = (TWO_WAY.workspace)();
    let source = ws.read("src/lib.rs").replace(
        "pub fn scale(x: u32) -> u32 {\n        x * 2 + 1",
        "pub fn scale(x: u32, y: u32) -> u64 {\n        u64::from(x * 2 + y)",
    );
    assert!(source.contains("-> u64"), "the fixture changed: {source}");
    std::fs::write(ws.path().join("src/lib.rs"), source).unwrap();
    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert_repaired(&ws, &TWO_WAY);
    let outcomes: Vec<String> = tried(&doc).into_iter().map(|(_, o)| o).collect();
    assert_eq!(
        outcomes.first().map(String::as_str),
        Some("partial"),
        "{doc:#}"
    );
    assert!(
        outcomes.iter().any(|o| o == "not_selected"),
        "the conversion's descent: {doc:#}"
    );
}

fn repaired_through_the_editor(case: &Case) {
    let ws = (case.workspace)();
    let (mut client, _) = Client::start(ws.path(), vscode_capabilities(), None);
    let (file, code) = case.diagnostic;
    let diagnostic = client.open_for_diagnostic(file, code);
    client.repair_and_apply(file, &diagnostic, ApplyBy::Resolve);
    assert_repaired(&ws, case);
    assert!(cargo_test_passes(ws.path()));
    client.shutdown();
}

#[test]
fn the_editor_is_offered_and_applies_the_import_the_test_chose() {
    repaired_through_the_editor(&TWO_WAY);
}

#[test]
fn the_editor_is_offered_and_applies_the_one_of_three_imports_the_test_chose() {
    repaired_through_the_editor(&THREE_WAY);
}

#[test]
fn the_editor_is_offered_and_applies_the_import_in_both_files() {
    repaired_through_the_editor(&TWO_FILES);
}

#[test]
fn the_editor_is_offered_and_applies_the_published_crates_import() {
    repaired_through_the_editor(&SEMVER);
}

/// Killed (SIGKILL) once the forest has measured its first candidate, a
/// wrong one, and while it measures the next: the next repair resumes the
/// interrupted forest (same limits, its usage claimed) and ends at the
/// right repair, written.
fn repaired_after_a_kill(case: &Case) {
    let ws = (case.workspace)();
    kill_repair_when(&ws, "after its first measurement", |db| {
        count_rows(
            db,
            "payload LIKE '%\"kind\":\"branch_candidate_measured\"%'",
        ) > 0
    });
    let rows = Ledger::open(&ws.path().join(".trellis"))
        .unwrap()
        .rows()
        .unwrap();
    let killed = fold_resume(&rows)
        .unwrap()
        .interrupted
        .expect("the killed forest is left open");

    let (code, doc) = ws.json(&["repair", "--commit"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert_repaired(&ws, case);
    let resumed = ws.search_events().into_iter().any(|e| {
        matches!(e, SearchEvent::SearchOpened { resumed_from: Some(from), limits, .. }
            if from == killed.forest_id && limits == killed.limits)
    });
    assert!(resumed, "a forest resumes the killed one");
    let rows = Ledger::open(&ws.path().join(".trellis"))
        .unwrap()
        .rows()
        .unwrap();
    assert!(
        fold_resume(&rows).unwrap().interrupted.is_none(),
        "the killed forest is claimed"
    );
}

#[test]
fn a_killed_two_way_search_resumes_to_the_right_import() {
    repaired_after_a_kill(&TWO_WAY);
}

#[test]
fn a_killed_three_way_search_resumes_to_the_right_import() {
    repaired_after_a_kill(&THREE_WAY);
}

#[test]
fn a_killed_two_file_search_resumes_to_the_right_import_in_both_files() {
    repaired_after_a_kill(&TWO_FILES);
}

#[test]
fn a_killed_search_of_the_published_crate_resumes_to_its_import() {
    repaired_after_a_kill(&SEMVER);
}
