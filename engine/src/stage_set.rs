//! Which sensors a workspace runs: the stage set of every language it was
//! detected as ([`Config::languages`]), in [`crate::language::Language::ALL`]
//! order, so a mixed workspace runs both sets and measures one profile.
//!
//! Each language's sensors are built by its own module under `sensor/`;
//! this module only selects and concatenates them. It never runs one.

use std::path::Path;

use crate::config::Config;
use crate::language::Language;
use crate::sensor::Sensor;
use crate::sensor::cargo::rust_sensors;
use crate::sensor::python::{PythonSetup, python_sensors};
use crate::sensor::typescript::typescript_sensors;

/// The sensors of every detected language of the workspace at `root`.
/// Missing tools still yield every stage; each run then reports why it
/// could not measure.
pub async fn sensors(root: &Path, config: &Config) -> Vec<Box<dyn Sensor>> {
    let mut sensors = Vec::new();
    for language in &config.languages {
        sensors.extend(language_sensors(*language, root, config).await);
    }
    sensors
}

async fn language_sensors(
    language: Language,
    root: &Path,
    config: &Config,
) -> Vec<Box<dyn Sensor>> {
    match language {
        Language::Rust => {
            rust_sensors(
                root,
                config.build.rustc_wrapper.as_deref(),
                config.build.at_workspace_path,
            )
            .await
        }
        Language::Python => {
            let setup = PythonSetup {
                interpreter: config.python.interpreter.clone(),
                lint_blocks: config.stages.required.iter().any(|s| s == "python.lint"),
            };
            python_sensors(root, &setup).await
        }
        Language::TypeScript => typescript_sensors(root).await,
    }
}
