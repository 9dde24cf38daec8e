//! `trellis repair --commit` writes a verified repair completely or not at
//! all, never over an edit the user makes meanwhile, and never without a
//! record. Faults are injected into the shipped binary with its failpoints
//! (`TRELLIS_FAILPOINT`: abort after the k-th rename, pause in the window
//! before a rename so the test edits a file or deletes `.trellis`), and
//! with a directory the promotion cannot write. The fixture's repair
//! changes three files.

use crate::support;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::workspace::Workspace;
use support::{REPAIR_TIMEOUT, files_under, ledger_replay};

const FIXTURE: &str = "three-files";
/// The files the fixture's repair changes.
const TARGETS: [&str; 3] = ["src/lib.rs", "src/scale.rs", "src/total.rs"];
const SIGABRT: i32 = 6;
const USER_EDIT: &str = "// the user's own edit, made while trellis was writing\n";

fn commit_with(ws: &Workspace, failpoint: &str) -> std::process::Command {
    let mut command = ws.command(&["repair", "--commit", "--format", "json"]);
    command
        .env("TRELLIS_FAILPOINT", failpoint)
        .env("TRELLIS_FAILPOINT_MARKER", marker(ws));
    command
}

fn marker(ws: &Workspace) -> PathBuf {
    ws.cache().join("failpoint-paused")
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// How many targets differ from `before`, and how many are missing.
fn torn(ws: &Workspace, before: &std::collections::BTreeMap<PathBuf, Vec<u8>>) -> (usize, usize) {
    let now = ws.tree();
    let changed = TARGETS
        .iter()
        .filter(|t| {
            now.get(Path::new(t))
                .is_some_and(|b| Some(b) != before.get(Path::new(t)))
        })
        .count();
    let missing = TARGETS
        .iter()
        .filter(|t| !now.contains_key(Path::new(t)))
        .count();
    (changed, missing)
}

fn repaired(ws: &Workspace) -> bool {
    TARGETS
        .iter()
        .all(|t| std::fs::read_to_string(ws.path().join(t)).is_ok_and(|s| s.contains("let mut ")))
}

/// Every `.trellis-tmp*` file anywhere in the workspace (outside `target/`).
fn temp_files(ws: &Workspace) -> Vec<PathBuf> {
    files_under(ws.path(), &["target"])
        .into_keys()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".trellis-tmp"))
        })
        .collect()
}

/// After the run: no temp file, no journal, and the ledger verifies.
fn assert_clean_and_verified(ws: &Workspace) -> Value {
    assert_eq!(
        temp_files(ws),
        Vec::<PathBuf>::new(),
        "no temp file survives"
    );
    assert!(
        !ws.path().join(".trellis/promotion.journal").exists(),
        "the journal is gone"
    );
    ledger_replay(ws.path())
}

/// The next start (`trellis check`) recovers; returns its recovery record.
fn restart_and_recover(ws: &Workspace, direction: &str) -> (Output, Value) {
    let out = ws.trellis(&["check"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("recovered interrupted promotion")
            && stderr.contains(&direction.replace('_', " ")),
        "the start reports the recovery: {}",
        text(&out)
    );
    let replay = assert_clean_and_verified(ws);
    let recoveries = replay["recoveries"].as_array().unwrap();
    assert_eq!(recoveries.len(), 1, "{replay:#}");
    assert_eq!(recoveries[0]["direction"], direction, "{replay:#}");
    (out, recoveries[0].clone())
}

#[test]
fn a_crash_at_every_rename_is_rolled_forward_on_the_next_start() {
    // (failpoint, files changed at the crash, files missing at the crash)
    let crashes = [
        ("promote-after-rename:1:abort", 1, 0),
        ("promote-after-rename:2:abort", 2, 0),
        ("promote-after-rename:3:abort", 3, 0),
        // The old file moved aside, the new one not yet in place.
        ("promote-before-rename:2:abort", 1, 1),
    ];
    for (failpoint, changed, missing) in crashes {
        let ws = Workspace::of(FIXTURE);
        let before = ws.tree();
        let out = commit_with(&ws, failpoint).output().unwrap();
        assert_eq!(
            out.status.signal(),
            Some(SIGABRT),
            "{failpoint}: {}",
            text(&out)
        );
        assert_eq!(
            torn(&ws, &before),
            (changed, missing),
            "{failpoint}: the crash tore the tree"
        );

        let (out, _) = restart_and_recover(&ws, "rolled_forward");
        assert_eq!(out.status.code(), Some(0), "{failpoint}: {}", text(&out));
        assert!(repaired(&ws), "{failpoint}: every file is new");
    }
}

#[test]
fn a_crash_while_staging_is_rolled_back_on_the_next_start() {
    let ws = Workspace::of(FIXTURE);
    let before = ws.tree();
    let out = commit_with(&ws, "promote-after-stage:2:abort")
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(SIGABRT), "{}", text(&out));
    assert_eq!(temp_files(&ws).len(), 2, "two files were staged");

    restart_and_recover(&ws, "rolled_back");
    assert_eq!(ws.tree(), before, "every file is old");
}

#[test]
fn a_file_edited_after_a_crash_is_kept_and_the_rest_rolled_back() {
    let ws = Workspace::of(FIXTURE);
    let before = ws.tree();
    let out = commit_with(&ws, "promote-after-rename:1:abort")
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(SIGABRT), "{}", text(&out));
    let untouched = TARGETS
        .iter()
        .find(|t| std::fs::read(ws.path().join(t)).ok().as_ref() == before.get(Path::new(t)))
        .expect("two files were not yet replaced");
    std::fs::write(ws.path().join(untouched), USER_EDIT).unwrap();

    let (_, recovery) = restart_and_recover(&ws, "rolled_back");
    assert_eq!(recovery["kept"], serde_json::json!([untouched]));
    let mut expected = before.clone();
    expected.insert(PathBuf::from(*untouched), USER_EDIT.into());
    assert_eq!(ws.tree(), expected, "old files, and the user's edit");
}

/// Runs `repair --commit` paused at `failpoint`, lets `edit` change the
/// workspace in that window, and returns the run's output.
fn edit_during_promotion(ws: &Workspace, failpoint: &str, edit: impl FnOnce()) -> Output {
    let mut child = commit_with(ws, failpoint)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + REPAIR_TIMEOUT;
    while !marker(ws).exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before reaching {failpoint}");
        }
        assert!(Instant::now() < deadline, "never reached {failpoint}");
        std::thread::sleep(Duration::from_millis(20));
    }
    edit();
    std::fs::remove_file(marker(ws)).unwrap();
    child.wait_with_output().unwrap()
}

/// The run was refused as stale, and the refusal is ledgered.
fn assert_stale_refusal(ws: &Workspace, out: &Output) {
    assert_eq!(out.status.code(), Some(2), "{}", text(out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("changed since the repair started"),
        "{}",
        text(out)
    );
    let replay = assert_clean_and_verified(ws);
    assert_eq!(replay["promotions"], serde_json::json!([]), "{replay:#}");
    let refusals = replay["refusals"].as_array().unwrap();
    assert_eq!(
        refusals.last().unwrap()["reason"]["kind"],
        "stale_root",
        "{replay:#}"
    );
}

#[test]
fn an_edit_in_the_window_before_a_rename_survives() {
    let ws = Workspace::of(FIXTURE);
    let before = ws.tree();
    let mut edited = None;
    let out = edit_during_promotion(&ws, "promote-before-rename:2:pause", || {
        // The file being replaced right now: its old copy is moved aside.
        let target = TARGETS
            .iter()
            .find(|t| !ws.path().join(t).exists())
            .expect("one target is being replaced");
        std::fs::write(ws.path().join(target), USER_EDIT).unwrap();
        edited = Some(*target);
    });
    assert_stale_refusal(&ws, &out);
    let mut expected = before.clone();
    expected.insert(PathBuf::from(edited.unwrap()), USER_EDIT.into());
    assert_eq!(
        ws.tree(),
        expected,
        "the first file is put back, the edit kept"
    );
}

#[test]
fn an_edit_to_a_later_file_during_promotion_survives() {
    let ws = Workspace::of(FIXTURE);
    let before = ws.tree();
    let mut expected = before.clone();
    let out = edit_during_promotion(&ws, "promote-before-rename:1:pause", || {
        for target in TARGETS.iter().filter(|t| ws.path().join(t).exists()) {
            std::fs::write(ws.path().join(target), USER_EDIT).unwrap();
            expected.insert(PathBuf::from(*target), USER_EDIT.into());
        }
    });
    assert_stale_refusal(&ws, &out);
    assert_eq!(
        ws.tree(),
        expected,
        "the first file is put back, both edits kept"
    );
}

/// Deletes `.trellis` while the promotion is paused at `failpoint`: the
/// ledger that would record it is gone, so the run refuses and the tree
/// ends as it began, with no temp file left.
fn assert_refused_when_trellis_is_deleted_at(failpoint: &str, why: &str) {
    let ws = Workspace::of(FIXTURE);
    let before = ws.tree();
    let out = edit_during_promotion(&ws, failpoint, || {
        std::fs::remove_dir_all(ws.path().join(".trellis")).unwrap();
    });
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no longer the file this run opened"),
        "{}",
        text(&out)
    );
    assert_eq!(ws.tree(), before, "{why}");
    assert_eq!(temp_files(&ws), Vec::<PathBuf>::new());
}

#[test]
fn deleting_trellis_before_the_promotion_refuses_it() {
    assert_refused_when_trellis_is_deleted_at(
        "promote-start:1:pause",
        "nothing was written without a record",
    );
}

#[test]
fn deleting_trellis_after_the_renames_puts_every_file_back() {
    assert_refused_when_trellis_is_deleted_at(
        "promote-after-rename:3:pause",
        "what could not be recorded is undone",
    );
}

#[test]
fn the_language_server_recovers_an_interrupted_promotion_at_start() {
    let ws = Workspace::of(FIXTURE);
    let out = commit_with(&ws, "promote-after-rename:2:abort")
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(SIGABRT), "{}", text(&out));

    let (client, response) =
        support::Client::start(ws.path(), support::vscode_capabilities(), None);
    assert!(response.get("error").is_none(), "{response}");
    client.shutdown();
    assert!(repaired(&ws), "every file is new");
    let replay = assert_clean_and_verified(&ws);
    assert_eq!(
        replay["recoveries"][0]["direction"], "rolled_forward",
        "{replay:#}"
    );
}

/// Makes a directory unwritable even for root (`chattr +i` on top of the
/// mode bits) until dropped.
struct Unwritable(PathBuf);

impl Unwritable {
    fn new(dir: &Path) -> Unwritable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        // Root ignores mode bits; the immutable attribute binds it too.
        if std::fs::metadata("/proc/self").is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid() == 0
        }) {
            let status = std::process::Command::new("chattr")
                .arg("+i")
                .arg(dir)
                .status()
                .expect("chattr is needed to make a directory unwritable for root");
            assert!(status.success(), "chattr +i {}", dir.display());
        }
        Unwritable(dir.to_path_buf())
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
    }
}

#[test]
fn an_unwritable_directory_refuses_the_promotion_and_changes_nothing() {
    let ws = Workspace::of(FIXTURE);
    let before = ws.tree();
    let out = {
        let _locked = Unwritable::new(&ws.path().join("src"));
        ws.trellis(&["repair", "--commit", "--format", "json"])
    };
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("nothing was changed"),
        "{}",
        text(&out)
    );
    assert_eq!(ws.tree(), before);
    let replay = assert_clean_and_verified(&ws);
    assert_eq!(replay["promotions"], serde_json::json!([]), "{replay:#}");
}

#[test]
fn an_edit_right_after_the_first_rename_undoes_it_and_says_what_was_put_back() {
    let ws = Workspace::of(FIXTURE);
    let before = ws.tree();
    let mut expected = before.clone();
    let mut replaced = Vec::new();
    let mut edited = Vec::new();
    let out = edit_during_promotion(&ws, "promote-after-rename:1:pause", || {
        // One file holds the fix; the user edits the two not yet replaced.
        let now = ws.tree();
        for target in TARGETS {
            if now.get(Path::new(target)) == before.get(Path::new(target)) {
                std::fs::write(ws.path().join(target), USER_EDIT).unwrap();
                expected.insert(PathBuf::from(target), USER_EDIT.into());
                edited.push(target);
            } else {
                replaced.push(target);
            }
        }
    });
    assert_eq!((replaced.len(), edited.len()), (1, 2), "{}", text(&out));
    assert_stale_refusal(&ws, &out);
    assert_eq!(
        ws.tree(),
        expected,
        "the replaced file is put back, both edits kept"
    );

    let rolled_back = serde_json::json!({ "put_back": replaced, "kept": edited });
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["promotion"]["rolled_back"], rolled_back, "{doc:#}");
    let error = doc["promotion"]["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("put back as they were: {}", replaced[0]))
            && error.contains(&format!("kept as you edited them: {}", edited.join(", ")))
            && !error.contains("nothing was written"),
        "the error says what happened: {error}"
    );
    let replay = ledger_replay(ws.path());
    let refusal = replay["refusals"].as_array().unwrap().last().unwrap();
    assert_eq!(refusal["rolled_back"], rolled_back, "{replay:#}");
}

/// The repair id the journal of an interrupted promotion names.
fn journal_repair_id(ws: &Workspace) -> String {
    let journal: Value = serde_json::from_slice(
        &std::fs::read(ws.path().join(".trellis/promotion.journal")).expect("the journal stays"),
    )
    .unwrap();
    journal["repair_id"].as_str().unwrap().to_owned()
}

#[test]
fn status_after_a_kill_mid_promotion_names_the_repair_and_what_will_finish_it() {
    let ws = Workspace::of(FIXTURE);
    let out = commit_with(&ws, "promote-after-rename:1:abort")
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(SIGABRT), "{}", text(&out));
    let repair_id = journal_repair_id(&ws);
    let torn_tree = ws.tree();

    let out = ws.trellis(&["status"]);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        human.contains(&format!("interrupted write: repair {repair_id}"))
            && human.contains("1 of 3 files hold the verified content")
            && human.contains(
                "the next `trellis check`, `trellis repair` or language-server start finishes it"
            )
            && human.contains("it will roll it forward"),
        "{human}"
    );
    assert!(
        !human.contains("not written"),
        "a half-written tree is never called not written: {human}"
    );
    let (code, doc) = ws.json(&["status"]);
    assert_eq!(code, 0, "{doc:#}");
    let interrupted = &doc["interrupted_promotion"];
    assert_eq!(interrupted["repair_id"], repair_id.as_str(), "{doc:#}");
    assert_eq!(interrupted["files"].as_array().unwrap().len(), 3, "{doc:#}");
    assert_eq!(
        interrupted["written"].as_array().unwrap().len(),
        1,
        "{doc:#}"
    );
    assert_eq!(interrupted["next_start"], "rolled_forward", "{doc:#}");
    assert_eq!(interrupted["in_progress"], false, "{doc:#}");
    assert_eq!(ws.tree(), torn_tree, "status changes nothing");

    // A user edit to a file not yet replaced: the next start must roll
    // back, and status says so before it happens.
    let untouched = TARGETS
        .iter()
        .find(|t| {
            !std::fs::read_to_string(ws.path().join(t))
                .unwrap()
                .contains("let mut ")
        })
        .unwrap();
    std::fs::write(ws.path().join(untouched), USER_EDIT).unwrap();
    let out = ws.trellis(&["status"]);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        human.contains("it will roll it back") && human.contains("stays as you left it"),
        "{human}"
    );

    restart_and_recover(&ws, "rolled_back");
    let out = ws.trellis(&["status"]);
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !human.contains("interrupted"),
        "recovered: nothing is pending any more: {human}"
    );
}

#[test]
fn the_language_servers_status_request_reports_a_promotion_killed_while_it_runs() {
    let ws = Workspace::of(FIXTURE);
    let cache = ws.cache().as_os_str().to_owned();
    let (mut client, response) = support::Client::start_with_env(
        ws.path(),
        None,
        &[("TRELLIS_CACHE_DIR", &cache)],
        support::vscode_capabilities(),
        None,
    );
    assert!(response.get("error").is_none(), "{response}");
    let status = client.request("trellis/status", serde_json::json!({}));
    assert_eq!(status["interrupted_promotion"], Value::Null, "{status:#}");

    let out = commit_with(&ws, "promote-after-rename:2:abort")
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(SIGABRT), "{}", text(&out));
    let repair_id = journal_repair_id(&ws);

    let status = client.request("trellis/status", serde_json::json!({}));
    let interrupted = &status["interrupted_promotion"];
    assert_eq!(interrupted["repair_id"], repair_id.as_str(), "{status:#}");
    assert_eq!(
        interrupted["written"].as_array().unwrap().len(),
        2,
        "{status:#}"
    );
    assert_eq!(interrupted["next_start"], "roll_forward", "{status:#}");
    let states: Vec<&Value> = status["searches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["state"])
        .collect();
    assert!(
        states.contains(&&Value::from("write_interrupted"))
            && !states.contains(&&Value::from("verified_not_written")),
        "{status:#}"
    );
    client.shutdown();
}
