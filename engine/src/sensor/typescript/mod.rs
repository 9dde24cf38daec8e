//! The TypeScript stages: `tsc --noEmit` (stage `typescript.typecheck`,
//! [`TscCheck`]) and the project's tests under Node's test runner (stage
//! `typescript.test`, [`NodeTest`], read from Node's runner or jest), as
//! [`Sensor`]s.
//!
//! [`NodeTools::detect`] pins the tools once per session, as the user's own
//! commands (`npm run`, `npx`) would find them ([`super::toolpath`]): the `tsc` of
//! the project's `node_modules/.bin`, or of a directory above it (an npm
//! workspace hoists its packages' tools to its root), which is the
//! TypeScript its `package.json` pins, otherwise the one on `PATH`, with
//! the `tsserver` beside it; and the `node` on `PATH`. The absolute paths
//! found are what every run starts, and their versions are part of every
//! fingerprint. A branch slot's `node_modules` is the
//! user's, linked read-only ([`crate::slots`]), so a stage measures the
//! dependencies the user installed, never a copy.
//!
//! This module and its children never write into the measured tree: tsc
//! runs with `--noEmit`, the test reporter writes below the slot's target
//! directory, and tsserver is asked for fixes, never to apply them. The one
//! mark they leave is for a test script that compiles into the tree itself:
//! the `outDir` it is about to create is made first and tagged as build
//! output, so snapshots leave it out like `target/` ([`out_dir`]).
//!
//! # Architecture invariant
//!
//! Nothing is written into the measured tree or the read-only `node_modules`
//! (`typescript_more::an_incremental_project_whose_build_info_is_in_node_modules_is_checked_and_node_modules_untouched`),
//! and a failing test is keyed by its file and suite path, never a slot's path
//! (`node_test::tests::failing_tests_are_keyed_by_file_and_suite_path_and_located_where_they_failed`),
//! jest's too, a compiled test by its source file
//! (`typescript_jest::check_names_the_failing_jest_test_by_its_source_file_line_and_message`).

mod jest;
mod node_test;
mod node_tools;
mod out_dir;
mod position;
mod rerun;
mod tap;
pub(crate) mod test_inventory;
mod tsc;
mod tsc_output;
mod tsserver;

use std::path::Path;

pub use self::node_test::NodeTest;
pub use self::node_tools::NodeTools;
pub use self::tsc::TscCheck;
use super::Sensor;

/// The build and test stages of the TypeScript project at `workspace`.
/// Missing tools still yield both sensors; each run then reports
/// [`StageStatus::Unavailable`] naming what to install.
pub async fn typescript_sensors(workspace: &Path) -> Vec<Box<dyn Sensor>> {
    let tools = NodeTools::detect(workspace).await;
    vec![
        Box::new(TscCheck::new(&tools)),
        Box::new(NodeTest::new(&tools, workspace)),
    ]
}
