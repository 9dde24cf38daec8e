//! Measuring a realized state: run every configured stage, then assess.
//!
//! A failing test of a stage declared nondeterministic is re-run once by exact
//! name in the same slot; one that passes is flaky: still a failure, never a
//! no-good
//! (`search_rules::a_flaky_test_is_rerun_reported_and_never_becomes_a_no_good`,
//! `python::a_flaky_pytest_test_is_rerun_by_node_id_and_never_becomes_a_no_good`,
//! `typescript_more::a_flaky_node_test_is_rerun_by_name_and_reported_flaky`; a
//! deterministic failure is one:
//! `gate_ab_a_failure_in_a_deterministic_stage_is_a_no_good_the_next_repair_honours`).
//! A stage the next one may decide runs after it (`measure::order_tests`).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::cluster::{Assessment, EnergyModel, assess};
use crate::config::Config;
use crate::digest::{CanonicalHasher, Digest};
use crate::runtime::Progress;
use crate::sensor::oracle::OracleVerdict;
use crate::sensor::sandbox::Policy;
use crate::sensor::{Sensor, SensorRun, StageReport, StageStatus};

/// How one stage went, for a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    pub stage: String,
    pub required: bool,
    #[serde(flatten)]
    pub status: StageStatus,
    pub duration_ms: u64,
    /// Failing tests that passed when re-run (`binary::name`): reported,
    /// still failing the stage, never a no-good.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky: Vec<String>,
    /// Why the stage was decided without running (see
    /// [`crate::sensor::StageReport::not_run`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
}

/// Everything the sensors said about one state root.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub root: Digest,
    pub reports: Vec<StageReport>,
    pub assessment: Assessment,
    /// The sensor profile (fingerprints, required stages, energy model):
    /// energies are comparable only under one profile.
    pub profile: Digest,
    /// `external-oracle`'s verdict on this state, when it was judged by
    /// one: a verdict that did not pass blocks hard pass. No energy: the
    /// oracle's tests are not evidence a repair is shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<OracleVerdict>,
}

impl Measurement {
    pub fn energy(&self) -> f64 {
        self.assessment.energy
    }

    /// Every required stage ran and passed, and the oracle, if one judged
    /// the state, passed too.
    pub fn hard_pass(&self) -> bool {
        self.assessment.hard_pass && self.oracle.as_ref().is_none_or(OracleVerdict::passed)
    }

    /// The workspace targets a stage could not check because something they
    /// depend on did not build (see [`StageReport::unchecked`]).
    pub fn unchecked(&self) -> BTreeSet<String> {
        self.reports
            .iter()
            .flat_map(|r| r.unchecked.iter().cloned())
            .collect()
    }

    /// The workspace targets a stage reported an error in (see
    /// [`StageReport::failing`]).
    pub fn failing(&self) -> BTreeSet<String> {
        self.reports
            .iter()
            .flat_map(|r| r.failing.iter().cloned())
            .collect()
    }

    /// Stages that could not run.
    pub fn unavailable(&self) -> Vec<String> {
        self.reports
            .iter()
            .filter(|r| matches!(r.status, crate::sensor::StageStatus::Unavailable { .. }))
            .map(|r| r.stage.clone())
            .collect()
    }

    /// S_req: every required stage ran (passed or failed, but ran).
    pub fn required_ran(&self, config: &Config) -> bool {
        config.stages.required.iter().all(|stage| {
            self.reports.iter().any(|r| {
                &r.stage == stage
                    && !matches!(r.status, crate::sensor::StageStatus::Unavailable { .. })
            })
        })
    }

    pub fn stage_summaries(&self, config: &Config) -> Vec<StageSummary> {
        self.reports
            .iter()
            .map(|r| StageSummary {
                stage: r.stage.clone(),
                required: config.stages.required.contains(&r.stage),
                status: r.status.clone(),
                duration_ms: r.duration_ms,
                flaky: flaky_in(r).collect(),
                not_run: r.not_run.clone(),
            })
            .collect()
    }

    /// Failing tests that passed when re-run, as `binary::name`.
    pub fn flaky(&self) -> Vec<String> {
        self.reports.iter().flat_map(flaky_in).collect()
    }
}

/// The failing tests of `report` that passed when re-run, as `binary::name`
/// (or the name alone where it already starts with its binary: a pytest
/// node id starts with its file).
fn flaky_in(report: &StageReport) -> impl Iterator<Item = String> + '_ {
    report.failures.iter().filter(|f| f.is_flaky()).map(|f| {
        match f.name.strip_prefix(f.binary.as_str()) {
            Some(rest) if rest.starts_with("::") => f.name.clone(),
            _ => format!("{}::{}", f.binary, f.name),
        }
    })
}

/// The profile digest of a sensor set under a configuration.
pub fn profile(sensors: &[Box<dyn Sensor>], config: &Config, model: &EnergyModel) -> Digest {
    let mut h = CanonicalHasher::new("trellis.sensor-profile.v1");
    h.digest(&model.digest());
    h.u64(sensors.len() as u64);
    for s in sensors {
        h.str(s.stage()).digest(&s.fingerprint().digest());
    }
    h.u64(config.stages.required.len() as u64);
    for stage in &config.stages.required {
        h.str(stage);
    }
    // An oracle is one more verdict on every state: measurements under
    // another oracle (or none) are not comparable. Without one the digest
    // is what it always was.
    let verification = &config.verification;
    if let (Some(path), Some(command)) = (&verification.oracle_path, &verification.oracle_command) {
        h.str("external-oracle").str(path).u64(command.len() as u64);
        for word in command {
            h.str(word);
        }
    }
    h.finish()
}

/// Runs every sensor on `run.dir` in order. A stage runs even when an earlier
/// one failed (S_req counts it as run), unless the earlier reports already
/// decide it ([`Sensor::implied`]: `cargo test` on code `cargo check` found
/// an error in that every test build compiles), when it is reported as
/// failed without running. Nothing is shown before the end, so a stage the
/// next one [may decide](Sensor::may_decide) goes after it and runs only
/// when that run did not decide it: a branch whose `cargo test` build
/// succeeded is measured by one cargo run, not two.
pub async fn measure(root: Digest, sensors: &[Box<dyn Sensor>], run: Run<'_>) -> Measurement {
    run_stages(root, sensors, run, None).await
}

/// Where and how [`measure`] and [`measure_staged`] run the sensors: the
/// directory measured, the build's target, the stage's label, its progress,
/// cancellation and sandbox.
pub struct Run<'a> {
    pub dir: &'a Path,
    pub target_dir: &'a Path,
    pub config: &'a Config,
    pub label: &'a str,
    pub progress: &'a dyn Progress,
    pub cancel: &'a CancellationToken,
    /// The sandbox policy of every stage's run.
    pub policy: Policy,
}

/// [`measure`], showing `staged` the measurement of the stages run so far
/// after every stage but the last (whose measurement is the result), so a
/// caller can show the build's diagnostics while the tests still run. Not
/// called once `cancel` fired: a cancelled run has nothing to show. Every
/// stage runs in order, each by its own run.
pub async fn measure_staged(
    root: Digest,
    sensors: &[Box<dyn Sensor>],
    run: Run<'_>,
    staged: &(dyn Fn(&Measurement) + Sync),
) -> Measurement {
    run_stages(root, sensors, run, Some(staged)).await
}

/// [`measure_staged`] with `staged`; without, [`measure`].
async fn run_stages(
    root: Digest,
    sensors: &[Box<dyn Sensor>],
    run: Run<'_>,
    staged: Option<&(dyn Fn(&Measurement) + Sync)>,
) -> Measurement {
    let mut reports = Vec::with_capacity(sensors.len());
    let mut index = 0;
    while let Some(sensor) = sensors.get(index) {
        index += 1;
        if let Some(staged) = staged
            && index > 1
            && !run.cancel.is_cancelled()
        {
            staged(&measured(root, reports.clone(), sensors, run.config));
        }
        if let Some(report) = implied(sensor.as_ref(), &reports, &run) {
            reports.push(report);
            continue;
        }
        let decider = sensors
            .get(index)
            .filter(|next| staged.is_none() && next.may_decide(sensor.as_ref()));
        let Some(decider) = decider else {
            reports.push(run_stage(sensor.as_ref(), &run).await);
            continue;
        };
        index += 1;
        run.progress.report(
            &format!(
                "{}: {} (its build also decides {})",
                run.label,
                decider.stage(),
                sensor.stage()
            ),
            None,
        );
        let (report, decided) = decider
            .run_deciding(stage_run(decider.as_ref(), &run))
            .await;
        match decided {
            Some(decided) => reports.push(decided),
            None => reports.push(run_stage(sensor.as_ref(), &run).await),
        }
        // What the stages before it say first, as in the order they are
        // configured; its own run only counts where they do not decide it.
        if let Some(implied) = implied(decider.as_ref(), &reports, &run) {
            reports.push(implied);
        } else {
            reports.push(rerun_failures(decider.as_ref(), report, &run).await);
        }
    }
    measured(root, reports, sensors, run.config)
}

/// `sensor`'s report when the `earlier` reports decide it, said so.
fn implied(sensor: &dyn Sensor, earlier: &[StageReport], run: &Run<'_>) -> Option<StageReport> {
    let report = sensor.implied(earlier)?;
    // The earlier stages decide it: running it would repeat them.
    run.progress.report(
        &format!(
            "{}: {}: not run (the build fails)",
            run.label,
            sensor.stage()
        ),
        None,
    );
    Some(report)
}

/// Runs `sensor` on its own, its failures re-run when it is declared
/// nondeterministic.
async fn run_stage(sensor: &dyn Sensor, run: &Run<'_>) -> StageReport {
    run.progress
        .report(&format!("{}: {}", run.label, sensor.stage()), None);
    let report = sensor.run(stage_run(sensor, run)).await;
    rerun_failures(sensor, report, run).await
}

/// Where `sensor` runs, with its stage's deadline.
fn stage_run<'a>(sensor: &dyn Sensor, run: &Run<'a>) -> SensorRun<'a> {
    let deadline = run.config.stages.timeout_secs(sensor.stage());
    SensorRun {
        dir: run.dir,
        target_dir: run.target_dir,
        deadline: Duration::from_secs(deadline),
        cancel: run.cancel.clone(),
        policy: run.policy.clone(),
    }
}

/// `report` (of `sensor`), with each failing test re-run once when the
/// stage is declared nondeterministic (PSP-10 Assumption 2), so only a
/// reproduced failure is evidence.
async fn rerun_failures(
    sensor: &dyn Sensor,
    mut report: StageReport,
    run: &Run<'_>,
) -> StageReport {
    let nondeterministic = run
        .config
        .stages
        .nondeterministic
        .iter()
        .any(|s| s == sensor.stage());
    if !nondeterministic || report.failures.is_empty() || run.cancel.is_cancelled() {
        return report;
    }
    run.progress.report(
        &format!(
            "{}: {}: re-running {} failing test(s)",
            run.label,
            sensor.stage(),
            report.failures.len()
        ),
        None,
    );
    report.failures = sensor.rerun(stage_run(sensor, run), &report.failures).await;
    let flaky: Vec<String> = report
        .failures
        .iter()
        .filter(|f| f.is_flaky())
        .map(|f| f.name.clone())
        .collect();
    if !flaky.is_empty() {
        report.notes.push(format!(
            "flaky: {} failed, then passed when re-run",
            flaky.join(", ")
        ));
    }
    report
}

/// The measurement of `root` by `reports` (of `sensors`, or of the first of
/// them), assessed.
fn measured(
    root: Digest,
    reports: Vec<StageReport>,
    sensors: &[Box<dyn Sensor>],
    config: &Config,
) -> Measurement {
    let model = EnergyModel::V1;
    let assessment = assess(&reports, &config.stages.required, &model);
    Measurement {
        root,
        reports,
        assessment,
        profile: profile(sensors, config, &model),
        oracle: None,
    }
}

/// Recent measurements by state root, at most `capacity` of them, the
/// oldest forgotten first. Sensors are deterministic for a root under one
/// profile (PSP-10 Assumption 2), so a repair started right after a check
/// reuses the check's measurement; a long editing session must not keep
/// every root it ever saw.
#[derive(Debug)]
pub struct MeasurementCache {
    capacity: usize,
    by_root: std::collections::HashMap<Digest, Measurement>,
    /// Roots in insertion order, oldest first.
    order: std::collections::VecDeque<Digest>,
}

impl MeasurementCache {
    pub fn new(capacity: usize) -> MeasurementCache {
        MeasurementCache {
            capacity: capacity.max(1),
            by_root: std::collections::HashMap::new(),
            order: std::collections::VecDeque::new(),
        }
    }

    pub fn get(&self, root: &Digest) -> Option<&Measurement> {
        self.by_root.get(root)
    }

    pub fn insert(&mut self, root: Digest, measurement: Measurement) {
        if self.by_root.insert(root, measurement).is_none() {
            self.order.push_back(root);
        }
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.by_root.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod cache_tests {
    use super::*;
    use crate::digest::blob_digest;

    fn measured(root: Digest) -> Measurement {
        Measurement {
            root,
            reports: Vec::new(),
            assessment: crate::cluster::Assessment {
                diagnostics: Vec::new(),
                failures: Vec::new(),
                clusters: Vec::new(),
                energy: 0.0,
                hard_pass: true,
            },
            profile: Digest::ZERO,
            oracle: None,
        }
    }

    #[test]
    fn the_cache_forgets_the_oldest_root_beyond_its_capacity() {
        let roots: Vec<Digest> = (0..4u8).map(|i| blob_digest(&[i])).collect();
        let mut cache = MeasurementCache::new(3);
        for root in &roots {
            cache.insert(*root, measured(*root));
        }
        assert_eq!(cache.by_root.len(), 3);
        assert!(cache.get(&roots[0]).is_none(), "the oldest went first");
        assert!(roots[1..].iter().all(|r| cache.get(r).is_some()));
        // Re-inserting a known root neither grows nor reorders the cache.
        cache.insert(roots[1], measured(roots[1]));
        cache.insert(blob_digest(b"new"), measured(blob_digest(b"new")));
        assert!(cache.get(&roots[1]).is_none(), "still the oldest");
        assert_eq!(cache.by_root.len(), 3);
    }
}

#[cfg(test)]
mod order_tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::digest::blob_digest;
    use crate::runtime::NoProgress;
    use crate::sensor::{BoxFuture, SensorFingerprint, test_report};

    type Log = Arc<Mutex<Vec<String>>>;

    /// A stage that records each run in `log` and reports `status`. With
    /// `decides`, a test stage: it may decide the build stage (and does
    /// when `decides` is `Some(true)`), and a failed build implies it.
    struct Scripted {
        stage: &'static str,
        status: StageStatus,
        decides: Option<bool>,
        fingerprint: SensorFingerprint,
        log: Log,
    }

    impl Scripted {
        fn new(stage: &'static str, status: StageStatus, decides: Option<bool>, log: &Log) -> Self {
            let fingerprint = test_report(stage, StageStatus::Passed, vec![], vec![]).fingerprint;
            Scripted {
                stage,
                status,
                decides,
                fingerprint,
                log: Arc::clone(log),
            }
        }

        fn report(&self, how: &str) -> StageReport {
            self.log
                .lock()
                .unwrap()
                .push(format!("{} {how}", self.stage));
            test_report(self.stage, self.status.clone(), vec![], vec![])
        }
    }

    impl Sensor for Scripted {
        fn stage(&self) -> &str {
            self.stage
        }

        fn fingerprint(&self) -> &SensorFingerprint {
            &self.fingerprint
        }

        fn run<'a>(&'a self, _run: SensorRun<'a>) -> BoxFuture<'a, StageReport> {
            Box::pin(async move { self.report("ran") })
        }

        fn implied(&self, earlier: &[StageReport]) -> Option<StageReport> {
            let failed = earlier.iter().any(|r| r.status == StageStatus::Failed);
            (self.decides.is_some() && failed).then(|| {
                let mut report = test_report(self.stage, StageStatus::Failed, vec![], vec![]);
                report.not_run = Some("the build fails".into());
                report
            })
        }

        fn may_decide(&self, earlier: &dyn Sensor) -> bool {
            self.decides.is_some() && earlier.stage() == "build"
        }

        fn run_deciding<'a>(
            &'a self,
            _run: SensorRun<'a>,
        ) -> BoxFuture<'a, (StageReport, Option<StageReport>)> {
            Box::pin(async move {
                let own = self.report("ran, deciding build");
                let decided = (self.decides == Some(true)).then(|| {
                    let mut build = test_report("build", StageStatus::Passed, vec![], vec![]);
                    build.not_run = Some("decided".into());
                    build
                });
                (own, decided)
            })
        }
    }

    /// The reports (stage, status, why not run) of a build stage reporting
    /// `build` and a test stage that decides it when `decides`, measured by
    /// [`measure`] (by [`measure_staged`] when `staged`), and the runs.
    fn measured_with(
        build: StageStatus,
        decides: bool,
        staged: bool,
    ) -> (Vec<String>, Vec<String>) {
        let log = Log::default();
        let sensors: Vec<Box<dyn Sensor>> = vec![
            Box::new(Scripted::new("build", build, None, &log)),
            Box::new(Scripted::new(
                "test",
                StageStatus::Passed,
                Some(decides),
                &log,
            )),
        ];
        let config = Config::default();
        let cancel = CancellationToken::new();
        let dir = Path::new("/nonexistent");
        let root = blob_digest(b"tree");
        let m = tokio::runtime::Runtime::new().unwrap().block_on(async {
            let run = Run {
                dir,
                target_dir: dir,
                config: &config,
                label: "b1",
                progress: &NoProgress,
                cancel: &cancel,
                policy: Policy::USER_CODE,
            };
            if staged {
                measure_staged(root, &sensors, run, &|_| {}).await
            } else {
                measure(root, &sensors, run).await
            }
        });
        let reports = m
            .reports
            .iter()
            .map(|r| format!("{} {:?} {:?}", r.stage, r.status, r.not_run))
            .collect();
        let runs = log.lock().unwrap().clone();
        (reports, runs)
    }

    #[test]
    fn a_test_run_that_decides_the_build_is_the_only_run() {
        let (reports, runs) = measured_with(StageStatus::Passed, true, false);
        assert_eq!(runs, ["test ran, deciding build"]);
        assert_eq!(
            reports,
            ["build Passed Some(\"decided\")", "test Passed None"],
            "in the configured order"
        );
    }

    #[test]
    fn a_build_the_test_run_did_not_decide_runs_after_it_and_may_still_imply_it() {
        let (reports, runs) = measured_with(StageStatus::Passed, false, false);
        assert_eq!(runs, ["test ran, deciding build", "build ran"]);
        assert_eq!(reports, ["build Passed None", "test Passed None"]);

        // A failed build says what the test stage is, as when it ran first.
        let (reports, _) = measured_with(StageStatus::Failed, false, false);
        assert_eq!(
            reports,
            ["build Failed None", "test Failed Some(\"the build fails\")"]
        );
    }

    #[test]
    fn a_staged_measurement_runs_every_stage_in_order() {
        let (reports, runs) = measured_with(StageStatus::Passed, true, true);
        assert_eq!(runs, ["build ran", "test ran"]);
        assert_eq!(reports, ["build Passed None", "test Passed None"]);
    }
}
