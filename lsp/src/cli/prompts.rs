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

use trellis_engine::actor::ModelCall;
use trellis_engine::{History, Session};
use trellis_prompts::commands::{self, RenderRequest, source_library};
use trellis_prompts::{PromptsError, ResolutionPolicy, explain_session};

use super::{EXIT_ERROR, fail, terminal};

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
    /// Explain each model call of a session (the latest when none is
    /// named): route, dialect, program digest, sections, and the request as
    /// sent, from the ledger of the workspace it is run in (or of `--path`).
    ExplainSession {
        session: Option<String>,
        #[arg(long, value_enum, default_value = "human")]
        format: super::Format,
        /// A directory inside the workspace whose ledger to read.
        #[arg(long)]
        path: Option<PathBuf>,
    },
}

/// Runs `command` in the current directory; returns the exit status (0
/// success, 1 a negative finding such as a refused decision or failed lint,
/// 2 an error, printed on stderr).
pub fn run(command: PromptsCommand) -> u8 {
    let workspace = Path::new(".");
    let json = matches!(
        command,
        PromptsCommand::ExplainSession {
            format: super::Format::Json,
            ..
        }
    );
    // Collected, so the human form can be escaped whole (it quotes the
    // workspace's files, in a session's model requests); JSON is exact.
    let mut out = Vec::new();
    let result = execute(command, workspace, &mut out);
    let out = String::from_utf8_lossy(&out);
    if json {
        print!("{out}");
    } else {
        terminal::print(&out);
    }
    match result {
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
        PromptsCommand::ExplainSession {
            session,
            format,
            path,
        } => {
            let root = match path {
                Some(path) => trellis_engine::workspace::discover(&path)
                    .map_err(|e| PromptsError::Usage(e.to_string()))?,
                None => workspace.to_path_buf(),
            };
            let (session, calls) = session_calls(&root, session.as_deref())?;
            explain(&session, &calls, format, out)
        }
    }
}

/// The model calls of one session (the latest when `session` is `None`),
/// each request rebuilt and checked against the one sent (Gate Z).
fn session_calls(
    root: &Path,
    session: Option<&str>,
) -> Result<(String, Vec<ModelCall>), PromptsError> {
    let session = open_session(root, session).map_err(PromptsError::Usage)?;
    let calls = session
        .model_calls()
        .map_err(|e| PromptsError::Usage(e.to_string()))?;
    Ok((session.id, calls))
}

/// One session of `root`'s ledger (the latest when `session` is `None`).
/// Shared with `trellis context`.
pub(super) fn open_session(root: &Path, session: Option<&str>) -> Result<Session, String> {
    let Some(history) = History::open(root).map_err(|e| e.to_string())? else {
        let which = session.map_or_else(
            || "no session".to_owned(),
            |id| format!("no session `{id}`"),
        );
        return Err(format!(
            "{which} in {}: there is no ledger here (run `trellis repair` first)",
            root.join(".trellis/ledger.db").display()
        ));
    };
    history.session(session).map_err(|e| e.to_string())
}

fn explain(
    session: &str,
    calls: &[ModelCall],
    format: super::Format,
    out: &mut dyn Write,
) -> Result<i32, PromptsError> {
    if format == super::Format::Json {
        let calls: Vec<_> = calls
            .iter()
            .map(|c| {
                serde_json::json!({
                    "seq": c.seq,
                    "forest_id": c.forest_id,
                    "branch_id": c.branch_id,
                    "turn": c.turn,
                    "route": {
                        "endpoint": c.endpoint,
                        "route": c.programs[0].route,
                        "dialect": c.programs[0].dialect_id,
                        "dialect_version": c.programs[0].dialect_version,
                    },
                    "program_digest": c.program_digest,
                    "programs": c.programs,
                    "request": c.request(),
                })
            })
            .collect();
        let doc = serde_json::json!({ "session": session, "calls": calls });
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&doc).expect("serializable")
        )?;
        return Ok(0);
    }
    writeln!(out, "session {session}: {} model call(s)", calls.len())?;
    for c in calls {
        writeln!(
            out,
            "\ncall #{} ({}/{} turn {}) at `{}` via {} ({} v{})",
            c.seq,
            c.forest_id,
            c.branch_id,
            c.turn,
            c.endpoint,
            c.programs[0].route,
            c.programs[0].dialect_id,
            c.programs[0].dialect_version
        )?;
        writeln!(out, "  program digest: {}", c.program_digest)?;
        explain_session(&c.programs, out)?;
        writeln!(out, "  request as sent:\n{}", c.request_body)?;
    }
    Ok(0)
}
