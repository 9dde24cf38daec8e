//! Killing a running `trellis repair` the hard way (SIGKILL) at a moment
//! its ledger shows, for the crash-and-resume tests.

use std::path::Path;

use super::workspace::Workspace;

/// Runs `trellis repair --format json` and kills it (SIGKILL: no
/// destructor, no cleanup runs) as soon as `ready` holds for its ledger,
/// which must happen while it still runs (`moment` says when, for the
/// failure message). The user's files must be untouched.
pub fn kill_repair_when(ws: &Workspace, moment: &str, ready: impl Fn(&Path) -> bool) {
    let before = ws.tree();
    let mut child = ws
        .command(&["repair", "--format", "json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let db = ws.path().join(".trellis/ledger.db");
    loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "trellis finished before it could be killed {moment}"
        );
        if ready(&db) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        ws.tree(),
        before,
        "a killed repair never touches the user's files"
    );
}

/// Counts rows from a second, read-only connection while trellis writes.
pub fn count_rows(db: &Path, filter: &str) -> i64 {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| {
            c.query_row(
                &format!("SELECT count(*) FROM events WHERE {filter}"),
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .unwrap_or(0)
}

/// Whether the repair recorded in `db` has decided its first step and its
/// second step's forest has reserved its first fork (that step then still
/// has a copy, a build and a test to run): the moment the resume tests
/// kill a two-step repair.
pub fn in_its_second_step(db: &Path) -> bool {
    count_rows(db, "kind = 'gate_decision_recorded'") > 0
        && count_rows(
            db,
            "kind = 'search' AND payload LIKE '%\"kind\":\"search_usage_snapshot\"%' \
             AND payload LIKE '%/f2\"%' AND payload LIKE '%\"workspace_files\":%' \
             AND payload NOT LIKE '%\"workspace_files\":0%'",
        ) > 0
}
