//! A stage that cannot run in this workspace at all: its tool is not
//! installed (neither ty nor pyright), or this build has no sensor for it.
//!
//! It still fills its stage, so a required stage that cannot run is a
//! visible `Unavailable` report naming what to install, never a stage that
//! silently does not exist (which would read as "nothing to check").

use std::time::Instant;

use super::{BoxFuture, Sensor, SensorFingerprint, SensorRun, StageReport, StageStatus};

/// Reports [`StageStatus::Unavailable`] with a fixed reason on every run.
pub struct UnavailableStage {
    stage: String,
    fingerprint: SensorFingerprint,
    reason: String,
}

impl UnavailableStage {
    /// The stage `stage`, fingerprinted as the tool `tool` that is missing.
    pub fn new(stage: &str, tool: &str, reason: String) -> Self {
        Self {
            stage: stage.to_owned(),
            fingerprint: SensorFingerprint {
                tool: tool.to_owned(),
                version: "unavailable".to_owned(),
                config: String::new(),
            },
            reason,
        }
    }
}

impl Sensor for UnavailableStage {
    fn stage(&self) -> &str {
        &self.stage
    }

    fn fingerprint(&self) -> &SensorFingerprint {
        &self.fingerprint
    }

    fn run<'a>(&'a self, _run: SensorRun<'a>) -> BoxFuture<'a, StageReport> {
        let started = Instant::now();
        Box::pin(async move {
            StageReport {
                stage: self.stage.clone(),
                fingerprint: self.fingerprint.clone(),
                status: StageStatus::Unavailable {
                    reason: self.reason.clone(),
                },
                diagnostics: Vec::new(),
                failures: Vec::new(),
                tests_passed: 0,
                tests_run: Vec::new(),
                duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                truncated: false,
                notes: Vec::new(),
                blocks_tests: None,
                not_run: None,
                unchecked: Vec::new(),
                failing: Vec::new(),
            }
        })
    }
}
