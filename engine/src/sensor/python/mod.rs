//! The Python stages: `python.typecheck` (ty, or pyright where ty is not
//! installed), `python.test` (pytest) and `python.lint` (ruff), as
//! [`Sensor`]s.
//!
//! [`python_sensors`] identifies every tool once (its version and the
//! interpreter's go into the fingerprint) and builds the three stages; a
//! tool that is missing still fills its stage, which then reports
//! [`StageStatus::Unavailable`] naming where it was looked for and what to
//! install. Each tool is the one the interpreter's environment holds, else
//! poetry's or conda's, else `PATH`'s ([`super::toolpath`]): an editor
//! starts the server without the virtualenv activated. Every run starts the
//! tool and points it at the user's interpreter ([`interpreter`]) by
//! absolute path, so a branch measures the user's environment without a
//! copy of it, and keeps
//! the measured tree as it found it: no bytecode, no tool caches written
//! into it.
//!
//! ty and pyright are separate sensors with separate fingerprints: which
//! one measured a state is part of its sensor profile, and energies under
//! one are never compared with energies under the other.
//!
//! # Architecture invariant
//!
//! A virtualenv in the workspace is measured in place and no slot holds a copy,
//! and a repair writes only the files it fixed
//! (`python::a_virtualenv_in_the_workspace_measures_and_no_slot_holds_a_copy`,
//! `repair_commits_tys_import_fix_and_writes_nothing_else`,
//! `scan_tests::a_virtual_environment_is_never_content_nor_context`).

#[cfg(test)]
mod fuzz_tests;
mod interpreter;
mod junit;
mod lsp_position;
mod pyright;
mod pytest;
mod ruff;
pub(crate) mod test_inventory;
mod ty;
mod ty_fixes;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::process::Command;
use trellis_core::text;

use super::process::{self, Confinement, ProcessLimits, ProcessOutput, run_bounded};
use super::rustc_json::WorkspacePaths;
use super::toolpath::{self, Found, Search};
use super::unavailable::UnavailableStage;
use super::{Sensor, SensorFingerprint, SensorRun, StageReport, StageStatus};
use crate::diagnostic::{Diagnostic, Level, TestFailure};

pub use interpreter::{Interpreter, site_packages};

/// Environment set on every Python tool run. Part of the fingerprint.
/// No bytecode: `__pycache__` written into a branch slot would become part
/// of the branch's snapshot and of the repair.
const ENVIRONMENT: &[(&str, &str)] = &[
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("NO_COLOR", "1"),
    ("PYTHONHASHSEED", "0"),
];

/// How the Python stages of one workspace are set up.
#[derive(Clone, Debug, Default)]
pub struct PythonSetup {
    /// `[python] interpreter`, relative to the workspace or absolute.
    pub interpreter: Option<PathBuf>,
    /// Whether `python.lint` is required: its findings are then errors
    /// that block hard pass, otherwise warnings (as rustc's lints are).
    pub lint_blocks: bool,
}

/// The typecheck, test and lint stages for the workspace at `workspace`.
/// Each tool is looked for in the interpreter's environment first
/// ([`toolpath::python`]), pyright also in `node_modules/.bin`, then on
/// `PATH`; a tool found nowhere fills its stage with an
/// [`UnavailableStage`] naming where it was looked for and how to install it.
pub async fn python_sensors(workspace: &Path, setup: &PythonSetup) -> Vec<Box<dyn Sensor>> {
    let interpreter = Interpreter::detect(workspace, setup.interpreter.as_deref()).await;
    let vars = toolpath::Vars::of_process();
    let environment = toolpath::python(workspace, Path::new(&interpreter.program), &vars).await;
    let path = vars.path.as_deref();
    let npm = environment.clone().node_modules(workspace).then_path(path);
    let search = environment.then_path(path);
    let pip = |tool: &str| {
        let python = Path::new(&interpreter.program).display();
        format!(
            "into the interpreter's environment (`{python} -m pip install {tool}`) or put it on PATH"
        )
    };
    let typecheck: Box<dyn Sensor> = match identify(&search, "ty", workspace).await {
        Ok((found, version)) => Box::new(ty::TyCheck::new(found, version, &interpreter)),
        Err(ty_missing) => match identify(&npm, "pyright", workspace).await {
            Ok((found, version)) => Box::new(pyright::Pyright::new(found, version, &interpreter)),
            Err(pyright_missing) => Box::new(UnavailableStage::new(
                "python.typecheck",
                "ty-check",
                format!(
                    "no Python type checker: {ty_missing}; {pyright_missing}; \
                     install ty, the primary checker, {}; or install pyright",
                    pip("ty")
                ),
            )),
        },
    };
    let lint: Box<dyn Sensor> = match identify(&search, "ruff", workspace).await {
        Ok((found, version)) => Box::new(ruff::RuffCheck::new(found, version, setup.lint_blocks)),
        Err(missing) => Box::new(UnavailableStage::new(
            "python.lint",
            "ruff-check",
            format!("{missing}; install it {}", pip("ruff")),
        )),
    };
    vec![
        typecheck,
        Box::new(pytest::Pytest::new(&interpreter, workspace).await),
        lint,
    ]
}

/// `tool` where `search` finds it, and the first line its `--version`
/// prints (with the place it was found, for the fingerprint), or why not.
async fn identify(search: &Search, tool: &str, dir: &Path) -> Result<(Found, String), String> {
    let found = search
        .find(tool, toolpath::is_program)
        .map_err(|missing| missing.to_string())?;
    let version = probe_version(&found.program, &["--version"], dir).await?;
    let version = format!("{version} ({})", found.label);
    Ok((found, version))
}

/// Bounds for the version probes.
fn probe_limits() -> ProcessLimits {
    ProcessLimits {
        deadline: Duration::from_secs(60),
        stdout_cap: 64 * 1024,
        stderr_cap: 64 * 1024,
    }
}

/// The first line a version probe prints, or a reason naming what is missing.
async fn probe_version(
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
    dir: &Path,
) -> Result<String, String> {
    let text = probe(program, args, dir).await?;
    Ok(text.lines().next().unwrap_or_default().trim().to_owned())
}

/// What a probe prints (stdout, then stderr), or a reason naming what is
/// missing.
async fn probe(
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
    dir: &Path,
) -> Result<String, String> {
    let program = program.as_ref();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .envs(ENVIRONMENT.iter().copied());
    let shown = format!("{} {}", program.to_string_lossy(), args.join(" "));
    let output = process::probe(cmd, &shown, &probe_limits(), "").await?;
    Ok(format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// A fingerprint for `tool` at `version`, run as `args` with [`ENVIRONMENT`].
fn fingerprint(tool: &str, version: String, args: &[String]) -> SensorFingerprint {
    let environment: Vec<String> = ENVIRONMENT
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    SensorFingerprint {
        tool: tool.to_owned(),
        version,
        config: format!("{} {}", environment.join(" "), args.join(" ")),
    }
}

/// The interpreted result of one tool run.
#[derive(Debug, Default)]
struct Observation {
    diagnostics: Vec<Diagnostic>,
    failures: Vec<TestFailure>,
    tests_passed: u32,
    /// Node ids of the cases that passed or failed.
    tests_run: Vec<String>,
    notes: Vec<String>,
    /// Set when the tool could not measure; otherwise the status follows
    /// from the evidence.
    unavailable: Option<String>,
}

impl Observation {
    fn unavailable(reason: String) -> Self {
        Self {
            unavailable: Some(reason),
            ..Self::default()
        }
    }

    /// The diagnostics `tool`'s report held, or, when it could not be read,
    /// the stage unavailable saying why with what the tool printed.
    fn of_report(tool: &str, parsed: Result<Vec<Diagnostic>, String>, stderr: &[u8]) -> Self {
        match parsed {
            Ok(diagnostics) => Self {
                diagnostics,
                ..Self::default()
            },
            Err(error) => Self::unavailable(format!(
                "{tool}'s report could not be read ({error}): {}",
                summary(stderr)
            )),
        }
    }
}

/// A workspace holding `m.py` with `source`, and its path resolver: what
/// the readers' tests parse recorded reports against.
#[cfg(test)]
fn test_workspace(source: &str) -> (tempfile::TempDir, WorkspacePaths) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.py"), source).unwrap();
    let paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
    (dir, paths)
}

/// What one Python stage runs: the command and how its output is read.
struct Invocation<'a> {
    /// Why the stage cannot run at all (its interpreter is missing): then
    /// nothing is started.
    unavailable: Option<&'a str>,
    program: &'a OsString,
    args: &'a [String],
    /// Extra environment for this run (pytest's `PYTHONPATH`).
    env: Vec<(&'static str, OsString)>,
}

/// Runs `invocation` in `run.dir` within the run's bounds and turns the
/// output into a report of `stage` with `interpret`.
async fn measure(
    stage: &str,
    fingerprint: &SensorFingerprint,
    invocation: Invocation<'_>,
    run: &SensorRun<'_>,
    interpret: impl FnOnce(&ProcessOutput, &mut WorkspacePaths) -> Observation,
) -> StageReport {
    let started = Instant::now();
    if let Some(reason) = invocation.unavailable {
        let observation = Observation::unavailable(reason.to_owned());
        return report(stage, fingerprint, started, observation, false);
    }
    let mut cmd = Command::new(invocation.program);
    cmd.args(invocation.args)
        .current_dir(run.dir)
        .envs(ENVIRONMENT.iter().copied())
        .envs(invocation.env);
    let sandbox = run.sandbox();
    let output = run_bounded(
        cmd,
        Confinement::Slot(&sandbox, None),
        &ProcessLimits::with_deadline(run.deadline),
        &run.cancel,
    )
    .await;
    let (observation, truncated) = match output {
        Err(error) => (Observation::unavailable(error.to_string()), false),
        Ok(output) => match WorkspacePaths::new(run.dir, run.target_dir) {
            Ok(mut paths) => {
                let mut observation = interpret(&output, &mut paths);
                if output.truncated() {
                    observation.notes.push(format!(
                        "{}'s output exceeded the retained-byte cap; later output was discarded",
                        invocation.program.to_string_lossy()
                    ));
                }
                (observation, output.truncated())
            }
            Err(error) => (
                Observation::unavailable(format!(
                    "workspace {} cannot be read: {error}",
                    run.dir.display()
                )),
                false,
            ),
        },
    };
    report(stage, fingerprint, started, observation, truncated)
}

fn report(
    stage: &str,
    fingerprint: &SensorFingerprint,
    started: Instant,
    observation: Observation,
    truncated: bool,
) -> StageReport {
    let status = match observation.unavailable {
        Some(reason) => StageStatus::Unavailable { reason },
        None if observation
            .diagnostics
            .iter()
            .any(|d| d.level == Level::Error)
            || !observation.failures.is_empty() =>
        {
            StageStatus::Failed
        }
        None => StageStatus::Passed,
    };
    StageReport {
        stage: stage.to_owned(),
        fingerprint: fingerprint.clone(),
        status,
        diagnostics: observation.diagnostics,
        failures: observation.failures,
        tests_passed: observation.tests_passed,
        tests_run: {
            let mut run = observation.tests_run;
            run.sort();
            run
        },
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        truncated,
        notes: observation.notes,
        blocks_tests: None,
        not_run: None,
        unchecked: Vec::new(),
        failing: Vec::new(),
    }
}

/// The first lines of a tool's complaint, for an `Unavailable` reason.
fn summary(bytes: &[u8]) -> String {
    const LIMIT: usize = 2 * 1024;
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.len() <= LIMIT {
        return text.to_owned();
    }
    format!("{}…", text::head(text, LIMIT))
}

/// A sensor that is a [`measure`] of one invocation: the shared shape of
/// the Python stages' `Sensor` impls.
macro_rules! python_sensor {
    ($ty:ty $(, rerun = $rerun:ident)?) => {
        impl $crate::sensor::Sensor for $ty {
            fn stage(&self) -> &str {
                Self::STAGE
            }

            fn fingerprint(&self) -> &$crate::sensor::SensorFingerprint {
                &self.fingerprint
            }

            fn tools(&self) -> Vec<$crate::sensor::toolpath::ToolUse> {
                self.tools.clone()
            }

            fn run<'a>(
                &'a self,
                run: $crate::sensor::SensorRun<'a>,
            ) -> $crate::sensor::BoxFuture<'a, $crate::sensor::StageReport> {
                Box::pin(self.measure(run))
            }
$(
            fn rerun<'a>(
                &'a self,
                run: $crate::sensor::SensorRun<'a>,
                failures: &'a [$crate::diagnostic::TestFailure],
            ) -> $crate::sensor::BoxFuture<'a, Vec<$crate::diagnostic::TestFailure>> {
                Box::pin(self.$rerun(run, failures))
            }
)?
        }
    };
}
use python_sensor;
