//! Measuring a realized state: run every configured stage, then assess.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::api::{Progress, StageSummary};
use crate::cluster::{Assessment, EnergyModel, assess};
use crate::config::Config;
use crate::digest::{CanonicalHasher, Digest};
use crate::sensor::{Sensor, SensorRun, StageReport};

/// Everything the sensors said about one state root.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub root: Digest,
    pub reports: Vec<StageReport>,
    pub assessment: Assessment,
    /// The sensor profile (fingerprints, required stages, energy model):
    /// energies are comparable only under one profile.
    pub profile: Digest,
    /// Recorded cost: total sensor time in milliseconds.
    pub cost_ms: u64,
}

impl Measurement {
    pub fn energy(&self) -> f64 {
        self.assessment.energy
    }

    pub fn hard_pass(&self) -> bool {
        self.assessment.hard_pass
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
            })
            .collect()
    }
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
    h.finish()
}

/// Runs every sensor on `dir` in order. A stage runs even when an earlier
/// one failed: `cargo test` on code that does not compile still *ran* and
/// reports the compile errors, which keeps S_req meaningful.
#[allow(clippy::too_many_arguments)]
pub async fn measure(
    root: Digest,
    dir: &Path,
    target_dir: &Path,
    sensors: &[Box<dyn Sensor>],
    config: &Config,
    label: &str,
    progress: &dyn Progress,
    cancel: &CancellationToken,
) -> Measurement {
    let model = EnergyModel::V1;
    let mut reports = Vec::with_capacity(sensors.len());
    for sensor in sensors {
        progress.report(&format!("{label}: {}", sensor.stage()), None);
        let deadline = match sensor.stage() {
            "test" => config.stages.test_timeout_secs,
            _ => config.stages.build_timeout_secs,
        };
        let report = sensor
            .run(SensorRun {
                dir,
                target_dir,
                deadline: Duration::from_secs(deadline),
                cancel: cancel.clone(),
            })
            .await;
        reports.push(report);
    }
    let assessment = assess(&reports, &config.stages.required, &model);
    let cost_ms = reports.iter().map(|r| r.duration_ms).sum();
    Measurement {
        root,
        reports,
        assessment,
        profile: profile(sensors, config, &model),
        cost_ms,
    }
}
