//! The server's module seams, read from its source, and no import circle
//! between its files.

use std::path::Path;

use trellis_test_support::source_graph::{circles, file_graph};

fn server_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/server")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Tasks return values; the actor spawns them and makes its own messages.
/// So the actor imports the tasks and never the other way round.
#[test]
fn server_tasks_do_not_know_the_actor() {
    let tasks = server_file("tasks.rs");
    for needle in ["super::actor", "server::actor", "Msg"] {
        assert!(
            !tasks.contains(needle),
            "lsp/src/server/tasks.rs names `{needle}`: a task must return its result, not message the actor"
        );
    }
    assert!(server_file("actor.rs").contains("super::tasks"));
}

/// No circle of imports between the files of `src/`: each file's imports
/// lead away from it (`trellis_test_support::source_graph`).
#[test]
fn the_lsp_files_import_each_other_without_a_cycle() {
    let graph = file_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph["server::actor"].contains("server::tasks"));
    let cycles: Vec<String> = circles(&graph).iter().map(|c| c.join(" -> ")).collect();
    assert!(
        cycles.is_empty(),
        "import cycles between lsp files: {cycles:#?}"
    );
}
