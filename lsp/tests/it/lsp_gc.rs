//! Automatic storage collection in `trellis lsp`, through the built binary
//! and real cargo: after a repair ends, with none running, the server
//! collects what `trellis gc` would (a deleted workspace's slot set goes),
//! on a thread of its own. A failpoint holds the collection open to show
//! that requests are still answered meanwhile and that a repair asked for
//! then starts only once the collection is over.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{
    CARGO_TOML, Client, MISSING_MUT_LIB, REPAIR_TIMEOUT, REQUEST_TIMEOUT, vscode_capabilities,
    write_crate,
};

const LIB: &str = "src/lib.rs";

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn status_is(n: &Value, status: &str) -> bool {
    n["method"] == "trellis/searchStatus" && n["params"]["status"] == status
}

#[test]
fn the_server_collects_after_a_repair_without_blocking_requests_or_repairs() {
    let root = tempfile::tempdir().unwrap();
    write_crate(
        root.path(),
        &[("Cargo.toml", CARGO_TOML), (LIB, MISSING_MUT_LIB)],
    );
    // The slot set of a project deleted since: no live workspace needs it.
    let cache = tempfile::tempdir().unwrap();
    let gone = cache.path().join("ws-0123456789abcdef");
    std::fs::create_dir_all(gone.join("b0/src")).unwrap();
    std::fs::write(gone.join("workspace"), "/nonexistent/deleted-project").unwrap();
    std::fs::write(gone.join("b0/src/lib.rs"), vec![b'x'; 4096]).unwrap();
    let marks = tempfile::tempdir().unwrap();
    let marker = marks.path().join("collecting");
    let env: [(&str, &std::ffi::OsStr); 3] = [
        ("TRELLIS_CACHE_DIR", cache.path().as_os_str()),
        ("TRELLIS_FAILPOINT", "gc-collect:1:pause".as_ref()),
        ("TRELLIS_FAILPOINT_MARKER", marker.as_os_str()),
    ];
    let (mut client, _) =
        Client::start_with_env(root.path(), None, &env, vscode_capabilities(), None);
    client.open(LIB);
    let diagnostics = client.wait_for_diagnostics(0, LIB, true);
    let cluster = diagnostics
        .iter()
        .find(|d| d["code"] == "E0384")
        .map(|d| d["data"]["cluster"].clone())
        .unwrap_or_else(|| panic!("no E0384 among {diagnostics:#?}"));
    assert!(
        gone.exists() && !marker.exists(),
        "sensing collects nothing"
    );
    // Marked as Trellis's own, as every slot set is (gc removes nothing else).
    let live = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|set| *set != gone)
        .expect("sensing made the workspace's slot set");
    std::fs::copy(live.join("CACHEDIR.TAG"), gone.join("CACHEDIR.TAG")).unwrap();

    let from = client.start_repair_of_cluster(&cluster);
    client.wait_for(from, REPAIR_TIMEOUT, "the repair to end", |n| {
        status_is(n, "hard_pass")
    });
    // The collection starts once the repair is over, and holds there.
    wait_until("the collection to start", REQUEST_TIMEOUT, || {
        client.pump(Duration::from_millis(50));
        marker.exists()
    });
    assert!(gone.exists(), "held before it removes anything");

    // Meanwhile requests are answered, and a repair waits for it.
    let range = diagnostics[0]["range"].clone();
    let asked = Instant::now();
    let actions = client.code_actions(LIB, &range, &diagnostics);
    assert!(!actions.is_empty());
    assert!(asked.elapsed() < REQUEST_TIMEOUT);
    let held = client.start_repair_of_cluster(&cluster);
    client.pump(Duration::from_secs(3));
    assert!(
        !client.notifications[held..]
            .iter()
            .any(|n| status_is(n, "running")),
        "no repair runs during a collection"
    );

    std::fs::remove_file(&marker).unwrap();
    wait_until("the deleted project's slots to go", REQUEST_TIMEOUT, || {
        client.pump(Duration::from_millis(50));
        !gone.exists()
    });
    let logged = client.wait_for(held, REQUEST_TIMEOUT, "the collection's log", |n| {
        n["method"] == "window/logMessage"
            && n["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("collected unused storage"))
    });
    assert!(
        logged["params"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer exists"),
        "{logged}"
    );
    // The held repair starts now, and runs to its end.
    client.wait_for(held, REPAIR_TIMEOUT, "the held repair to end", |n| {
        status_is(n, "hard_pass")
    });
    let position = |pred: &dyn Fn(&Value) -> bool| {
        client.notifications[held..]
            .iter()
            .position(pred)
            .map(|i| i + held)
    };
    let log_at = position(&|n: &Value| n == &logged).unwrap();
    let running_at = position(&|n: &Value| status_is(n, "running")).unwrap();
    assert!(log_at < running_at, "it started after the collection ended");
    client.shutdown();
}
