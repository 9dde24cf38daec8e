//! The Python stages: `python.typecheck` (ty, or pyright where ty is not
//! installed), `python.test` (pytest) and `python.lint` (ruff), as
//! [`Sensor`]s.
//!
//! [`python_sensors`] identifies every tool once (its version and the
//! interpreter's go into the fingerprint) and builds the three stages; a
//! tool that is missing still fills its stage, which then reports
//! [`super::StageStatus::Unavailable`] naming where it was looked for and what to
//! install. Each tool is the one the interpreter's environment holds, else
//! poetry's or conda's, else `PATH`'s ([`super::toolpath`]): an editor
//! starts the server without the virtualenv activated. Every run starts the
//! tool and points it at the user's interpreter ([`interpreter`]) by
//! absolute path, so a branch measures the user's environment without a
//! copy of it, and keeps
//! the measured tree as it found it: no bytecode, no tool caches written
//! into it.
//!
//! ty and pyright are separate sensors with separate fingerprints: which
//! one measured a state is part of its sensor profile, and energies under
//! one are never compared with energies under the other.
//!
//! # Architecture invariant
//!
//! A virtualenv in the workspace is measured in place and no slot holds a copy,
//! and a repair writes only the files it fixed
//! (`python::a_virtualenv_in_the_workspace_measures_and_no_slot_holds_a_copy`,
//! `repair_commits_tys_import_fix_and_writes_nothing_else`,
//! `snapshotter_tests::a_virtual_environment_is_never_content_nor_context`).

#[cfg(test)]
mod fuzz_tests;
mod interpreter;
mod junit;
mod lsp_position;
mod pyright;
mod pytest;
mod ruff;
pub(crate) mod test_inventory;
mod tool;
mod ty;
mod ty_fixes;

use std::path::{Path, PathBuf};

use super::Sensor;
use super::toolpath::{self, Found, Search};
use super::unavailable::UnavailableStage;
use tool::probe_version;

pub use interpreter::{Interpreter, site_packages};

/// How the Python stages of one workspace are set up.
#[derive(Clone, Debug, Default)]
pub struct PythonSetup {
    /// `[python] interpreter`, relative to the workspace or absolute.
    pub interpreter: Option<PathBuf>,
    /// Whether `python.lint` is required: its findings are then errors
    /// that block hard pass, otherwise warnings (as rustc's lints are).
    pub lint_blocks: bool,
}

/// The typecheck, test and lint stages for the workspace at `workspace`.
/// Each tool is looked for in the interpreter's environment first
/// ([`toolpath::python`]), pyright also in `node_modules/.bin`, then on
/// `PATH`; a tool found nowhere fills its stage with an
/// [`UnavailableStage`] naming where it was looked for and how to install it.
pub async fn python_sensors(workspace: &Path, setup: &PythonSetup) -> Vec<Box<dyn Sensor>> {
    let interpreter = Interpreter::detect(workspace, setup.interpreter.as_deref()).await;
    let vars = toolpath::Vars::of_process();
    let environment = toolpath::python(workspace, Path::new(&interpreter.program), &vars).await;
    let path = vars.path.as_deref();
    let npm = environment.clone().node_modules(workspace).then_path(path);
    let search = environment.then_path(path);
    let pip = |tool: &str| {
        let python = Path::new(&interpreter.program).display();
        format!(
            "into the interpreter's environment (`{python} -m pip install {tool}`) or put it on PATH"
        )
    };
    let typecheck: Box<dyn Sensor> = match identify(&search, "ty", workspace).await {
        Ok((found, version)) => Box::new(ty::TyCheck::new(found, version, &interpreter)),
        Err(ty_missing) => match identify(&npm, "pyright", workspace).await {
            Ok((found, version)) => Box::new(pyright::Pyright::new(found, version, &interpreter)),
            Err(pyright_missing) => Box::new(UnavailableStage::new(
                "python.typecheck",
                "ty-check",
                format!(
                    "no Python type checker: {ty_missing}; {pyright_missing}; \
                     install ty, the primary checker, {}; or install pyright",
                    pip("ty")
                ),
            )),
        },
    };
    let lint: Box<dyn Sensor> = match identify(&search, "ruff", workspace).await {
        Ok((found, version)) => Box::new(ruff::RuffCheck::new(found, version, setup.lint_blocks)),
        Err(missing) => Box::new(UnavailableStage::new(
            "python.lint",
            "ruff-check",
            format!("{missing}; install it {}", pip("ruff")),
        )),
    };
    vec![
        typecheck,
        Box::new(pytest::Pytest::new(&interpreter, workspace).await),
        lint,
    ]
}

/// `tool` where `search` finds it, and the first line its `--version`
/// prints (with the place it was found, for the fingerprint), or why not.
async fn identify(search: &Search, tool: &str, dir: &Path) -> Result<(Found, String), String> {
    let found = search
        .find(tool, toolpath::is_program)
        .map_err(|missing| missing.to_string())?;
    let version = probe_version(&found.program, &["--version"], dir).await?;
    let version = format!("{version} ({})", found.label);
    Ok((found, version))
}
