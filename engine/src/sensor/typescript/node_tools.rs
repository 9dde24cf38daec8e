//! The Node.js tools of one TypeScript workspace, found and identified
//! once ([`NodeTools::detect`]): what every TypeScript stage runs and
//! fingerprints. The stages are built on it and [`super::typescript_sensors`]
//! assembles them; neither is imported here.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::Duration;

use tokio::process::Command;
use trellis_core::text;

use crate::sensor::process::{self, ProcessLimits};
use crate::sensor::toolpath::{self, Found, Search, ToolUse};

/// One tool a stage runs: where it was found and its version, or why it
/// cannot run.
#[derive(Clone, Debug)]
pub(super) struct Tool {
    /// The absolute path found, or the bare name when it was found nowhere.
    pub(super) program: OsString,
    pub(super) found: Option<Found>,
    pub(super) version: Result<String, String>,
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
    pub(super) fn identity(&self, name: &str) -> String {
        match (&self.version, &self.found) {
            (Ok(version), Some(found)) => format!("{name} {version} ({})", found.label),
            _ => format!("{name} unavailable"),
        }
    }

    /// What `trellis check --verbose` shows of this tool for `stage`, if it
    /// runs.
    pub(super) fn used_by(&self, stage: &str) -> Option<ToolUse> {
        self.version.as_ref().ok()?;
        Some(self.found.as_ref()?.used_by(stage))
    }
}

/// The Node.js tools of one workspace, identified once.
#[derive(Clone, Debug)]
pub struct NodeTools {
    pub(super) node: Tool,
    pub(super) tsc: Tool,
    /// The language service, from the same place as `tsc`: its fixes are
    /// for the compiler that measures them.
    pub(super) tsserver: Option<Found>,
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
    pub(super) fn compiler_identity(&self) -> String {
        format!(
            "{}; {}",
            self.tsc.identity("tsc"),
            self.node.identity("node")
        )
    }
}

pub(super) const TSC_MISSING: &str = "install TypeScript in the project (`npm install --save-dev typescript`) \
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
pub(super) fn tail(text: &str, limit: usize) -> String {
    let text = text.trim();
    if text.len() <= limit {
        return text.to_owned();
    }
    format!("…{}", text::tail(text, limit))
}
