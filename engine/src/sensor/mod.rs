//! Sensors: the project's own tools, run as bounded stages.
//!
//! A [`Sensor`] runs one stage (`build`, `test`) in a directory and returns a
//! [`StageReport`]. A stage that could not run is
//! [`StageStatus::Unavailable`]; whether that blocks hard pass is decided by
//! the stage policy, not by the sensor.

pub mod cargo;
mod check_units;
pub mod file_tests;
mod libtest;
mod mirror;
pub mod oracle;
pub(crate) mod original_tests;
pub mod process;
pub mod python;
mod rust_tests;
pub mod rustc_json;
pub mod sandbox;
pub(crate) mod seed;
#[cfg(target_os = "linux")]
mod supervisor;
pub mod test_inventory;
pub mod toolpath;
pub mod typescript;
pub mod unavailable;

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::diagnostic::{Diagnostic, Rerun, TestFailure};
use crate::digest::{CanonicalHasher, Digest};

/// Which tool measured, at which version, configured how (PSP-10 Assumption 2).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SensorFingerprint {
    /// `cargo-check`, `cargo-test`, ...
    pub tool: String,
    /// Tool versions, e.g. `cargo 1.95.0 (...); rustc 1.95.0 (...)`.
    pub version: String,
    /// The arguments and settings that change what the tool reports.
    pub config: String,
}

impl SensorFingerprint {
    pub fn digest(&self) -> Digest {
        CanonicalHasher::new("trellis.sensor-fingerprint.v1")
            .str(&self.tool)
            .str(&self.version)
            .str(&self.config)
            .finish()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum StageStatus {
    /// The tool ran and reported no error.
    Passed,
    /// The tool ran and reported errors or failing tests.
    Failed,
    /// The tool could not run to completion (missing binary, timeout,
    /// cancellation, or an earlier stage it depends on failed).
    Unavailable { reason: String },
}

/// What one stage observed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    pub stage: String,
    pub fingerprint: SensorFingerprint,
    pub status: StageStatus,
    /// Structured diagnostics, deduplicated across targets.
    pub diagnostics: Vec<Diagnostic>,
    /// Failing tests, each a concrete counterexample.
    pub failures: Vec<TestFailure>,
    /// How many tests passed (0 for non-test stages).
    pub tests_passed: u32,
    /// Every test that ran to an outcome, passed or failed, by the id its
    /// runner reports (`<binary>::<name>`, a pytest node id, Node's `suite >
    /// test`), sorted; a skipped, ignored, `xfail` or `todo` test is not
    /// here. What [`test_inventory::no_longer_run`] compares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests_run: Vec<String>,
    pub duration_ms: u64,
    /// True when an output stream exceeded its retained-byte cap.
    pub truncated: bool,
    /// What a person should know about the measurement itself (skipped
    /// malformed output lines, a hit output cap).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Set by a build stage whose errors lie in code that every test build
    /// of the workspace compiles, saying where: the test stage would stop
    /// at the same errors (see [`Sensor::implied`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_tests: Option<String>,
    /// Why this stage's report was decided without a run of its own: by
    /// the stages before it ([`Sensor::implied`]) or by the run of the one
    /// after it ([`Sensor::run_deciding`]); `None` for a stage that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
    /// The workspace's targets this run did not compile because something
    /// they depend on did not build (a package's name for its library, else
    /// `package kind name`), sorted: their own errors, if any, are not in
    /// this report. Set by the build stage (`cargo check --keep-going`
    /// compiles every target it can); a candidate measured on other targets
    /// than its root is not compared with it ([`crate::search::Coverage`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unchecked: Vec<String>,
    /// The workspace's targets this run reported an error in, named as in
    /// `unchecked`, sorted: a target a candidate let be checked counts as
    /// revealed only when it has errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
}

/// Where and how a sensor runs.
pub struct SensorRun<'a> {
    /// The workspace copy to measure.
    pub dir: &'a Path,
    /// The base of the slots' own build output directories, kept apart
    /// from the user's `target/` ([`SensorRun::own_target`]).
    pub target_dir: &'a Path,
    pub deadline: Duration,
    pub cancel: CancellationToken,
    /// What the run's sandbox allows: whose code `dir` holds decides it.
    pub policy: sandbox::Policy,
}

impl SensorRun<'_> {
    /// The measured tree's own directory below [`SensorRun::target_dir`]:
    /// its cargo target directory, its reports, anything its tools write.
    pub fn own_target(&self) -> PathBuf {
        tree_target(self.target_dir, self.dir)
    }

    /// The measured tree's private temporary directory below
    /// [`SensorRun::target_dir`], beside [`SensorRun::own_target`].
    fn own_tmp(&self) -> PathBuf {
        self.target_dir.join(format!("tmp-{}", tree_id(self.dir)))
    }

    /// The sandbox every process of this run is confined by: it may write
    /// the measured tree, its own target directory and a private
    /// temporary directory beside that, no more.
    pub fn sandbox(&self) -> sandbox::Sandbox {
        sandbox::Sandbox::new(
            self.dir,
            &self.own_target(),
            &self.own_tmp(),
            self.policy.clone(),
        )
    }
}

/// The directory of the measured tree `dir` below `base` (the slots'
/// [`SensorRun::target_dir`]): one per source tree, so two slots never
/// share a workspace member's artifacts (cargo names those by their path
/// relative to the workspace root, the same in every slot, and could take
/// one slot's for another's). Slots share dependencies by seeding instead
/// (`seed.rs`).
pub fn tree_target(base: &Path, dir: &Path) -> PathBuf {
    base.join(format!("tree-{}", tree_id(dir)))
}

/// The short id naming the directories of the measured tree `dir`.
fn tree_id(dir: &Path) -> String {
    CanonicalHasher::new("trellis.slot-target.v1")
        .bytes(dir.as_os_str().as_encoded_bytes())
        .finish()
        .short(12)
}

pub type BoxFuture<'a, T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A stage the engine can run. Object-safe so the stage list is configuration.
/// Every sensor implements it directly, by hand: one `impl Sensor` per
/// stage type, whose methods delegate to the type's own `measure` (and
/// `rerun`, where it re-runs tests by name).
pub trait Sensor: Send + Sync {
    /// The stage id this sensor fills (`build`, `test`).
    fn stage(&self) -> &str;
    fn fingerprint(&self) -> &SensorFingerprint;
    /// The programs this stage runs, each with why that one
    /// ([`toolpath`]): what `trellis check --verbose` names. Empty for a
    /// stage whose tool could not be found (its report says where it was
    /// looked for) and for the Rust stages, which run the `cargo` on
    /// `PATH` by name.
    fn tools(&self) -> Vec<toolpath::ToolUse> {
        Vec::new()
    }
    fn run<'a>(&'a self, run: SensorRun<'a>) -> BoxFuture<'a, StageReport>;
    /// This stage's report on the tree that produced `earlier` (the reports
    /// of the stages before it in one measurement), when those already
    /// decide it and running the tool would only repeat them: `cargo test`
    /// on a workspace whose `cargo check` found an error in code every test
    /// build compiles. `None` (the default): the stage must run.
    fn implied(&self, _earlier: &[StageReport]) -> Option<StageReport> {
        None
    }

    /// Whether one run of this stage may also decide `earlier`, the stage
    /// before it: `cargo test`, whose build compiles what `cargo check`
    /// does. Only then is [`Sensor::run_deciding`] called.
    fn may_decide(&self, _earlier: &dyn Sensor) -> bool {
        false
    }

    /// Runs this stage; with its report, the report of the stage it
    /// [`may_decide`](Sensor::may_decide) when this run proves what that
    /// stage would report (see [`check_units`]), or `None` when that stage
    /// must still run.
    fn run_deciding<'a>(
        &'a self,
        run: SensorRun<'a>,
    ) -> BoxFuture<'a, (StageReport, Option<StageReport>)> {
        Box::pin(async move { (self.run(run).await, None) })
    }

    /// Re-runs `failures` (this stage's, from a run in `run.dir`) once, in
    /// the same directory, each by its exact name, and returns them with
    /// [`TestFailure::rerun`] set. A stage that cannot re-run a test alone
    /// marks every failure [`Rerun::NotRerun`].
    fn rerun<'a>(
        &'a self,
        _run: SensorRun<'a>,
        failures: &'a [TestFailure],
    ) -> BoxFuture<'a, Vec<TestFailure>> {
        Box::pin(async move { rerun_outcome(failures, |_| Rerun::NotRerun) })
    }
}

/// `failures`, each with the re-run outcome `outcome` gives it.
pub(crate) fn rerun_outcome(
    failures: &[TestFailure],
    outcome: impl Fn(&TestFailure) -> Rerun,
) -> Vec<TestFailure> {
    failures
        .iter()
        .map(|f| TestFailure {
            rerun: Some(outcome(f)),
            ..f.clone()
        })
        .collect()
}

/// What one run of a tool observed, before it is timed and named as a
/// stage: the common middle of the cargo and TypeScript sensors.
pub(crate) struct Observation {
    pub(crate) status: StageStatus,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) failures: Vec<TestFailure>,
    pub(crate) tests_passed: u32,
    /// See [`StageReport::tests_run`]; in any order.
    pub(crate) tests_run: Vec<String>,
    pub(crate) truncated: bool,
    pub(crate) notes: Vec<String>,
    /// See [`StageReport::blocks_tests`].
    pub(crate) blocks_tests: Option<String>,
    /// See [`StageReport::unchecked`].
    pub(crate) unchecked: Vec<String>,
    /// See [`StageReport::failing`].
    pub(crate) failing: Vec<String>,
}

impl Observation {
    /// A run that could not measure, and why.
    pub(crate) fn unavailable(reason: String) -> Self {
        Self::of_status(StageStatus::Unavailable { reason })
    }

    /// `status` with nothing observed beside it.
    pub(crate) fn of_status(status: StageStatus) -> Self {
        Observation {
            status,
            diagnostics: Vec::new(),
            failures: Vec::new(),
            tests_passed: 0,
            tests_run: Vec::new(),
            truncated: false,
            notes: Vec::new(),
            blocks_tests: None,
            unchecked: Vec::new(),
            failing: Vec::new(),
        }
    }

    /// The report of `stage`, timed from `started`.
    pub(crate) fn into_report(
        self,
        stage: &str,
        fingerprint: &SensorFingerprint,
        started: std::time::Instant,
    ) -> StageReport {
        let mut tests_run = self.tests_run;
        tests_run.sort();
        StageReport {
            stage: stage.to_owned(),
            fingerprint: fingerprint.clone(),
            status: self.status,
            diagnostics: self.diagnostics,
            failures: self.failures,
            tests_passed: self.tests_passed,
            tests_run,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            truncated: self.truncated,
            notes: self.notes,
            blocks_tests: self.blocks_tests,
            not_run: None,
            unchecked: self.unchecked,
            failing: self.failing,
        }
    }
}

/// A stage report with just what a pure-core test needs.
#[cfg(test)]
pub(crate) fn test_report(
    stage: &str,
    status: StageStatus,
    diagnostics: Vec<Diagnostic>,
    failures: Vec<TestFailure>,
) -> StageReport {
    StageReport {
        stage: stage.into(),
        fingerprint: SensorFingerprint {
            tool: stage.into(),
            version: "1".into(),
            config: String::new(),
        },
        status,
        diagnostics,
        failures,
        tests_passed: 0,
        tests_run: Vec::new(),
        duration_ms: 1,
        truncated: false,
        notes: Vec::new(),
        blocks_tests: None,
        not_run: None,
        unchecked: Vec::new(),
        failing: Vec::new(),
    }
}
