//! The engine's module graph, read from its source: no import cycle
//! between top-level modules or between files, only `lib.rs` imports the front door, and in
//! the repair runtime only the metered effects copy, measure or reserve.
//!
//! A module is the first path segment after `crate::` (`crate::repair::x`
//! is `repair`); a file belongs to the top-level module it sits in
//! (`src/repair/step.rs` is `repair`). Files are checked too: no circle of
//! `use`s between the files of `src/` (`repair/step.rs` is
//! `repair::step`). The reader is `trellis_test_support::source_graph`.

use std::path::{Path, PathBuf};

use trellis_test_support::source_graph::{
    circles, code_only, file_graph, find_cycle, module_graph, source_files,
};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_engine_modules_import_each_other_without_a_cycle() {
    let graph = module_graph(&src());
    assert!(graph.contains_key("repair") && graph["repair"].contains("search"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import cycle between engine modules: {}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn the_engine_files_import_each_other_without_a_cycle() {
    let graph = file_graph(&src());
    assert!(graph["repair::effects"].contains("measure"));
    assert!(!graph.contains_key("actor::runner::tests"));
    assert!(!graph.contains_key("repair::test_support"));
    let cycles: Vec<String> = circles(&graph).iter().map(|c| c.join(" -> ")).collect();
    assert!(
        cycles.is_empty(),
        "import cycles between engine files: {cycles:#?}"
    );
}

#[test]
fn only_lib_imports_the_front_door() {
    let graph = module_graph(&src());
    let importers: Vec<&String> = graph
        .iter()
        .filter(|(module, deps)| *module != "lib" && deps.contains("api"))
        .map(|(module, _)| module)
        .collect();
    assert!(
        importers.is_empty(),
        "only lib.rs may import `api`, the front door; imported by: {importers:?}"
    );
}

/// `repair/effects.rs` is the only runtime code that copies into a slot,
/// runs a sensor or moves the budget: no other file of `repair/` names the
/// copy, the sensor run, the measurement function or a reservation.
#[test]
fn only_the_metered_effects_copy_measure_or_reserve_in_the_runtime() {
    let files = source_files(&src().join("repair"));
    assert!(files.iter().any(|f| f.ends_with("effects.rs")));
    let forbidden = [
        "materialize",
        "SensorRun",
        "Reservation",
        ".reserve(",
        ".settle(",
        "measure::measure",
    ];
    let mut offences = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("effects.rs")) {
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        for token in forbidden {
            if code.contains(token) {
                offences.push(format!("{}: `{token}`", file.display()));
            }
        }
        // `use crate::measure::{Measurement, measure}` would bring the
        // unmetered measurement in under its short name.
        for import in code.split("use crate::measure::").skip(1) {
            let named = &import[..import.find(';').unwrap_or(import.len())];
            if named
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|name| name == "measure")
            {
                offences.push(format!("{}: imports `measure`", file.display()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "only repair/effects.rs may copy, measure or reserve: {offences:?}"
    );
}
