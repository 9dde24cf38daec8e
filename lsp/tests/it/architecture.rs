//! The server's module seams, read from its source.

use std::path::Path;

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
