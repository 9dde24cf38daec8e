//! The view measurement of `trellis lsp` under injected faults, through
//! the built binary and real cargo. The `view-measure` failpoint holds a
//! measurement inside the view lock, its copy made and its stages not yet
//! run, so a test acts in exactly that window: a repair cancelled there
//! ends cancelled with nothing recorded, written or left running; a repair
//! that waited there for a sensing run of its own view is served that
//! run's measurement; and one that waited while a file changed on disk
//! measures the changed view, never the old one. A cancelled repair also
//! stops seeding its first branch's slot.

use crate::support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::kill::count_rows;
use support::workspace::Workspace;
use support::{Client, REQUEST_TIMEOUT, vscode_capabilities};
use trellis_engine::ledger::SearchEvent;

const LIB: &str = "src/lib.rs";

/// A `trellis lsp` on `ws` (its private cache, no user configuration) that
/// pauses at the `hit`-th view measurement until `marker` is removed.
fn server(ws: &Workspace, hit: usize, marker: &Path) -> Client {
    let failpoint = format!("view-measure:{hit}:pause");
    let config = ws.cache().join("config");
    let env: [(&str, &OsStr); 4] = [
        ("TRELLIS_CACHE_DIR", ws.cache().as_os_str()),
        ("XDG_CONFIG_HOME", config.as_os_str()),
        ("TRELLIS_FAILPOINT", failpoint.as_ref()),
        ("TRELLIS_FAILPOINT_MARKER", marker.as_os_str()),
    ];
    Client::start_with_env(ws.path(), None, &env, vscode_capabilities(), None).0
}

/// Reads messages until `marker` exists: the server paused there.
fn wait_for_pause(client: &mut Client, marker: &Path) {
    client.pump_until("the view measurement to pause", || marker.exists());
}

/// Snapshots the workspace's ledger records.
fn snapshots(ws: &Workspace) -> i64 {
    count_rows(
        &ws.path().join(".trellis/ledger.db"),
        "kind = 'snapshot_taken'",
    )
}

/// Starts the Repair of `cluster` while a view measurement is held, and
/// reads messages until the repair has taken its root (its snapshot is
/// ledgered): it found nothing cached under it, and waits for the lock.
fn start_waiting_repair(client: &mut Client, ws: &Workspace, cluster: &str) -> usize {
    let taken = snapshots(ws);
    let from = start_repair(client, cluster);
    client.pump_until("the repair's snapshot", || snapshots(ws) > taken);
    from
}

/// The id of the workspace's one error cluster and the state root of its
/// disk, from `trellis check`.
fn checked(ws: &Workspace) -> (String, Value) {
    let (code, doc) = ws.json(&["check"]);
    assert_eq!(code, 1, "{doc:#}");
    let errors: Vec<&Value> = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["class"] != "warning")
        .collect();
    assert_eq!(errors.len(), 1, "{doc:#}");
    (
        errors[0]["id"].as_str().unwrap().to_owned(),
        doc["root"].clone(),
    )
}

/// `trellis.repair.start` of `cluster`, once the search reports running;
/// the index of the first notification after it.
fn start_repair(client: &mut Client, cluster: &str) -> usize {
    let from = client.start_repair_of_cluster(&json!(cluster));
    client.wait_for(from, REQUEST_TIMEOUT, "the search to start", |n| {
        n["method"] == "trellis/searchStatus" && n["params"]["status"] == "running"
    });
    from
}

/// Whether the repair's progress (from `from` on) reported measuring the
/// view itself: copying it into the view slot or running its stages.
fn measured_the_view(client: &Client, from: usize) -> bool {
    client
        .progress_messages(from)
        .iter()
        .any(|m| m == "copying the workspace" || m.starts_with("workspace: "))
}

/// Every live process whose working directory or command line lies under
/// `dir`, as `pid: command line`.
fn processes_under(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cwd: Option<PathBuf> = std::fs::read_link(entry.path().join("cwd")).ok();
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
            .unwrap_or_default();
        if cwd.is_some_and(|cwd| cwd.starts_with(&dir)) || cmdline.contains(&needle) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

/// The slot target directories under `cache` seeded for a build that
/// generates code (a `cargo test`): marked `.trellis-seeded-code-2`.
fn seeded_for_tests(cache: &Path) -> Vec<PathBuf> {
    let mut seeded = Vec::new();
    for workspace in std::fs::read_dir(cache).unwrap().flatten() {
        let Ok(targets) = std::fs::read_dir(workspace.path().join("targets")) else {
            continue;
        };
        seeded.extend(
            targets
                .flatten()
                .map(|target| target.path())
                .filter(|target| target.join(".trellis-seeded-code-2").exists()),
        );
    }
    seeded
}

/// A repair whose view the sensing run never measured (an unsaved edit)
/// measures it itself; the failpoint holds it there, and the user cancels
/// it. Released, the repair ends `cancelled` without searching from the
/// incomplete measurement: no forest is opened (so none is left open), no
/// file of the user's changes, no process runs in its slots and its first
/// branch's slot is not seeded on; nor is
/// the incomplete measurement kept, so the next repair of the same view
/// measures it and verifies.
#[test]
fn a_repair_cancelled_while_its_view_is_measured_ends_cancelled_and_leaves_nothing() {
    let ws = Workspace::of("missing-mut");
    let marks = tempfile::tempdir().unwrap();
    let marker = marks.path().join("view-held");
    // The sensing run of the opened file is the first view measurement,
    // the repair's the second.
    let mut client = server(&ws, 2, &marker);
    let cluster = client.open_for_cluster(LIB);
    let end = ws.read(LIB).lines().count();
    let at = json!({ "line": end, "character": 0 });
    client.edit(
        LIB,
        json!({ "start": at, "end": at }),
        "// an unsaved note\n",
    );
    let before = ws.tree();

    let from = start_repair(&mut client, &cluster);
    wait_for_pause(&mut client, &marker);
    // Cancelled before the measurement is let go on.
    client.cancel_repairs(LIB);
    std::fs::remove_file(&marker).unwrap();

    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "cancelled", "{ended}");
    assert_eq!(ended["params"]["branches"], 0, "{ended}");
    assert_eq!(ws.tree(), before, "no file of the user's changed");
    // Killed processes take a moment to exit; one left running stays.
    let killed = Instant::now();
    while !processes_under(ws.cache()).is_empty() && killed.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(processes_under(ws.cache()), Vec::<String>::new());
    // The first branch's slot, seeded ahead while the view is measured,
    // is seeded no further once the repair is cancelled: the sensing run
    // seeded the view's slot for its check, and nothing was seeded for a
    // build that generates code.
    assert_eq!(
        seeded_for_tests(ws.cache()),
        Vec::<PathBuf>::new(),
        "a slot was seeded for a cancelled repair's branch"
    );
    let events = ws.search_events();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SearchEvent::SearchOpened { .. })),
        "nothing is searched from a cancelled measurement: {events:#?}"
    );
    let verify = ws.trellis(&["ledger", "verify"]);
    assert!(verify.status.success(), "{verify:?}");

    // Nothing of the cancelled measurement stands in for one: the same
    // view, asked again, is measured in full and repaired.
    let again = start_repair(&mut client, &cluster);
    let ended = client.search_end(again);
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    assert!(measured_the_view(&client, again));
    client.shutdown();
}

/// A repair asked for while the sensing run of the same view still holds
/// the view lock waits for it, then finds that run's measurement under its
/// own root: it never measures the view a second time, and verifies.
#[test]
fn a_repair_that_waited_for_a_sensing_run_of_its_view_is_served_its_measurement() {
    let ws = Workspace::of("missing-mut");
    let (cluster, _) = checked(&ws);
    let marks = tempfile::tempdir().unwrap();
    let marker = marks.path().join("view-held");
    let mut client = server(&ws, 1, &marker);
    client.open(LIB);
    wait_for_pause(&mut client, &marker);

    let from = start_waiting_repair(&mut client, &ws, &cluster);
    std::fs::remove_file(&marker).unwrap();
    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    assert!(
        !measured_the_view(&client, from),
        "the view was measured again: {:?}",
        client.progress_messages(from)
    );
    client.shutdown();
}

/// The same wait, but a file the editor does not hold changes on disk
/// meanwhile (a formatter, a checkout). The repair takes its root again
/// once it holds the view lock: the sensing run measured the old root, so
/// the repair measures the changed view itself, and searches from it (its
/// forest is bound to the root `trellis check` reports for the disk now),
/// and verifies.
#[test]
fn a_repair_that_waited_while_a_file_changed_measures_the_changed_view() {
    let ws = Workspace::of("missing-mut");
    let (cluster, old_root) = checked(&ws);
    let marks = tempfile::tempdir().unwrap();
    let marker = marks.path().join("view-held");
    let mut client = server(&ws, 1, &marker);
    // The editor holds the manifest; the library is read from disk.
    client.open("Cargo.toml");
    wait_for_pause(&mut client, &marker);

    let from = start_waiting_repair(&mut client, &ws, &cluster);
    let edited = format!("{}// edited while the repair waited\n", ws.read(LIB));
    std::fs::write(ws.path().join(LIB), &edited).unwrap();
    std::fs::remove_file(&marker).unwrap();
    let ended = client.search_end(from);
    assert_eq!(ended["params"]["status"], "hard_pass", "{ended}");
    assert!(
        measured_the_view(&client, from),
        "the changed view was measured: {:?}",
        client.progress_messages(from)
    );
    client.shutdown();

    assert_eq!(ws.read(LIB), edited, "nothing was written");
    let (_, new_root) = checked(&ws);
    assert_ne!(new_root, old_root);
    let searched: Vec<Value> = ws
        .search_events()
        .iter()
        .filter_map(|e| match e {
            SearchEvent::SearchOpened { accepted_root, .. } => {
                Some(serde_json::to_value(accepted_root).unwrap())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        searched,
        vec![new_root],
        "one search, from the changed view"
    );
}
