//! The section compiler's source: no import circle between its files.

use std::path::Path;

use trellis_test_support::source_graph::{circles, file_graph};

/// No circle of imports between the files of `src/`: each file's imports
/// lead away from it (`trellis_test_support::source_graph`).
#[test]
fn the_codegen_files_import_each_other_without_a_cycle() {
    let graph = file_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.contains_key("crate") && graph.contains_key("section"));
    let cycles: Vec<String> = circles(&graph).iter().map(|c| c.join(" -> ")).collect();
    assert!(
        cycles.is_empty(),
        "import cycles between trellis-prompt-codegen files: {cycles:#?}"
    );
}
