//! Where the stages' tools are found, through the shipped binary and the
//! real tools (`scripts/install-test-deps.sh`): a Python project's `ty`
//! and `ruff` in its `.venv/bin`, found with the virtualenv not activated
//! and not on `PATH` (as an editor starts the server), in the view and in
//! every branch; a tool found nowhere named with every place searched; and
//! a TypeScript project's `node_modules/.bin/tsc`, its own or hoisted to
//! an npm workspace's root above it, where `PATH` has none.
//! `trellis check --verbose` names each program and why it was chosen.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::workspace::{Workspace, stage};

/// What the tests' `python3` says of itself: `sysconfig` path `name`
/// (`scripts`, where pip put ty's and ruff's programs; `purelib`, where
/// pytest is).
fn python3_path(name: &str) -> PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            &format!("import sysconfig; print(sysconfig.get_path('{name}'))"),
        ])
        .output()
        .expect("python3 runs");
    assert!(out.status.success());
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A `PATH` directory holding only the programs the sandbox's probes and a
/// shell need (`sh`, `mkdir`, `mv`) and `extra`: no Python tool, no `tsc`.
fn bare_path(extra: &[&str]) -> tempfile::TempDir {
    let bin = tempfile::tempdir().unwrap();
    for name in ["sh", "mkdir", "mv"].iter().chain(extra) {
        let out = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .unwrap();
        let real = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{name} is not on PATH");
        std::os::unix::fs::symlink(real.trim(), bin.path().join(name)).unwrap();
    }
    bin
}

/// Makes `.venv` in the workspace: a virtualenv whose `bin/` holds links
/// to the real `tools` and whose interpreter imports what the tests'
/// `python3` has installed (pytest), as `pip install` into the venv would
/// leave it. Returns its path.
fn venv_with(ws: &Workspace, tools: &[&str]) -> PathBuf {
    let made = Command::new("python3")
        .args(["-m", "venv", "--without-pip", ".venv"])
        .current_dir(ws.path())
        .status()
        .unwrap();
    assert!(made.success());
    let venv = ws.path().join(".venv");
    let lib = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    std::fs::write(
        lib.path().join("site-packages/tests-interpreter.pth"),
        format!("{}\n", python3_path("purelib").display()),
    )
    .unwrap();
    let scripts = python3_path("scripts");
    for tool in tools {
        let real = scripts.join(tool);
        assert!(
            real.is_file(),
            "{} is missing: run scripts/install-test-deps.sh",
            real.display()
        );
        std::os::unix::fs::symlink(real, venv.join("bin").join(tool)).unwrap();
    }
    venv
}

/// `trellis ARGS` on `ws` with `PATH` the directory `path`, and no
/// activated environment.
fn run(ws: &Workspace, args: &[&str], path: &Path) -> Output {
    ws.command(args)
        .env("PATH", path)
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .output()
        .expect("the trellis binary runs")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The `(tool, program, from)` of `stage` in a check report's `tools`.
fn tools_of(doc: &Value, stage: &str) -> Vec<(String, PathBuf, String)> {
    doc["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {doc:#}"))
        .iter()
        .filter(|t| t["stage"] == stage)
        .map(|t| {
            (
                t["tool"].as_str().unwrap().to_owned(),
                PathBuf::from(t["program"].as_str().unwrap()),
                t["from"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_venvs_ty_and_ruff_measure_and_repair_with_the_venv_neither_activated_nor_on_path() {
    let ws = Workspace::of("py-missing-import");
    let venv = venv_with(&ws, &["ty", "ruff"]);
    let path = bare_path(&[]);
    let from_venv = format!("the interpreter's environment {}", venv.display());

    let out = run(&ws, &["check", "--format", "json"], path.path());
    let doc = json(&out);
    assert_eq!(out.status.code(), Some(1), "{doc:#}");
    // ty ran and found the missing import; ruff ran.
    assert_eq!(
        stage(&doc, "python.typecheck")["status"],
        "failed",
        "{doc:#}"
    );
    assert_eq!(stage(&doc, "python.lint")["status"], "passed", "{doc:#}");
    assert!(
        doc["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["key"] == "unresolved:os"),
        "{doc:#}"
    );
    assert_eq!(
        tools_of(&doc, "python.typecheck"),
        [("ty".to_owned(), venv.join("bin/ty"), from_venv.clone())]
    );
    assert_eq!(
        tools_of(&doc, "python.lint"),
        [("ruff".to_owned(), venv.join("bin/ruff"), from_venv.clone())]
    );
    assert_eq!(
        tools_of(&doc, "python.test"),
        [(
            "python".to_owned(),
            venv.join("bin/python"),
            ".venv".to_owned()
        )]
    );

    let out = run(&ws, &["check", "--verbose"], path.path());
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        format!(
            "python.typecheck  ty: {} (from {from_venv})",
            venv.join("bin/ty").display()
        ),
        format!(
            "python.lint       ruff: {} (from {from_venv})",
            venv.join("bin/ruff").display()
        ),
        format!(
            "python.test       python: {} (from .venv)",
            venv.join("bin/python").display()
        ),
    ] {
        assert!(
            text.lines().any(|l| l.trim() == line),
            "no `{line}` in:\n{text}"
        );
    }

    // The branches run the venv's ty too: its fix is verified and written.
    let out = run(
        &ws,
        &["repair", "--commit", "--format", "json"],
        path.path(),
    );
    let doc = json(&out);
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    assert_eq!(doc["status"], "hard_pass", "{doc:#}");
    assert_eq!(
        ws.read("clock/__init__.py").matches("import os\n").count(),
        1
    );
}

#[test]
fn a_tool_found_nowhere_is_named_with_every_place_searched_and_check_exits_2() {
    let ws = Workspace::of("py-missing-import");
    let venv = venv_with(&ws, &[]);
    let path = bare_path(&[]);
    let out = run(&ws, &["check", "--format", "json"], path.path());
    let doc = json(&out);
    assert_eq!(out.status.code(), Some(2), "{doc:#}");
    let reason = |name: &str| {
        let stage = stage(&doc, name);
        assert_eq!(stage["status"], "unavailable", "{doc:#}");
        stage["reason"].as_str().unwrap().to_owned()
    };
    let bin = venv.join("bin");
    let python = bin.join("python");
    let typecheck = reason("python.typecheck");
    for said in [
        format!(
            "`ty` was not found in {} (the interpreter's environment) or on PATH",
            bin.display()
        ),
        format!(
            "`pyright` was not found in {} (the interpreter's environment), {} \
             (node_modules/.bin, and those of the directories above) or on PATH",
            bin.display(),
            ws.path().join("node_modules/.bin").display()
        ),
        format!("`{} -m pip install ty`", python.display()),
    ] {
        assert!(typecheck.contains(&said), "no `{said}` in {typecheck}");
    }
    assert_eq!(
        reason("python.lint"),
        format!(
            "`ruff` was not found in {} (the interpreter's environment) or on PATH; \
             install it into the interpreter's environment (`{} -m pip install ruff`) \
             or put it on PATH",
            bin.display(),
            python.display()
        )
    );
    assert_eq!(
        doc["tools"].as_array().unwrap().len(),
        1,
        "only pytest's interpreter: {doc:#}"
    );
}

#[test]
fn a_projects_node_modules_tsc_runs_where_path_has_none() {
    let ws = Workspace::of_node_project("ts-typo");
    let path = bare_path(&["node"]);
    let out = run(&ws, &["check", "--format", "json"], path.path());
    let doc = json(&out);
    assert_eq!(out.status.code(), Some(1), "{doc:#}");
    assert_eq!(
        stage(&doc, "typescript.typecheck")["status"],
        "failed",
        "{doc:#}"
    );
    let bin = ws.path().join("node_modules/.bin");
    assert_eq!(
        tools_of(&doc, "typescript.typecheck"),
        [
            (
                "tsc".to_owned(),
                bin.join("tsc"),
                "node_modules/.bin".to_owned()
            ),
            (
                "tsserver".to_owned(),
                bin.join("tsserver"),
                "node_modules/.bin".to_owned()
            ),
        ]
    );
    let node = tools_of(&doc, "typescript.test");
    assert_eq!(node.len(), 1, "{doc:#}");
    assert_eq!(
        (node[0].1.as_path(), node[0].2.as_str()),
        (path.path().join("node").as_path(), "PATH")
    );
}

#[test]
fn a_tsc_hoisted_to_the_npm_workspace_root_above_the_project_runs() {
    let ws = Workspace::empty();
    let npm_root = Command::new("npm").args(["root", "-g"]).output().unwrap();
    let typescript =
        PathBuf::from(String::from_utf8(npm_root.stdout).unwrap().trim()).join("typescript");
    assert!(
        typescript.is_dir(),
        "{} is missing: run scripts/install-test-deps.sh",
        typescript.display()
    );
    // An npm workspace whose root holds the tools; the project is a member.
    let hoisted = ws.path().join("node_modules");
    std::fs::create_dir_all(hoisted.join(".bin")).unwrap();
    std::os::unix::fs::symlink(&typescript, hoisted.join("typescript")).unwrap();
    for tool in ["tsc", "tsserver"] {
        let target = Path::new("../typescript/bin").join(tool);
        std::os::unix::fs::symlink(target, hoisted.join(".bin").join(tool)).unwrap();
    }
    std::fs::write(
        ws.path().join("package.json"),
        r#"{"private": true, "workspaces": ["app"]}"#,
    )
    .unwrap();
    let app = ws.path().join("app");
    std::fs::create_dir_all(app.join("src")).unwrap();
    std::fs::write(
        app.join("package.json"),
        r#"{"name": "app", "type": "module"}"#,
    )
    .unwrap();
    std::fs::write(
        app.join("tsconfig.json"),
        r#"{"compilerOptions": {"strict": true, "noEmit": true, "types": []}, "include": ["src"]}"#,
    )
    .unwrap();
    std::fs::write(
        app.join("src/total.ts"),
        "export const total: number = \"3\";\n",
    )
    .unwrap();
    let path = bare_path(&["node"]);
    let out = Command::new(env!("CARGO_BIN_EXE_trellis"))
        .args(["check", "--format", "json"])
        .arg(&app)
        .env("TRELLIS_CACHE_DIR", ws.cache())
        .env("XDG_CONFIG_HOME", ws.cache().join("config"))
        .env("PATH", path.path())
        .output()
        .unwrap();
    let doc = json(&out);
    assert_eq!(
        stage(&doc, "typescript.typecheck")["status"],
        "failed",
        "{doc:#}"
    );
    assert!(
        doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "TS2322"),
        "tsc found the type error: {doc:#}"
    );
    assert_eq!(
        tools_of(&doc, "typescript.typecheck")[0],
        (
            "tsc".to_owned(),
            hoisted.join(".bin/tsc"),
            "node_modules/.bin".to_owned()
        )
    );
}
