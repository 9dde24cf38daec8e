//! The Rust stages: `cargo check` (stage `build`) and `cargo test` (stage
//! `test`) as [`Sensor`]s.
//!
//! [`CargoToolchain::detect`] pins the tool identity once (cargo and rustc
//! versions); [`CargoStage::check`] and [`CargoStage::test`] run cargo with
//! JSON messages in a separate target directory, bounded by [`run_bounded`],
//! and turn what it printed into a [`StageReport`]. A stage that could not measure (no cargo,
//! timeout, cancellation, a failure cargo did not explain) is
//! [`StageStatus::Unavailable`] with a reason a person can act on.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio_util::sync::CancellationToken;
use trellis_core::text;

pub use super::libtest::ABNORMAL_EXIT;
use super::libtest::{self, ParsedFailure};
use super::mirror::Mirror;
use super::process::{self, Confinement, ProcessLimits, ProcessOutput, run_bounded};
use super::rustc_json::{self, Compilation, TargetId, WorkspacePaths};
use super::sandbox;
use super::{
    BoxFuture, Observation, Sensor, SensorFingerprint, SensorRun, StageReport, StageStatus,
    check_units, seed, tree_target,
};
use crate::diagnostic::{Call, Diagnostic, Level, Rerun, TestFailure};

/// Environment set on every cargo run. Part of the fingerprint: it changes
/// what the tool prints (colour codes, backtraces in test output).
const ENVIRONMENT: &[(&str, &str)] = &[("CARGO_TERM_COLOR", "never"), ("RUST_BACKTRACE", "0")];

/// The stage id of [`CargoStage::check`].
const BUILD_STAGE: &str = "build";

/// `--keep-going`: cargo otherwise stops at the first package that fails,
/// so which dependents of a failing member report their errors would
/// depend on scheduling; with it every package that can be compiled is,
/// and one state always gives the same evidence.
const CHECK_ARGS: &[&str] = &[
    "check",
    "--workspace",
    "--all-targets",
    "--keep-going",
    "--message-format=json",
    "--color",
    "never",
];

/// `cargo test` takes no `--keep-going` (cargo 1.95 refuses it, and
/// `--no-fail-fast` covers the test runs, not the build): a test build
/// that fails may stop at any failing package, but then no test runs, and
/// the build stage, which runs after a test build that failed (see
/// `check_units`), reports every package's errors under [`CHECK_ARGS`].
/// The same diagnostics deduplicate across stages, so the state's evidence
/// is the check's whatever the test build reached.
const TEST_ARGS: &[&str] = &[
    "test",
    "--workspace",
    "--no-fail-fast",
    "--message-format=json",
    "--color",
    "never",
];

/// The workspace's own packages and targets, for [`check_units`]: read
/// from the manifests, without resolving dependencies or writing a lock.
const METADATA_ARGS: &[&str] = &["metadata", "--no-deps", "--format-version", "1"];

/// Why a build stage has no run of its own: a test run decided it.
const DECIDED_BY_THE_TEST_BUILD: &str =
    "decided by the test stage's build, which compiled every target `cargo check` does";

/// `cargo test` re-running one binary's failing tests: [`TEST_ARGS`] with
/// the binary's own selector in place of `--workspace`.
const RERUN_ARGS: &[&str] = &[
    "test",
    "--no-fail-fast",
    "--message-format=json",
    "--color",
    "never",
];
/// How [`without_debuginfo`] shows in a stage's fingerprint: what the
/// stage runs, with the member names left out (they are the workspace's).
const AT_WORKSPACE_PATH: &str = "at the workspace's paths, the user's profile";

const MEMBERS_WITHOUT_DEBUGINFO: &str = "--config profile.dev.package.<member>.debug=0 --config profile.dev.package.<member>.strip=\"debuginfo\"";

/// Bounds for the version probes: they print a few lines and return at once
/// unless rustup has to install a toolchain first.
fn probe_limits() -> ProcessLimits {
    ProcessLimits {
        deadline: Duration::from_secs(120),
        stdout_cap: 64 * 1024,
        stderr_cap: 64 * 1024,
    }
}

/// The cargo a workspace builds with, identified once.
#[derive(Clone, Debug)]
pub struct CargoToolchain {
    program: OsString,
    /// `cargo 1.95.0 (...); rustc 1.95.0 (commit ...)`, or why the toolchain
    /// cannot run.
    version: Result<String, String>,
}

impl CargoToolchain {
    /// Identify `program` (normally `cargo`) and the `rustc` it drives
    /// (`$RUSTC` or `rustc`), as seen from `workspace`, where a
    /// `rust-toolchain.toml` may select another toolchain.
    pub async fn detect(program: impl Into<OsString>, workspace: &Path) -> Self {
        let program = program.into();
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        // Asked at once: each costs a start of rustup's proxy and the tool.
        let (cargo, rustc) = tokio::join!(
            probe(&program, &["--version"], workspace),
            probe(&rustc, &["-vV"], workspace),
        );
        let version =
            cargo.and_then(|cargo| Ok(format!("{}; {}", cargo.trim(), rustc_identity(&rustc?))));
        Self { program, version }
    }

    /// The version string, or why the toolchain is unavailable.
    pub fn version(&self) -> Result<&str, &str> {
        self.version.as_deref().map_err(String::as_str)
    }
}

/// `rustc 1.95.0 (59807616e...)` from `rustc -vV`'s `release:` and
/// `commit-hash:` lines; the full text when those are missing.
fn rustc_identity(verbose: &str) -> String {
    let field = |key: &str| {
        verbose
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .map(str::trim)
    };
    match (field("release:"), field("commit-hash:")) {
        (Some(release), Some(commit)) => format!("rustc {release} ({commit})"),
        _ => verbose.trim().to_owned(),
    }
}

/// Run a version probe; its stdout, or a reason naming what is missing.
async fn probe(program: &OsString, args: &[&str], dir: &Path) -> Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir);
    let shown = format!("{} {}", program.to_string_lossy(), args.join(" "));
    let remedy = ": install a Rust toolchain or put it on PATH";
    let output = process::probe(cmd, &shown, &probe_limits(), remedy).await?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The build and test stages for the workspace at `workspace`, using the
/// `cargo` on `PATH`, as `[build]` says: `rustc_wrapper` (such as
/// `sccache`) as `RUSTC_WRAPPER` when configured, otherwise the
/// environment's; `at_workspace_path`, slots built where the workspace is
/// (see [`mirror`]) when this system allows it. Missing tools still yield
/// both sensors; each run then reports [`StageStatus::Unavailable`].
pub async fn rust_sensors(
    workspace: &Path,
    rustc_wrapper: Option<&str>,
    at_workspace_path: bool,
) -> Vec<Box<dyn Sensor>> {
    let mut setup = StageSetup::for_workspace(workspace, rustc_wrapper);
    let mirrorable = setup.mirrorable(at_workspace_path);
    let (toolchain, mirrored) = tokio::join!(CargoToolchain::detect("cargo", workspace), async {
        mirrorable && mirror_available().await
    });
    setup.mirrored = mirrored;
    vec![
        Box::new(CargoStage::check_with(&toolchain, setup.clone())),
        Box::new(CargoStage::test_with(&toolchain, setup)),
    ]
}

/// Seeds the target directory of the slot `dir` (one of `base`) for its
/// first run, as that run would seed it itself (`generates_code`: for a
/// `cargo test`), but ahead of it, so the caller can do it while it waits
/// for something else: the view's slot while the toolchain's versions are
/// still being asked for, the first branch's slot while the view is
/// measured. The arguments are [`rust_sensors`]'s. The slot need not exist
/// yet: its lock is then the user's, and its incremental state is seeded
/// whenever slots may be built at the user's paths, since the run's own
/// seeding, finding this one done, adds nothing. Blocks (it probes whether
/// a mirror is allowed, once per process); stops early, leaving the rest
/// to a later run, once `stop` is cancelled.
pub fn prepare_slot(
    workspace: &Path,
    rustc_wrapper: Option<&str>,
    at_workspace_path: bool,
    base: &Path,
    dir: &Path,
    generates_code: bool,
    stop: &CancellationToken,
) {
    let mut setup = StageSetup::for_workspace(workspace, rustc_wrapper);
    setup.mirrored = setup.mirrorable(at_workspace_path) && sandbox::mirror_available();
    setup.seed(base, dir, setup.mirrored, generates_code, stop);
}

/// Whether slots can be built at the workspace's paths here (probed once,
/// off the async threads).
async fn mirror_available() -> bool {
    tokio::task::spawn_blocking(sandbox::mirror_available)
        .await
        .unwrap_or(false)
}

/// Where the user's own builds of `workspace` go: `$CARGO_TARGET_DIR`
/// (relative to the workspace, as cargo reads it there) or `target/`. Only
/// ever read, to seed slots.
pub fn user_target(workspace: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => workspace.join(dir),
        _ => workspace.join("target"),
    }
}

/// The slot's `Cargo.lock`, or the user's when the snapshot has none (a
/// library that ignores its lock file); `None` before cargo wrote one.
fn slot_lock(dir: &Path, user: Option<&UserBuild>) -> Option<String> {
    std::fs::read_to_string(dir.join("Cargo.lock"))
        .or_else(|err| user.map_or(Err(err), |user| std::fs::read_to_string(&user.lock)))
        .ok()
}

/// Cargo arguments that build the path packages `members` (the only crates
/// a slot compiles once seeded) without debug information, in every
/// profile that inherits `dev` (`cargo test`'s): rustc skips generating it
/// and the linker skips copying the dependencies' into the test binaries,
/// about a third of a member's build. Nothing a stage reports reads it: a
/// panic's location is compiled in, symbol names stay, and tests run with
/// `RUST_BACKTRACE=0`. Registry dependencies keep the user's profile, so
/// their seeded artifacts still match. A name that is not a plain package
/// name is left alone.
fn without_debuginfo(members: &BTreeSet<String>) -> Vec<String> {
    members
        .iter()
        .filter(|name| {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .flat_map(|name| {
            ["debug=0", "strip=\"debuginfo\""].map(|setting| {
                [
                    "--config".to_owned(),
                    format!("profile.dev.package.\"{name}\".{setting}"),
                ]
            })
        })
        .flatten()
        .collect()
}

/// The mounts that build the slot `dir` at the user's paths, when the
/// stages are `mirrored` and this run's can be planned ([`Mirror::plan`]).
fn plan_mirror(
    mirrored: bool,
    user: Option<&UserBuild>,
    dir: &Path,
    target: &Path,
) -> Option<Mirror> {
    let user = user.filter(|_| mirrored)?;
    Mirror::plan(&user.root, dir, &user.target, target)
}

/// Seeds the slot's target directory `target` (below `base`) once, from the
/// user's target directory and the other slots' under `base`, with the
/// registry dependencies `packages` (of the slot's lock), and, when the slot builds
/// at the user's paths (`mirrored`), with a copy of the user's incremental
/// state, the part of it a check never reads only before a build that
/// `generates_code`. Best effort: a failure only costs the build time it
/// would have saved. Stops early once `stop` is cancelled.
fn warm(
    target: &Path,
    base: &Path,
    packages: &BTreeSet<String>,
    user: Option<&UserBuild>,
    mirrored: bool,
    generates_code: bool,
    stop: &CancellationToken,
) {
    let mut sources: Vec<PathBuf> = user.map(|user| user.target.clone()).into_iter().collect();
    if let Ok(entries) = std::fs::read_dir(base) {
        let mut siblings: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.as_path() != target
                    && path
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("tree-"))
                    // What a model's code built is never trusted elsewhere.
                    && !path.join(MODEL_CODE_RAN).exists()
            })
            .collect();
        siblings.sort();
        sources.extend(siblings);
    }
    let incremental = user.filter(|_| mirrored).map(|user| user.target.as_path());
    let store = seed_store(base);
    // A shared file must be read-only to the slot: only a sandbox makes it so.
    let sharing = match user {
        Some(user) if sandbox::support().confines_files() => seed::Sharing::Store {
            store: &store,
            from: &user.target,
        },
        _ => seed::Sharing::Copy,
    };
    let started = Instant::now();
    match seed::seed_target(
        target,
        &sources,
        packages,
        incremental,
        generates_code,
        sharing,
        stop,
    ) {
        Ok(report) if report.linked + report.copied > 0 => tracing::info!(
            target = %target.display(),
            linked = report.linked,
            copied = report.copied,
            generates_code,
            ms = started.elapsed().as_millis(),
            "seeded the slot's target directory"
        ),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {
            tracing::debug!(target = %target.display(), "seeding stopped: the run was cancelled");
        }
        Err(error) => tracing::warn!(
            target = %target.display(),
            %error,
            "could not seed the slot's target directory; cargo builds what is missing"
        ),
    }
}

/// Written into a slot's target directory before model-written code is
/// built or tested there: its artifacts are never seeded into another slot.
const MODEL_CODE_RAN: &str = ".trellis-model-code";

/// The store below the slots' target directories that holds the user's
/// artifacts the slots share (`seed::Sharing::Store`); no sandbox may
/// write it.
const SEED_STORE: &str = "seeds";

/// The seed store of the slots whose target directories are below `base`.
pub fn seed_store(base: &Path) -> PathBuf {
    base.join(SEED_STORE)
}

/// What every cargo stage of one workspace shares.
#[derive(Clone, Debug, Default)]
struct StageSetup {
    /// The user's own build, seeded from; `None` seeds from slots only.
    user: Option<UserBuild>,
    rustc_wrapper: Option<String>,
    /// Slots are built at the user's paths ([`mirror`]), with the user's
    /// profile unchanged so rustc can reuse the user's incremental state.
    mirrored: bool,
}

/// A slot made ready for one cargo run ([`StageSetup::prepare`]).
struct PreparedSlot {
    /// The path packages of the slot's lock, built without debug
    /// information outside a mirror; `None` before cargo wrote a lock.
    members: Option<BTreeSet<String>>,
    /// The mounts that build the slot at the user's paths, when planned.
    mirror: Option<Mirror>,
}

impl StageSetup {
    /// The stages' setup for the workspace at `workspace`, built at the
    /// slots' own paths until [`StageSetup::mirrored`] is set.
    fn for_workspace(workspace: &Path, rustc_wrapper: Option<&str>) -> Self {
        StageSetup {
            user: Some(UserBuild {
                root: workspace.to_path_buf(),
                lock: workspace.join("Cargo.lock"),
                target: user_target(workspace),
            }),
            rustc_wrapper: rustc_wrapper.map(str::to_owned),
            mirrored: false,
        }
    }

    /// Whether slots may be built at the workspace's paths, when the system
    /// allows it: `at_workspace_path` (`[build]`) and no caching wrapper,
    /// which gets no incremental builds, so nothing would be reused.
    fn mirrorable(&self, at_workspace_path: bool) -> bool {
        at_workspace_path && !self.wraps_rustc()
    }

    /// Plans the mirror of the slot `dir` (one of `base`) and seeds its
    /// target directory for a run that `generates_code` or not
    /// ([`warm`]), until `stop` is cancelled. Blocks.
    fn prepare(
        &self,
        base: &Path,
        dir: &Path,
        generates_code: bool,
        stop: &CancellationToken,
    ) -> PreparedSlot {
        let mirror = plan_mirror(
            self.mirrored,
            self.user.as_ref(),
            dir,
            &tree_target(base, dir),
        );
        let members = self.seed(base, dir, mirror.is_some(), generates_code, stop);
        PreparedSlot { members, mirror }
    }

    /// Seeds the target directory of the slot `dir` (one of `base`) for a
    /// run that `generates_code` or not, with the user's incremental state
    /// when the run sees the user's paths (`at_users_paths`) ([`warm`]), and
    /// says the path packages of the slot's lock: `None` before cargo wrote
    /// one (the first run writes it; the next seeds). Stops early once
    /// `stop` is cancelled. Blocks.
    fn seed(
        &self,
        base: &Path,
        dir: &Path,
        at_users_paths: bool,
        generates_code: bool,
        stop: &CancellationToken,
    ) -> Option<BTreeSet<String>> {
        let user = self.user.as_ref();
        let target = tree_target(base, dir);
        slot_lock(dir, user).map(|lock| {
            let packages = seed::lock_packages(&lock);
            let registry = &packages.registry;
            warm(
                &target,
                base,
                registry,
                user,
                at_users_paths,
                generates_code,
                stop,
            );
            packages.path
        })
    }

    /// Whether rustc runs under a wrapper: `[build] rustc_wrapper`, or a
    /// non-empty `RUSTC_WRAPPER` the slot's cargo inherits.
    fn wraps_rustc(&self) -> bool {
        self.rustc_wrapper.is_some()
            || std::env::var_os("RUSTC_WRAPPER").is_some_and(|w| !w.is_empty())
    }
}

/// The user's workspace, lock file and target directory: only ever read.
#[derive(Clone, Debug)]
struct UserBuild {
    root: PathBuf,
    lock: PathBuf,
    target: PathBuf,
}

/// A cargo stage (`build` or `test`): what it needs to run and to
/// interpret its output.
pub struct CargoStage {
    stage: &'static str,
    args: &'static [&'static str],
    reads_tests: bool,
    program: OsString,
    setup: StageSetup,
    fingerprint: SensorFingerprint,
    unavailable: Option<String>,
    /// The fingerprint of the build stage (`cargo check`, the same setup)
    /// one run of this stage can decide: the test stage's.
    decides: Option<SensorFingerprint>,
}

impl CargoStage {
    fn new(
        toolchain: &CargoToolchain,
        stage: &'static str,
        tool: &str,
        args: &'static [&'static str],
        reads_tests: bool,
        setup: StageSetup,
    ) -> Self {
        let mut environment: Vec<String> = ENVIRONMENT
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        if let Some(wrapper) = &setup.rustc_wrapper {
            environment.push(format!("RUSTC_WRAPPER={wrapper}"));
        }
        if setup.wraps_rustc() {
            environment.push("CARGO_INCREMENTAL=0".to_owned());
        }
        let profile = if setup.mirrored {
            AT_WORKSPACE_PATH
        } else {
            MEMBERS_WITHOUT_DEBUGINFO
        };
        let fingerprint = SensorFingerprint {
            tool: tool.to_owned(),
            version: toolchain
                .version()
                .map_or_else(|_| "unavailable".to_owned(), str::to_owned),
            config: format!(
                "{} cargo {} {profile}",
                environment.join(" "),
                args.join(" ")
            ),
        };
        Self {
            stage,
            args,
            reads_tests,
            program: toolchain.program.clone(),
            setup,
            fingerprint,
            unavailable: toolchain.version().err().map(str::to_owned),
            decides: None,
        }
    }

    async fn measure(&self, run: SensorRun<'_>) -> StageReport {
        let started = Instant::now();
        let observation = match &self.unavailable {
            Some(reason) => Observation::unavailable(reason.clone()),
            None => self.observe(&run).await,
        };
        observation.into_report(self.stage, &self.fingerprint, started)
    }

    async fn observe(&self, run: &SensorRun<'_>) -> Observation {
        self.observe_with(run, self.args.iter().copied(), false)
            .await
            .0
    }

    /// [`Self::measure`], and the build stage's report when this run's
    /// build proves it ([`check_units`]).
    async fn measure_deciding(&self, run: SensorRun<'_>) -> (StageReport, Option<StageReport>) {
        let (Some(build), None) = (&self.decides, &self.unavailable) else {
            return (self.measure(run).await, None);
        };
        let started = Instant::now();
        let (observation, decided) = self
            .observe_with(&run, self.args.iter().copied(), true)
            .await;
        let decided = decided.map(|decided| {
            let mut report = decided.into_report(BUILD_STAGE, build, started);
            report.duration_ms = 0;
            report.not_run = Some(DECIDED_BY_THE_TEST_BUILD.to_owned());
            report
        });
        (
            observation.into_report(self.stage, &self.fingerprint, started),
            decided,
        )
    }

    /// Re-runs each failing test binary once with only its failing tests,
    /// by exact name (`cargo test -p demo --lib -- --exact tests::a`), in
    /// the same slot and target directory. A failure is `FailedAgain` when
    /// the re-run reports it again, `Passed` when it does not, `NotRerun`
    /// when its binary has no re-run selector (cargo names one for every
    /// binary that failed), it is no single test, or the re-run itself
    /// could not run.
    async fn rerun_by_name(
        &self,
        run: SensorRun<'_>,
        failures: &[TestFailure],
    ) -> Vec<TestFailure> {
        let mut outcomes: Vec<(String, String, Rerun)> = Vec::new();
        let mut binaries: Vec<&str> = failures.iter().map(|f| f.binary.as_str()).collect();
        binaries.sort_unstable();
        binaries.dedup();
        for binary in binaries {
            let names: Vec<&str> = failures
                .iter()
                .filter(|f| f.binary == binary && f.name != ABNORMAL_EXIT)
                .map(|f| f.name.as_str())
                .collect();
            // Only a selector cargo printed (`-p demo --lib`) names a binary.
            if !binary.starts_with('-') || names.is_empty() || run.cancel.is_cancelled() {
                continue;
            }
            let args = RERUN_ARGS
                .iter()
                .copied()
                .chain(binary.split_whitespace())
                .chain(["--", "--exact"])
                .chain(names.iter().copied());
            let (again, _) = self.observe_with(&run, args, false).await;
            let failed_again = names
                .iter()
                .filter(|name| again.failures.iter().any(|f| f.name == **name))
                .count();
            // A pass counts only when every named test that did not fail
            // again was seen passing: a filter that ran nothing is no pass.
            let ran = !matches!(again.status, StageStatus::Unavailable { .. })
                && again.tests_passed as usize >= names.len() - failed_again;
            for name in names {
                let outcome = if !ran {
                    Rerun::NotRerun
                } else if again.failures.iter().any(|f| f.name == name) {
                    Rerun::FailedAgain
                } else {
                    Rerun::Passed
                };
                outcomes.push((binary.to_owned(), name.to_owned(), outcome));
            }
        }
        super::rerun_outcome(failures, |f| {
            outcomes
                .iter()
                .find(|(binary, name, _)| *binary == f.binary && *name == f.name)
                .map_or(Rerun::NotRerun, |(_, _, outcome)| *outcome)
        })
    }

    /// One cargo run with `args` in the slot, seeded first; with what it
    /// observed, the build stage's observation when `decide_build` and the
    /// run's build proves it ([`check_units`]).
    async fn observe_with<'x>(
        &self,
        run: &SensorRun<'_>,
        args: impl IntoIterator<Item = &'x str>,
        decide_build: bool,
    ) -> (Observation, Option<Observation>) {
        let target = run.own_target();
        let sandbox = run.sandbox();
        if run.policy.model_code {
            let marked = std::fs::create_dir_all(&target)
                .and_then(|()| std::fs::write(target.join(MODEL_CODE_RAN), b""));
            if let Err(error) = marked {
                let reason = format!("{}: {error}", target.display());
                return (Observation::unavailable(reason), None);
            }
        }
        let (setup, base, dir, stop) = (
            self.setup.clone(),
            run.target_dir.to_path_buf(),
            run.dir.to_path_buf(),
            run.cancel.clone(),
        );
        // `cargo test` builds with code generation, `cargo check` without.
        let generates_code = self.reads_tests;
        let seeding =
            tokio::task::spawn_blocking(move || setup.prepare(&base, &dir, generates_code, &stop));
        // Read while cargo runs: only the run's interpretation needs it.
        // The test run reads the metadata to decide the build stage, and the
        // build stage to say which targets it could not check.
        let reads_metadata = decide_build || !self.reads_tests;
        let metadata = async {
            if !reads_metadata {
                return None;
            }
            let mut cmd = Command::new(&self.program);
            cmd.args(METADATA_ARGS)
                .current_dir(run.dir)
                .envs(ENVIRONMENT.iter().copied());
            let limits = ProcessLimits {
                deadline: run.deadline.min(probe_limits().deadline),
                stdout_cap: 32 * 1024 * 1024,
                stderr_cap: 64 * 1024,
            };
            match run_bounded(cmd, Confinement::Slot(&sandbox, None), &limits, &run.cancel).await {
                Ok(output) if output.status.success() && !output.truncated() => Some(output.stdout),
                _ => None,
            }
        };
        let (members, mut mirror) = match seeding.await {
            Ok(PreparedSlot { members, mirror }) => (members.unwrap_or_default(), mirror),
            Err(error) => {
                tracing::warn!(%error, "seeding the slot's target directory failed");
                (BTreeSet::new(), None)
            }
        };
        let args: Vec<&str> = args.into_iter().collect();
        let limits = ProcessLimits::with_deadline(run.deadline);
        let lockfile = GeneratedLockfile::before(run.dir, &target);
        let command =
            |mirror: Option<&Mirror>| self.command(run.dir, &args, &members, &target, mirror);
        let (mut output, metadata) = tokio::join!(
            run_bounded(
                command(mirror.as_ref()),
                Confinement::Slot(&sandbox, mirror.as_ref()),
                &limits,
                &run.cancel
            ),
            metadata
        );
        if let Some(plan) = &mirror {
            plan.tidy();
        }
        if let (Some(_), Err(error @ process::ProcessError::Launch { .. })) = (&mirror, &output) {
            tracing::warn!(%error, "this slot cannot be built at the workspace's paths; building it at its own");
            mirror = None;
            output = run_bounded(
                command(None),
                Confinement::Slot(&sandbox, None),
                &limits,
                &run.cancel,
            )
            .await;
        }
        if let Err(error) = lockfile.put_away() {
            return (Observation::unavailable(error), None);
        }
        let output = match output {
            Ok(output) => output,
            Err(error) => return (Observation::unavailable(error.to_string()), None),
        };
        // Resolved after the run: cargo may just have created the target
        // directory, which must exist to be excluded from the workspace.
        let mut paths = match WorkspacePaths::new(run.dir, &target) {
            Ok(paths) => paths,
            Err(error) => {
                let reason = format!("workspace {} cannot be read: {error}", run.dir.display());
                return (Observation::unavailable(reason), None);
            }
        };
        // The metadata names the slot by its own paths.
        let metadata = metadata.map(|metadata| String::from_utf8_lossy(&metadata).into_owned());
        let expected = metadata
            .as_deref()
            .filter(|_| decide_build)
            .and_then(|metadata| check_units::check_compilations(metadata, &mut paths));
        let targets = metadata
            .as_deref()
            .filter(|_| !self.reads_tests)
            .and_then(|metadata| check_units::workspace_targets(metadata, &mut paths));
        let mut paths = match &mirror {
            // What cargo printed names the slot by the user's paths.
            Some(mirror) => paths.seen_at(&mirror.root),
            None => paths,
        };
        let mut interpreted = interpret(self.stage, self.reads_tests, &output, &mut paths);
        let observation = &mut interpreted.observation;
        // A cut output or a run that could not compile says nothing of what
        // was left unchecked.
        let complete = !observation.truncated
            && matches!(
                observation.status,
                StageStatus::Passed | StageStatus::Failed
            );
        if let Some(targets) = targets.filter(|_| complete) {
            let reached = &interpreted.reached;
            observation.unchecked = check_units::labels(&targets, |id| !reached.contains(id));
            observation.failing =
                check_units::labels(&targets, |id| interpreted.failing.contains(id));
        }
        let build = expected.and_then(|expected| interpreted.deciding_build(&expected));
        (interpreted.observation, build)
    }

    /// The cargo command of one run in the slot `dir`: `args` with the
    /// target directory `target`, or, in `mirror`, where the user's
    /// workspace is.
    fn command(
        &self,
        dir: &Path,
        args: &[&str],
        members: &BTreeSet<String>,
        target: &Path,
        mirror: Option<&Mirror>,
    ) -> Command {
        let mut cmd = Command::new(&self.program);
        if !self.setup.mirrored {
            // Cargo's own options first: after `args` they could land past a
            // `--`, where the test binary would take them for filters.
            cmd.args(without_debuginfo(members));
        }
        // In a mirror the slot's target directory is seen at the user's.
        let target = mirror.map_or(target, |mirror| &mirror.user_target);
        cmd.args(args)
            .current_dir(dir)
            .env("CARGO_TARGET_DIR", target)
            .envs(ENVIRONMENT.iter().copied());
        if let Some(wrapper) = &self.setup.rustc_wrapper {
            cmd.env("RUSTC_WRAPPER", wrapper);
        }
        if self.setup.wraps_rustc() {
            // A caching wrapper (sccache) cannot cache incremental builds,
            // and a slot's incremental state is thrown away with it anyway.
            cmd.env("CARGO_INCREMENTAL", "0");
        }
        cmd
    }
}

/// A measurement leaves the tree it measured as it found it. Cargo writes a
/// `Cargo.lock` beside a manifest that has none (most library crates); left
/// in a branch slot, it would become part of the next snapshot of the slot
/// and so of the repair written to the user's files. The lockfile cargo
/// generated is moved into the target directory after the run and put back
/// before the next one, so the slot's runs keep resolving the same versions.
struct GeneratedLockfile {
    /// `Cargo.lock` in the measured directory, when it had none.
    generated: Option<std::path::PathBuf>,
    kept: std::path::PathBuf,
}

impl GeneratedLockfile {
    fn before(dir: &Path, target_dir: &Path) -> Self {
        let lockfile = dir.join("Cargo.lock");
        let kept = target_dir.join("trellis-generated-Cargo.lock");
        let generated = match std::fs::symlink_metadata(&lockfile) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                // A lockfile kept from an earlier run; cargo regenerates a
                // stale one as it would the user's.
                let _ = std::fs::copy(&kept, &lockfile);
                Some(lockfile)
            }
            _ => None,
        };
        Self { generated, kept }
    }

    /// Moves the generated lockfile out of the measured tree; an error when
    /// it stays there.
    fn put_away(self) -> Result<(), String> {
        let Some(lockfile) = self.generated else {
            return Ok(());
        };
        if std::fs::symlink_metadata(&lockfile).is_err() {
            return Ok(());
        }
        if std::fs::rename(&lockfile, &self.kept).is_ok() {
            return Ok(());
        }
        std::fs::remove_file(&lockfile).map_err(|error| {
            format!(
                "cargo generated {}, which cannot be removed: {error}",
                lockfile.display()
            )
        })
    }
}

/// What one cargo run observed, and what its build compiled.
struct Interpreted {
    observation: Observation,
    /// The workspace's compilations the build made or found fresh.
    compiled: BTreeSet<Compilation>,
    /// The workspace's targets the build compiled, found fresh or reported on.
    reached: BTreeSet<TargetId>,
    /// The workspace's targets the build reported an error in.
    failing: BTreeSet<TargetId>,
    build_succeeded: Option<bool>,
}

impl Interpreted {
    /// The build stage's observation, decided by this run: when its build
    /// succeeded having compiled every compilation in `expected` (what
    /// `cargo check` would), rustc printed every diagnostic the check
    /// would, with the same `cfg`. `None` when it did not, or its output
    /// was cut.
    fn deciding_build(&self, expected: &BTreeSet<Compilation>) -> Option<Observation> {
        let observation = &self.observation;
        let clean = self.build_succeeded == Some(true)
            && !observation.truncated
            && !observation
                .diagnostics
                .iter()
                .any(|d| d.level == Level::Error);
        (clean && expected.is_subset(&self.compiled)).then(|| Observation {
            status: StageStatus::Passed,
            diagnostics: observation
                .diagnostics
                .iter()
                .map(|diagnostic| Diagnostic {
                    stage: BUILD_STAGE.to_owned(),
                    ..diagnostic.clone()
                })
                .collect(),
            notes: observation.notes.clone(),
            ..Observation::of_status(StageStatus::Passed)
        })
    }
}

/// Turn cargo's output into a stage observation.
fn interpret(
    stage: &str,
    reads_tests: bool,
    output: &ProcessOutput,
    paths: &mut WorkspacePaths,
) -> Interpreted {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut lines: Vec<&str> = stdout.lines().collect();
    if output.stdout_truncated && !stdout.ends_with('\n') {
        // The cap cut the last line; it is not malformed, just incomplete.
        lines.pop();
    }
    // Cargo finishes every build before it runs a test binary, so its JSON
    // precedes libtest's first `running N tests` header; a test's captured
    // output that happens to look like JSON is never read as a message.
    let first_test_line = if reads_tests {
        lines
            .iter()
            .position(|line| libtest::is_block_header(line))
            .unwrap_or(lines.len())
    } else {
        lines.len()
    };
    let (json_lines, test_lines) = lines.split_at(first_test_line);

    let mut messages =
        rustc_json::parse_compiler_messages(json_lines.iter().copied(), stage, paths);
    let mut notes = Vec::new();
    if messages.malformed_lines > 0 {
        tracing::warn!(
            stage,
            lines = messages.malformed_lines,
            "skipped malformed JSON lines from cargo"
        );
        notes.push(format!(
            "skipped {} line(s) of cargo output that looked like JSON but could not be read",
            messages.malformed_lines
        ));
    }
    if output.truncated() {
        notes.push(
            "cargo's output exceeded the retained-byte cap; later output was discarded".to_owned(),
        );
    }
    let tests = if reads_tests {
        libtest::parse_test_run(test_lines.iter().copied(), &stderr)
    } else {
        libtest::TestRun::default()
    };
    let failures: Vec<TestFailure> = tests
        .failures
        .into_iter()
        .map(|failure| locate(failure, paths))
        .collect();
    let mut diagnostics = std::mem::take(&mut messages.diagnostics);

    let has_errors = diagnostics
        .iter()
        .any(|diagnostic| diagnostic.level == Level::Error);
    let status = if has_errors || !failures.is_empty() {
        StageStatus::Failed
    } else if output.status.success() {
        StageStatus::Passed
    } else {
        // Cargo failed without saying why in a form we read: a broken
        // manifest, an unresolvable dependency, a failing build script. Say
        // what it printed, and point at the manifest line when it names one.
        diagnostics.extend(manifest_diagnostic(stage, &stderr, paths));
        StageStatus::Unavailable {
            reason: format!(
                "cargo exited with {} without a compiler error or failing test: {}",
                output.status,
                stderr_summary(&stderr)
            ),
        }
    };
    Interpreted {
        observation: Observation {
            status,
            diagnostics,
            failures,
            tests_passed: tests.passed,
            tests_run: tests.ran,
            truncated: output.truncated(),
            notes,
            blocks_tests: messages.blocks_tests,
            unchecked: Vec::new(),
            failing: Vec::new(),
        },
        compiled: messages.compiled,
        reached: messages.reached,
        failing: messages.failing,
        build_succeeded: messages.build_succeeded,
    }
}

fn locate(failure: ParsedFailure, paths: &mut WorkspacePaths) -> TestFailure {
    let location = failure
        .panic_site
        .and_then(|site| paths.point(&site.file, site.line, site.column));
    let mut calls = Vec::new();
    if let Some(span) = &location
        && let Some(source) = paths.source(&span.path)
    {
        for name in libtest::called_functions(&source, &failure.name, span.line_start) {
            let defined = libtest::definition(&source, &name);
            if defined.is_some_and(|(line, _)| libtest::is_test_helper(&span.path, &source, line)) {
                continue;
            }
            let defined_at =
                defined.and_then(|(line, column)| paths.point(&span.path, line, column));
            calls.push(Call { name, defined_at });
        }
    }
    TestFailure {
        binary: failure.binary,
        name: failure.name,
        output: failure.output,
        location,
        calls,
        rerun: None,
    }
}

/// Cargo's own complaints, without the progress lines (`Compiling ...`).
fn stderr_summary(stderr: &str) -> String {
    const LIMIT: usize = 4 * 1024;
    let progress = [
        "Compiling ",
        "Checking ",
        "Finished ",
        "Running ",
        "Doc-tests ",
        "Locking ",
        "Updating ",
        "Downloading ",
        "Downloaded ",
        "Blocking ",
    ];
    let kept: Vec<&str> = stderr
        .lines()
        .filter(|line| {
            let trimmed = line.trim_start();
            !progress.iter().any(|prefix| trimmed.starts_with(prefix))
        })
        .collect();
    let summary = kept.join("\n");
    let summary = summary.trim();
    if summary.len() <= LIMIT {
        return summary.to_owned();
    }
    format!("{}…", text::head(summary, LIMIT))
}

/// A diagnostic for a manifest error cargo reported as
/// `error: <message>` followed by ` --> Cargo.toml:5:14`.
fn manifest_diagnostic(
    stage: &str,
    stderr: &str,
    paths: &mut WorkspacePaths,
) -> Option<Diagnostic> {
    let lines: Vec<&str> = stderr.lines().collect();
    let (index, location) = lines.iter().enumerate().find_map(|(index, line)| {
        let location = line.trim_start().strip_prefix("--> ")?;
        location.contains("Cargo.toml").then_some((index, location))
    })?;
    let mut parts = location.rsplitn(3, ':');
    let column = parts.next()?.parse().ok()?;
    let line = parts.next()?.parse().ok()?;
    let primary = paths.point(parts.next()?, line, column)?;
    let message = lines[..index]
        .iter()
        .rev()
        .find_map(|line| line.strip_prefix("error: "))
        .unwrap_or("invalid manifest")
        .to_owned();
    Some(Diagnostic {
        stage: stage.to_owned(),
        code: None,
        level: Level::Error,
        message,
        primary: Some(primary),
        secondary: Vec::new(),
        notes: Vec::new(),
        suggestions: Vec::new(),
        rendered: Some(stderr_summary(stderr)),
    })
}

impl CargoStage {
    /// Stage `build`: `cargo check --workspace --all-targets --keep-going
    /// --message-format=json`, without seeding from a user's target
    /// directory or a wrapper.
    pub fn check(toolchain: &CargoToolchain) -> Self {
        Self::check_with(toolchain, StageSetup::default())
    }

    /// Stage `test`: `cargo test --workspace --no-fail-fast
    /// --message-format=json`, without seeding or a wrapper.
    pub fn test(toolchain: &CargoToolchain) -> Self {
        Self::test_with(toolchain, StageSetup::default())
    }

    fn check_with(toolchain: &CargoToolchain, setup: StageSetup) -> Self {
        CargoStage::new(
            toolchain,
            BUILD_STAGE,
            "cargo-check",
            CHECK_ARGS,
            false,
            setup,
        )
    }

    fn test_with(toolchain: &CargoToolchain, setup: StageSetup) -> Self {
        let build = Self::check_with(toolchain, setup.clone()).fingerprint;
        CargoStage {
            decides: Some(build),
            ..CargoStage::new(toolchain, "test", "cargo-test", TEST_ARGS, true, setup)
        }
    }
}

impl Sensor for CargoStage {
    fn stage(&self) -> &str {
        self.stage
    }

    fn fingerprint(&self) -> &SensorFingerprint {
        &self.fingerprint
    }

    fn run<'a>(&'a self, run: SensorRun<'a>) -> BoxFuture<'a, StageReport> {
        Box::pin(self.measure(run))
    }

    /// The test stage on a tree whose `cargo check` (stage `build`, in
    /// `earlier`) found an error every test build compiles: `cargo test`
    /// builds everything before it runs a test, and stops at the first
    /// crate that does not compile, so it would fail at those errors and
    /// run nothing. Reported as failed with no diagnostics of its own (the
    /// build stage's are the same sites), never run.
    fn implied(&self, earlier: &[StageReport]) -> Option<StageReport> {
        if !self.reads_tests {
            return None;
        }
        let blocker = earlier
            .iter()
            .filter(|r| r.stage == BUILD_STAGE && r.status == StageStatus::Failed)
            .find_map(|r| r.blocks_tests.as_deref())?;
        let mut report = Observation::of_status(StageStatus::Failed).into_report(
            self.stage,
            &self.fingerprint,
            Instant::now(),
        );
        report.not_run = Some(blocker.to_owned());
        Some(report)
    }

    fn may_decide(&self, earlier: &dyn Sensor) -> bool {
        self.decides.as_ref() == Some(earlier.fingerprint())
    }

    fn run_deciding<'a>(
        &'a self,
        run: SensorRun<'a>,
    ) -> BoxFuture<'a, (StageReport, Option<StageReport>)> {
        Box::pin(self.measure_deciding(run))
    }

    fn rerun<'a>(
        &'a self,
        run: SensorRun<'a>,
        failures: &'a [TestFailure],
    ) -> BoxFuture<'a, Vec<TestFailure>> {
        Box::pin(self.rerun_by_name(run, failures))
    }
}

#[cfg(all(test, unix))]
#[path = "cargo_fuzz.rs"]
mod fuzz_tests;

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::*;

    fn output(code: i32, stdout: &str, stderr: &str, stdout_truncated: bool) -> ProcessOutput {
        ProcessOutput {
            status: ExitStatus::from_raw(code << 8),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
            stdout_truncated,
            stderr_truncated: false,
            elapsed: Duration::ZERO,
        }
    }

    fn paths() -> (tempfile::TempDir, WorkspacePaths) {
        let dir = tempfile::tempdir().unwrap();
        let paths = WorkspacePaths::new(dir.path(), &dir.path().join("target")).unwrap();
        (dir, paths)
    }

    #[test]
    fn a_line_cut_by_the_cap_is_incomplete_not_malformed() {
        let (_dir, mut paths) = paths();
        let cut = output(
            0,
            "{\"reason\":\"build-finished\",\"success\":true}\n{\"reas",
            "",
            true,
        );
        let observation = interpret("build", false, &cut, &mut paths).observation;
        assert_eq!(observation.status, StageStatus::Passed);
        assert!(observation.truncated);
        assert_eq!(observation.notes.len(), 1, "{:?}", observation.notes);
        assert!(observation.notes[0].contains("cap"));
    }

    #[test]
    fn unexplained_cargo_failure_is_unavailable_with_its_stderr() {
        let (_dir, mut paths) = paths();
        let failed = output(
            101,
            "",
            "    Updating crates.io index\nerror: no matching package named `nope` found\n",
            false,
        );
        let observation = interpret("build", false, &failed, &mut paths).observation;
        let StageStatus::Unavailable { reason } = observation.status else {
            panic!("unavailable expected");
        };
        assert!(
            reason.ends_with("error: no matching package named `nope` found"),
            "{reason}"
        );
        assert!(!reason.contains("Updating"), "{reason}");
    }

    #[test]
    fn a_generated_lockfile_is_put_away_and_back_and_a_users_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let lockfile = dir.path().join("Cargo.lock");

        let run = GeneratedLockfile::before(dir.path(), &target);
        assert!(!lockfile.exists());
        std::fs::write(&lockfile, "generated").unwrap(); // cargo's doing
        run.put_away().unwrap();
        assert!(!lockfile.exists(), "the measured tree is as it was");

        let run = GeneratedLockfile::before(dir.path(), &target);
        assert_eq!(std::fs::read_to_string(&lockfile).unwrap(), "generated");
        run.put_away().unwrap();
        assert!(!lockfile.exists());

        std::fs::write(&lockfile, "the user's").unwrap();
        let run = GeneratedLockfile::before(dir.path(), &target);
        run.put_away().unwrap();
        assert_eq!(std::fs::read_to_string(&lockfile).unwrap(), "the user's");
    }

    #[test]
    fn a_lockfile_that_cannot_be_put_away_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        let run = GeneratedLockfile::before(dir.path(), &target);
        // Injected: neither renamed (the keeping place is a non-empty
        // directory) nor removed (it is a directory itself).
        std::fs::create_dir_all(target.join("trellis-generated-Cargo.lock/x")).unwrap();
        std::fs::create_dir_all(dir.path().join("Cargo.lock/y")).unwrap();
        let error = run.put_away().unwrap_err();
        assert!(
            error.contains("Cargo.lock") && error.contains("cannot be removed"),
            "{error}"
        );
    }

    /// A user's workspace `user` whose target directory holds `itoa`'s
    /// library (at the returned path below it), a slot directory and the
    /// base of the slots' target directories, all in `dir`.
    struct ItoaUser {
        slot: PathBuf,
        base: PathBuf,
        user: PathBuf,
        rlib: &'static str,
    }

    /// A `Cargo.lock` naming `itoa` from the registry.
    const ITOA_LOCK: &str = "[[package]]\nname = \"itoa\"\nversion = \"1.0.0\"\n\
                             source = \"registry+https://github.com/rust-lang/crates.io-index\"\n";

    fn itoa_user(dir: &Path) -> ItoaUser {
        let (slot, base, user) = (dir.join("slot"), dir.join("targets"), dir.join("user"));
        std::fs::create_dir_all(&slot).unwrap();
        let rlib = "debug/deps/libitoa-0123456789abcdef.rlib";
        std::fs::create_dir_all(user.join("target/debug/deps")).unwrap();
        std::fs::write(user.join("target").join(rlib), b"rlib").unwrap();
        ItoaUser {
            slot,
            base,
            user,
            rlib,
        }
    }

    #[test]
    fn a_slot_without_a_lock_file_is_seeded_by_the_users_lock() {
        let dir = tempfile::tempdir().unwrap();
        let at = itoa_user(dir.path());
        std::fs::write(at.user.join("Cargo.lock"), ITOA_LOCK).unwrap();
        let build = UserBuild {
            root: at.user.clone(),
            lock: at.user.join("Cargo.lock"),
            target: at.user.join("target"),
        };
        let target = tree_target(&at.base, &at.slot);
        let lock = slot_lock(&at.slot, Some(&build)).expect("the user's lock");
        let packages = seed::lock_packages(&lock).registry;
        warm(
            &target,
            &at.base,
            &packages,
            Some(&build),
            false,
            false,
            &CancellationToken::new(),
        );
        assert_eq!(std::fs::read(target.join(at.rlib)).unwrap(), b"rlib");
    }

    #[test]
    fn a_slot_prepared_before_the_stages_exist_is_seeded_where_its_first_check_reads() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let at = itoa_user(dir.path());
        std::fs::write(at.slot.join("Cargo.lock"), ITOA_LOCK).unwrap();

        prepare_slot(
            &at.user,
            None,
            false,
            &at.base,
            &at.slot,
            false,
            &CancellationToken::new(),
        );

        let ino = |path: &Path| std::fs::metadata(path).unwrap().ino();
        let seeded = tree_target(&at.base, &at.slot).join(at.rlib);
        assert_eq!(ino(&seeded), ino(&at.user.join("target").join(at.rlib)));
    }

    #[test]
    fn only_plain_package_names_are_built_without_debuginfo() {
        let members = BTreeSet::from(["my-app".to_owned(), "a\"b".to_owned(), String::new()]);
        assert_eq!(
            without_debuginfo(&members),
            [
                "--config",
                "profile.dev.package.\"my-app\".debug=0",
                "--config",
                "profile.dev.package.\"my-app\".strip=\"debuginfo\"",
            ]
        );
        assert!(without_debuginfo(&BTreeSet::new()).is_empty());
    }

    #[test]
    fn rustc_identity_keeps_release_and_commit() {
        let verbose = "rustc 1.95.0 (59807616e 2026-04-14)\nbinary: rustc\n\
                       commit-hash: 59807616e1fa\nrelease: 1.95.0\n";
        assert_eq!(rustc_identity(verbose), "rustc 1.95.0 (59807616e1fa)");
    }

    #[test]
    fn stderr_summary_drops_progress_lines() {
        let stderr = "   Compiling a v0.1.0\nerror: unclosed table\n --> Cargo.toml:5:14\n";
        assert_eq!(
            stderr_summary(stderr),
            "error: unclosed table\n --> Cargo.toml:5:14"
        );
    }
}
