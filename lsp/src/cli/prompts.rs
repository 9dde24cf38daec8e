//! `trellis prompts`: the prompt library's commands. This module owns their
//! argument parsing and exit codes; what each command does is a plain
//! function of `trellis_prompts::commands`, and `explain-session` is fed
//! from the ledger here.
//!
//! `list`, `render` and `diff` use the sections built into this binary and
//! work in any directory; `lint` (without a path), `manifest`, `evaluate` and
//! `activate` act on the library sources under `./prompts` and refuse,
//! naming the missing `stages.toml`, anywhere else.

use std::io::Write;
use std::path::{Path, PathBuf};

use trellis_engine::ledger::{DecodedRow, Ledger, LedgerEvent};
use trellis_prompts::commands::{self, RenderRequest, source_library};
use trellis_prompts::{ProgramRecord, PromptsError, ResolutionPolicy, explain_session};

use super::{EXIT_ERROR, fail};

/// `trellis prompts` subcommands.
#[derive(Debug, Clone, PartialEq, clap::Subcommand)]
pub enum PromptsCommand {
    /// List every compiled section: id, version, stage, overrides and their state, hash.
    List,
    /// Compile one stage with fixture variables for a route and show the program and drop set.
    Render {
        /// Stage name, e.g. `branch_correct`.
        stage: String,
        /// `adapter/family[/model]`, e.g. `scripted/qwen/qwen3-coder`.
        #[arg(long)]
        route: String,
        /// Instruction budget in accountant tokens (default: window minus output).
        #[arg(long)]
        budget: Option<u64>,
        /// JSON file `{ "<section id>": { "<var>": value } }` overriding fixture values.
        #[arg(long)]
        vars: Option<PathBuf>,
        /// Let experimental overrides resolve.
        #[arg(long)]
        allow_experimental_prompts: bool,
        /// Let platform sections be overridden.
        #[arg(long)]
        allow_core_prompt_override: bool,
    },
    /// Diff two section bodies: `<id>[@family|@family@model]`.
    Diff { a: String, b: String },
    /// Validate a library (a directory with stages.toml) or an external bundle.
    Lint { path: Option<PathBuf> },
    /// Regenerate `prompts/manifest.toml`.
    Manifest,
    /// Compute and store the Gate AE change record of a paired evaluation.
    Evaluate { results: PathBuf },
    /// Activate the override bound by a stored change record.
    Activate { digest: String },
    /// Show which programs a session compiled, from the ledger.
    ExplainSession { id: String },
}

/// Runs `command` in the current directory; returns the exit status (0
/// success, 1 a negative finding such as a refused decision or failed lint,
/// 2 an error, printed on stderr).
pub fn run(command: PromptsCommand) -> u8 {
    let workspace = Path::new(".");
    let mut out = std::io::stdout().lock();
    match execute(command, workspace, &mut out) {
        Ok(code) => u8::try_from(code).unwrap_or(EXIT_ERROR),
        Err(e) => fail(e),
    }
}

fn execute(
    command: PromptsCommand,
    workspace: &Path,
    out: &mut dyn Write,
) -> Result<i32, PromptsError> {
    match command {
        PromptsCommand::List => commands::list(out),
        PromptsCommand::Render {
            stage,
            route,
            budget,
            vars,
            allow_experimental_prompts,
            allow_core_prompt_override,
        } => commands::render(
            &RenderRequest {
                stage: &stage,
                route: &route,
                budget,
                vars: vars.as_deref(),
                policy: ResolutionPolicy {
                    allow_experimental: allow_experimental_prompts,
                    allow_core_override: allow_core_prompt_override,
                },
            },
            out,
        ),
        PromptsCommand::Diff { a, b } => commands::diff(&a, &b, out),
        PromptsCommand::Lint { path: Some(path) } => commands::lint(&path, out),
        PromptsCommand::Lint { path: None } => {
            commands::lint(&source_library(workspace, "lint")?, out)
        }
        PromptsCommand::Manifest => {
            commands::write_manifest(&source_library(workspace, "manifest")?, out)
        }
        PromptsCommand::Evaluate { results } => {
            let library = source_library(workspace, "evaluate")?;
            commands::evaluate(workspace, &library, &results, out)
        }
        PromptsCommand::Activate { digest } => {
            commands::activate(&source_library(workspace, "activate")?, &digest, out)
        }
        PromptsCommand::ExplainSession { id } => {
            let records = session_records(workspace, &id)?;
            Ok(explain_session(&records, out)?)
        }
    }
}

/// The programs a session compiled. Sessions record their prompt programs
/// only when a model actor runs; a known session without one compiled none.
fn session_records(workspace: &Path, session_id: &str) -> Result<Vec<ProgramRecord>, PromptsError> {
    let dir = workspace.join(".trellis");
    let ledger = Ledger::open(&dir).map_err(|e| PromptsError::Usage(e.to_string()))?;
    let rows = ledger
        .rows()
        .map_err(|e| PromptsError::Usage(e.to_string()))?;
    let known = rows.iter().any(|row| {
        matches!(&row.event, DecodedRow::Ledger(LedgerEvent::SessionStarted(s)) if s.session_id == session_id)
    });
    if known {
        Ok(Vec::new())
    } else {
        Err(PromptsError::Usage(format!(
            "no session `{session_id}` in {}",
            ledger.path().display()
        )))
    }
}
