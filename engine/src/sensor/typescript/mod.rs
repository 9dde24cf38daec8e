//! The TypeScript stages: `tsc --noEmit` (stage `typescript.typecheck`,
//! [`TscCheck`]) and the project's tests under Node's test runner (stage
//! `typescript.test`, [`NodeTest`], read from Node's runner or jest), as
//! [`Sensor`]s.
//!
//! [`NodeTools::detect`] pins the tools once per session, as the user's own
//! commands (`npm run`, `npx`) would find them ([`toolpath`]): the `tsc` of
//! the project's `node_modules/.bin`, or of a directory above it (an npm
//! workspace hoists its packages' tools to its root), which is the
//! TypeScript its `package.json` pins, otherwise the one on `PATH`, with
//! the `tsserver` beside it; and the `node` on `PATH`. The absolute paths
//! found are what every run starts, and their versions are part of every
//! fingerprint. A branch slot's `node_modules` is the
//! user's, linked read-only ([`crate::slots`]), so a stage measures the
//! dependencies the user installed, never a copy.
//!
//! This module and its children never write into the measured tree: tsc
//! runs with `--noEmit`, the test reporter writes below the slot's target
//! directory, and tsserver is asked for fixes, never to apply them. The one
//! mark they leave is for a test script that compiles into the tree itself:
//! the `outDir` it is about to create is made first and tagged as build
//! output, so snapshots leave it out like `target/` ([`out_dir`]).
//!
//! # Architecture invariant
//!
//! Nothing is written into the measured tree or the read-only `node_modules`
//! (`typescript_more::an_incremental_project_whose_build_info_is_in_node_modules_is_checked_and_node_modules_untouched`),
//! and a failing test is keyed by its file and suite path, never a slot's path
//! (`node_test::tests::failing_tests_are_keyed_by_file_and_suite_path_and_located_where_they_failed`),
//! jest's too, a compiled test by its source file
//! (`typescript_jest::check_names_the_failing_jest_test_by_its_source_file_line_and_message`).

mod jest;
mod node_test;
mod out_dir;
mod position;
mod rerun;
mod tap;
pub(crate) mod test_inventory;
mod tsc;
mod tsc_output;
mod tsserver;

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::Duration;

use tokio::process::Command;
use trellis_core::text;

pub use self::node_test::NodeTest;
pub use self::tsc::TscCheck;
use super::process::{self, ProcessLimits};
use super::toolpath::{self, Found, Search, ToolUse};
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
    /// The absolute path found, or the bare name when it was found nowhere.
    program: OsString,
    found: Option<Found>,
    version: Result<String, String>,
}

impl Tool {
    /// `name` where `search` finds it, asked for its version in `dir`; or,
    /// found nowhere or unable to say, why not and `remedy`.
    async fn identify(search: &Search, name: &str, dir: &Path, remedy: &str) -> Self {
        match search.find(name, toolpath::is_program) {
            Ok(found) => Tool {
                program: found.program.clone().into_os_string(),
                version: probe(found.program.as_os_str(), dir, remedy).await,
                found: Some(found),
            },
            Err(missing) => Tool {
                program: name.into(),
                found: None,
                version: Err(format!("{missing}: {remedy}")),
            },
        }
    }

    /// `tsc 5.9.3 (node_modules/.bin)`, or `unavailable`.
    fn identity(&self, name: &str) -> String {
        match (&self.version, &self.found) {
            (Ok(version), Some(found)) => format!("{name} {version} ({})", found.label),
            _ => format!("{name} unavailable"),
        }
    }

    /// What `trellis check --verbose` shows of this tool for `stage`, if it
    /// runs.
    fn used_by(&self, stage: &str) -> Option<ToolUse> {
        self.version.as_ref().ok()?;
        Some(self.found.as_ref()?.used_by(stage))
    }
}

/// The Node.js tools of one workspace, identified once.
#[derive(Clone, Debug)]
pub struct NodeTools {
    node: Tool,
    tsc: Tool,
    /// The language service, from the same place as `tsc`: its fixes are
    /// for the compiler that measures them.
    tsserver: Option<Found>,
}

impl NodeTools {
    /// Finds `tsc` in the `node_modules/.bin` of `workspace` or a directory
    /// above it, else on `PATH` ([`toolpath`]), and `tsserver` beside it;
    /// `node` on `PATH`; and asks each for its version.
    pub async fn detect(workspace: &Path) -> Self {
        let search = Search::default().node_modules(workspace).path();
        let tsc = Tool::identify(&search, "tsc", workspace, TSC_MISSING).await;
        let tsserver = tsc.found.as_ref().and_then(|tsc| {
            let beside = tsc.program.with_file_name("tsserver");
            toolpath::is_program(&beside).then(|| Found {
                tool: "tsserver".to_owned(),
                program: beside,
                ..tsc.clone()
            })
        });
        let tsserver = tsserver.or_else(|| search.find("tsserver", toolpath::is_program).ok());
        let node = Tool::identify(&Search::default().path(), "node", workspace, NODE_MISSING).await;
        NodeTools {
            node: Tool {
                version: node.version.map(|printed| printed.trim().to_owned()),
                ..node
            },
            tsc: Tool {
                version: tsc
                    .version
                    .map(|printed| printed.trim().trim_start_matches("Version ").to_owned()),
                ..tsc
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
async fn probe(program: &OsStr, dir: &Path, remedy: &str) -> Result<String, String> {
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
    format!("…{}", text::tail(text, limit))
}
