//! The TypeScript stages: `tsc --noEmit` (stage `typescript.typecheck`,
//! [`TscCheck`]) and the project's tests under Node's test runner (stage
//! `typescript.test`, [`NodeTest`]), as [`Sensor`]s.
//!
//! [`NodeTools::detect`] pins the tools once per session, as the user's own
//! commands would find them: the project's `node_modules/.bin/tsc` and
//! `tsserver` when it has them (the TypeScript its `package.json` pins),
//! otherwise the ones on `PATH`, and the `node` on `PATH`; their versions
//! are part of every fingerprint. A branch slot's `node_modules` is the
//! user's, linked read-only ([`crate::slots`]), so a stage measures the
//! dependencies the user installed, never a copy.
//!
//! This module and its children never write into the measured tree: tsc
//! runs with `--noEmit`, the test reporter writes below the slot's target
//! directory, and tsserver is asked for fixes, never to apply them.
//!
//! # Architecture invariant
//!
//! Nothing is written into the measured tree or the read-only `node_modules`
//! (`typescript_more::an_incremental_project_whose_build_info_is_in_node_modules_is_checked_and_node_modules_untouched`),
//! and a failing test is keyed by its file and suite path, never a slot's path
//! (`node_test::tests::failing_tests_are_keyed_by_file_and_suite_path_and_located_where_they_failed`).

mod node_test;
mod position;
mod rerun;
mod tap;
pub(crate) mod test_inventory;
mod tsc;
mod tsc_output;
mod tsserver;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;

pub use self::node_test::NodeTest;
pub use self::tsc::TscCheck;
use super::process::{self, ProcessLimits};
use super::{Observation, Sensor};

/// The build and test stages of the TypeScript project at `workspace`.
/// Missing tools still yield both sensors; each run then reports
/// [`StageStatus::Unavailable`] naming what to install.
pub async fn typescript_sensors(workspace: &Path) -> Vec<Box<dyn Sensor>> {
    let tools = NodeTools::detect(workspace).await;
    vec![
        Box::new(TscCheck::new(&tools)),
        Box::new(NodeTest::new(&tools, workspace)),
    ]
}

/// One tool a stage runs: where it was found and its version, or why it
/// cannot run.
#[derive(Clone, Debug)]
struct Tool {
    program: OsString,
    /// Where it came from, for the fingerprint and for people:
    /// `node_modules/.bin/tsc` or `PATH`.
    origin: &'static str,
    version: Result<String, String>,
}

impl Tool {
    /// `tsc 5.9.3 (node_modules/.bin/tsc)`, or `unavailable`.
    fn identity(&self, name: &str) -> String {
        match &self.version {
            Ok(version) => format!("{name} {version} ({})", self.origin),
            Err(_) => format!("{name} unavailable"),
        }
    }
}

/// The Node.js tools of one workspace, identified once.
#[derive(Clone, Debug)]
pub struct NodeTools {
    node: Tool,
    tsc: Tool,
    /// The language service, from the same place as `tsc`: its fixes are
    /// for the compiler that measures them.
    tsserver: OsString,
}

impl NodeTools {
    /// Finds `tsc` and `tsserver` in `workspace/node_modules/.bin`, else on
    /// `PATH`, and `node` on `PATH`, and asks each for its version.
    pub async fn detect(workspace: &Path) -> Self {
        let bin = workspace.join("node_modules").join(".bin");
        let local = |name: &str| -> Option<PathBuf> {
            let path = bin.join(name);
            path.is_file().then_some(path)
        };
        let (tsc, tsserver, origin) = match (local("tsc"), local("tsserver")) {
            (Some(tsc), Some(tsserver)) => (
                tsc.into_os_string(),
                tsserver.into_os_string(),
                "node_modules/.bin",
            ),
            _ => ("tsc".into(), "tsserver".into(), "PATH"),
        };
        let tsc_version = probe(&tsc, workspace, TSC_MISSING)
            .await
            .map(|printed| printed.trim().trim_start_matches("Version ").to_owned());
        let node_version = probe(&"node".into(), workspace, NODE_MISSING)
            .await
            .map(|printed| printed.trim().to_owned());
        NodeTools {
            node: Tool {
                program: "node".into(),
                origin: "PATH",
                version: node_version,
            },
            tsc: Tool {
                program: tsc,
                origin,
                version: tsc_version,
            },
            tsserver,
        }
    }

    /// `tsc 5.9.3 (node_modules/.bin); node v20.20.2`: what the build
    /// stage's fingerprint records.
    fn compiler_identity(&self) -> String {
        format!(
            "{}; {}",
            self.tsc.identity("tsc"),
            self.node.identity("node")
        )
    }
}

const TSC_MISSING: &str = "install TypeScript in the project (`npm install --save-dev typescript`) \
     or put `tsc` on PATH";
const NODE_MISSING: &str = "install Node.js or put `node` on PATH";

/// Runs `program --version` in `dir`; its output, or a reason naming what
/// to install.
async fn probe(program: &OsString, dir: &Path, remedy: &str) -> Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.arg("--version").current_dir(dir);
    let limits = ProcessLimits {
        deadline: Duration::from_secs(60),
        stdout_cap: 64 * 1024,
        stderr_cap: 64 * 1024,
    };
    let shown = format!("{} --version", program.to_string_lossy());
    let output = process::probe(cmd, &shown, &limits, &format!(": {remedy}")).await?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// At most `limit` bytes of `text` from its end, cut at a char boundary:
/// the part of a failing command's output that says why.
fn tail(text: &str, limit: usize) -> String {
    let text = text.trim();
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}
