//! Measuring a realized state: run every configured stage, then assess.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::cluster::{Assessment, EnergyModel, assess};
use crate::config::Config;
use crate::digest::{CanonicalHasher, Digest};
use crate::runtime::Progress;
use crate::sensor::{Sensor, SensorRun, StageReport, StageStatus};

/// How one stage went, for a report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    pub stage: String,
    pub required: bool,
    #[serde(flatten)]
    pub status: StageStatus,
    pub duration_ms: u64,
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
        let deadline = config.stages.timeout_secs(sensor.stage());
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
            cost_ms: 0,
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
