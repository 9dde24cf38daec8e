//! Which sensors a workspace runs: the stage set of every language it was
//! detected as ([`Config::languages`]), in [`crate::language::Language::ALL`]
//! order, so a mixed workspace runs both sets and measures one profile.
//!
//! Each language's sensors are built by its own module under `sensor/`;
//! this module only selects and concatenates them. It never runs one.
//! [`prepare_slot`] readies a slot for its first stages ahead of them, while
//! something else is waited for.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::language::Language;
use crate::sensor::cargo::{self, rust_sensors};
use crate::sensor::python::{PythonSetup, python_sensors};
use crate::sensor::typescript::typescript_sensors;
use crate::sensor::{Sensor, sandbox};

/// The sensors of every detected language of the workspace at `root`.
/// Missing tools still yield every stage; each run then reports why it
/// could not measure.
pub async fn sensors(root: &Path, config: &Config) -> Vec<Box<dyn Sensor>> {
    let built = async {
        let mut sensors = Vec::new();
        for language in &config.languages {
            sensors.extend(language_sensors(*language, root, config).await);
        }
        sensors
    };
    // Every run of a stage is sandboxed: what the system allows is probed
    // once, off the async threads, while the tools are identified.
    let (sensors, _) = tokio::join!(built, tokio::task::spawn_blocking(sandbox::support));
    sensors
}

/// Readies the slot `dir` (whose stages keep their build output under
/// `base`) for its first run of each detected language's stages that
/// needs it, as that run would, so the caller can do it while it waits for
/// something else: Rust's target directory is seeded for `cargo check`, or
/// for `cargo test` too when `with_tests`. Blocks; stops early, leaving
/// the rest to a later run, once `stop` is cancelled.
pub fn prepare_slot(
    root: &Path,
    config: &Config,
    base: &Path,
    dir: &Path,
    with_tests: bool,
    stop: &CancellationToken,
) {
    if config.languages.contains(&Language::Rust) {
        cargo::prepare_slot(
            root,
            config.build.rustc_wrapper.as_deref(),
            config.build.at_workspace_path,
            base,
            dir,
            with_tests,
            stop,
        );
    }
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
