//! The shape every Python stage shares: the environment each tool run
//! gets, the version probe, the fingerprint, and one [`Invocation`]
//! measured into a report. The stages (`ty`, `pyright`, `pytest`, `ruff`)
//! are built on it, each implementing `Sensor` as every sensor does, and
//! [`super::python_sensors`] assembles them; neither is imported here.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::process::Command;
use trellis_core::text;

use crate::diagnostic::{Diagnostic, Level, TestFailure};
use crate::sensor::process::{self, Confinement, ProcessLimits, ProcessOutput, run_bounded};
use crate::sensor::rustc_json::WorkspacePaths;
use crate::sensor::{SensorFingerprint, SensorRun, StageReport, StageStatus};

/// Environment set on every Python tool run. Part of the fingerprint.
/// No bytecode: `__pycache__` written into a branch slot would become part
/// of the branch's snapshot and of the repair.
pub(super) const ENVIRONMENT: &[(&str, &str)] = &[
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("NO_COLOR", "1"),
    ("PYTHONHASHSEED", "0"),
];

/// Bounds for the version probes.
fn probe_limits() -> ProcessLimits {
    ProcessLimits {
        deadline: Duration::from_secs(60),
        stdout_cap: 64 * 1024,
        stderr_cap: 64 * 1024,
    }
}

/// The first line a version probe prints, or a reason naming what is missing.
pub(super) async fn probe_version(
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
    dir: &Path,
) -> Result<String, String> {
    let text = probe(program, args, dir).await?;
    Ok(text.lines().next().unwrap_or_default().trim().to_owned())
}

/// What a probe prints (stdout, then stderr), or a reason naming what is
/// missing.
pub(super) async fn probe(
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
pub(super) fn fingerprint(tool: &str, version: String, args: &[String]) -> SensorFingerprint {
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
pub(super) struct Observation {
    pub(super) diagnostics: Vec<Diagnostic>,
    pub(super) failures: Vec<TestFailure>,
    pub(super) tests_passed: u32,
    /// Node ids of the cases that passed or failed.
    pub(super) tests_run: Vec<String>,
    pub(super) notes: Vec<String>,
    /// Set when the tool could not measure; otherwise the status follows
    /// from the evidence.
    pub(super) unavailable: Option<String>,
}

impl Observation {
    pub(super) fn unavailable(reason: String) -> Self {
        Self {
            unavailable: Some(reason),
            ..Self::default()
        }
    }

    /// The diagnostics `tool`'s report held, or, when it could not be read,
    /// the stage unavailable saying why with what the tool printed.
    pub(super) fn of_report(
        tool: &str,
        parsed: Result<Vec<Diagnostic>, String>,
        stderr: &[u8],
    ) -> Self {
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
pub(super) fn test_workspace(source: &str) -> (tempfile::TempDir, WorkspacePaths) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.py"), source).unwrap();
    let paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
    (dir, paths)
}

/// What one Python stage runs: the command and how its output is read.
pub(super) struct Invocation<'a> {
    /// Why the stage cannot run at all (its interpreter is missing): then
    /// nothing is started.
    pub(super) unavailable: Option<&'a str>,
    pub(super) program: &'a OsString,
    pub(super) args: &'a [String],
    /// Extra environment for this run (pytest's `PYTHONPATH`).
    pub(super) env: Vec<(&'static str, OsString)>,
}

/// Runs `invocation` in `run.dir` within the run's bounds and turns the
/// output into a report of `stage` with `interpret`.
pub(super) async fn measure(
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

pub(super) fn report(
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
pub(super) fn summary(bytes: &[u8]) -> String {
    const LIMIT: usize = 2 * 1024;
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.len() <= LIMIT {
        return text.to_owned();
    }
    format!("{}…", text::head(text, LIMIT))
}
