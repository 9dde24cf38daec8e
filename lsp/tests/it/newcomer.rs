//! What a newcomer meets first: the project is found from wherever the
//! command runs, a folder that is no project is named and left untouched,
//! and a log that is not a terminal still shows what a long run is doing.

use std::process::Command;

use crate::support;

use support::workspace::Workspace;

/// The binary run inside `dir` of the workspace, without a path argument.
fn trellis_in(ws: &Workspace, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(args)
        .current_dir(dir)
        .env("TRELLIS_CACHE_DIR", ws.cache())
        .env("XDG_CONFIG_HOME", ws.cache().join("config"))
        .output()
        .expect("the trellis binary runs")
}

#[test]
fn run_from_a_subdirectory_it_checks_the_whole_crate_and_writes_state_at_its_root() {
    let ws = Workspace::of("missing-mut");
    let src = ws.path().join("src");
    let out = trellis_in(&ws, &src, &["check", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(1), "residuals remain");
    assert_eq!(
        doc["workspace"].as_str().unwrap(),
        ws.path().canonicalize().unwrap().to_str().unwrap()
    );
    let clusters = doc["clusters"].as_array().unwrap();
    assert!(
        clusters.iter().all(|c| c["class"] != "sensor_unavailable"),
        "every stage ran: {clusters:#?}"
    );
    assert!(!src.join(".trellis").exists(), "no state in src/");
    assert!(ws.path().join(".trellis/ledger.db").exists());
}

#[test]
fn a_folder_in_no_project_is_named_once_and_nothing_is_created() {
    let ws = Workspace::of("missing-mut");
    let outside = tempfile::tempdir().unwrap();
    let notes = outside.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    for args in [
        &["check"][..],
        &["repair"],
        &["status"],
        &["ledger", "verify"],
    ] {
        let out = trellis_in(&ws, &notes, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "said once: {stderr}");
        assert!(
            stderr.contains("no project found in") && stderr.contains("notes"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_dir(&notes).unwrap().count(),
            0,
            "{args:?} created something"
        );
    }
}

#[test]
fn progress_is_printed_as_plain_lines_when_stderr_is_not_a_terminal() {
    let ws = Workspace::of("missing-mut");
    let out = ws.trellis(&["check"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("trellis: "))
        .collect();
    assert!(
        lines.iter().any(|l| l.ends_with(": build")),
        "a line names the running stage: {stderr}"
    );
    let mut deduped = lines.clone();
    deduped.dedup();
    assert_eq!(deduped, lines, "a message is printed once, not per tick");
    assert!(
        !stderr.contains('\r'),
        "no terminal control in a log: {stderr:?}"
    );
}

/// `trellis <args> --help`, as the user reads it.
fn help(ws: &Workspace, args: &[&str]) -> String {
    let mut args = args.to_vec();
    args.push("--help");
    let out = ws.trellis(&args);
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_prompt_flags_are_shown_only_where_they_apply_and_accepted_where_they_were() {
    let ws = Workspace::of("missing-mut");
    const FLAGS: [&str; 2] = [
        "--allow-experimental-prompts",
        "--allow-core-prompt-override",
    ];
    for command in [&["check"][..], &["repair"], &["gc"], &["lsp"]] {
        let text = help(&ws, command);
        for flag in FLAGS {
            assert!(
                text.contains(flag),
                "`{command:?} --help` lacks {flag}:\n{text}"
            );
        }
    }
    for command in [
        &[][..],
        &["status"],
        &["ledger", "verify"],
        &["ledger", "replay"],
        &["prompts", "list"],
    ] {
        let text = help(&ws, command);
        for flag in FLAGS {
            assert!(
                !text.contains(flag),
                "`{command:?} --help` shows {flag}:\n{text}"
            );
        }
    }
    // Before the subcommand (as `trellis --allow-… lsp` was written) and
    // after one they do not apply to, they are still accepted.
    for args in [
        &["--allow-experimental-prompts", "status"][..],
        &["status", "--allow-core-prompt-override"],
        &["gc", "--dry-run", "--allow-experimental-prompts"],
    ] {
        let out = ws.trellis(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // What the editor packages run: `trellis lsp` and its extra arguments.
    let out = trellis_in(&ws, ws.path(), &["lsp", "--allow-experimental-prompts"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("unexpected argument"), "{stderr}");
}
