//! `trellis prompts ...`: the command-line surface of the prompt plane.
//!
//! The binary adds one line: parse [`PromptsCommand`] as a subcommand and
//! call [`run`] (or [`run_with_records`] to feed `explain-session` from the
//! ledger). Compiled sections come from this build; `manifest`, `lint`,
//! `evaluate` and `activate` work on the library at `<workspace>/prompts`.

use std::io::Write;
use std::path::{Path, PathBuf};

use trellis_prompt_codegen::{CodegenErrors, load_library, manifest};

use crate::activation::{self, Decision, PairedResults, PromptsConfig};
use crate::bundles::{BundleError, lint_bundle};
use crate::compose::{CompileError, CompileOptions, compile};
use crate::dialect::ModelDialect;
use crate::fixtures::{default_composition, values_from_json};
use crate::provenance::{ProgramRecord, explain_session};
use crate::route::{PromptRoute, ResolutionPolicy};
use crate::schema::{PromptStage, TemplateTarget};
use crate::sections::ALL_SECTIONS;

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

/// Failures of a prompts command; each names the file or input at fault.
#[derive(Debug, thiserror::Error)]
pub enum PromptsError {
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("{0}")]
    Library(#[from] CodegenErrors),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error("activation refused:\n  {}", .0.join("\n  "))]
    ActivationRefused(Vec<String>),
    #[error("invalid prompt bundle:\n  {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Bundle(Vec<BundleError>),
    #[error("`explain-session {0}` needs the session's ledger; call `run_with_records`")]
    LedgerRequired(String),
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
}

impl From<trellis_prompt_codegen::CodegenError> for PromptsError {
    fn from(error: trellis_prompt_codegen::CodegenError) -> Self {
        PromptsError::Library(error.into())
    }
}

/// Runs a command. Returns the process exit status (0 success, 1 a negative
/// finding such as a refused decision or failed lint).
pub fn run(
    cmd: PromptsCommand,
    workspace: &Path,
    out: &mut dyn Write,
) -> Result<i32, PromptsError> {
    run_with_records(cmd, workspace, out, |id| {
        Err(PromptsError::LedgerRequired(id.to_owned()))
    })
}

/// [`run`] with a ledger reader for `explain-session`.
pub fn run_with_records(
    cmd: PromptsCommand,
    workspace: &Path,
    out: &mut dyn Write,
    records: impl FnOnce(&str) -> Result<Vec<ProgramRecord>, PromptsError>,
) -> Result<i32, PromptsError> {
    let library_root = workspace.join("prompts");
    match cmd {
        PromptsCommand::List => list(out),
        PromptsCommand::Render {
            stage,
            route,
            budget,
            vars,
            allow_experimental_prompts,
            allow_core_prompt_override,
        } => {
            let policy = ResolutionPolicy {
                allow_experimental: allow_experimental_prompts,
                allow_core_override: allow_core_prompt_override,
            };
            render(&stage, &route, budget, vars.as_deref(), policy, out)
        }
        PromptsCommand::Diff { a, b } => diff(&a, &b, out),
        PromptsCommand::Lint { path } => lint(path.as_deref().unwrap_or(&library_root), out),
        PromptsCommand::Manifest => {
            let library = load_library(&library_root)?;
            manifest::write_manifest(&library)?;
            writeln!(
                out,
                "wrote {}",
                library_root.join(manifest::MANIFEST_FILE).display()
            )?;
            Ok(0)
        }
        PromptsCommand::Evaluate { results } => evaluate(workspace, &library_root, &results, out),
        PromptsCommand::Activate { digest } => {
            let library = load_library(&library_root)?;
            let file =
                activation::activate(&library, &digest).map_err(PromptsError::ActivationRefused)?;
            writeln!(out, "activated {file} with change record {digest}")?;
            writeln!(
                out,
                "commit prompts/manifest.toml and prompts/changes/ to make it effective"
            )?;
            Ok(0)
        }
        PromptsCommand::ExplainSession { id } => {
            let records = records(&id)?;
            Ok(explain_session(&records, out)?)
        }
    }
}

fn list(out: &mut dyn Write) -> Result<i32, PromptsError> {
    writeln!(
        out,
        "{:<44} {:>3}  {:<20} {:<9} {:<30} hash",
        "id", "ver", "stage", "kind", "overrides"
    )?;
    for schema in ALL_SECTIONS {
        let overrides: Vec<String> = schema
            .overrides
            .iter()
            .map(|t| format!("{}:{}", t.target, state_name(t.activation)))
            .collect();
        writeln!(
            out,
            "{:<44} {:>3}  {:<20} {:<9} {:<30} {}",
            schema.id,
            schema.base.version,
            schema.stage,
            if schema.required {
                "required"
            } else {
                "optional"
            },
            if overrides.is_empty() {
                "-".to_owned()
            } else {
                overrides.join(",")
            },
            &schema.base.content_hash[..19]
        )?;
    }
    Ok(0)
}

fn state_name(state: manifest::ActivationState) -> &'static str {
    match state {
        manifest::ActivationState::Active => "active",
        manifest::ActivationState::Experimental => "experimental",
    }
}

fn render(
    stage: &str,
    route: &str,
    budget: Option<u64>,
    vars: Option<&Path>,
    policy: ResolutionPolicy,
    out: &mut dyn Write,
) -> Result<i32, PromptsError> {
    let stage: PromptStage = stage.parse().map_err(PromptsError::Usage)?;
    let route: PromptRoute = route.parse().map_err(PromptsError::Usage)?;
    let dialect = ModelDialect::for_route(&route);
    let mut composition = default_composition(stage, dialect);
    if let Some(path) = vars {
        let file_error = |reason: String| PromptsError::File {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| file_error(e.to_string()))?;
        for (schema, values) in values_from_json(&json).map_err(file_error)? {
            if !composition.replace_values(schema.id, values) {
                return Err(file_error(format!(
                    "section `{}` is not part of stage `{stage}`",
                    schema.id
                )));
            }
        }
    }
    let options = CompileOptions {
        route: &route,
        dialect,
        budget_tokens: budget.unwrap_or_else(|| dialect.default_budget_tokens()),
        tool_spec_hash: String::new(),
        policy,
        replacements: &[],
    };
    let program = compile(&composition, &options)?;
    writeln!(
        out,
        "stage {} via {} ({} v{}, accountant {} v{})",
        program.stage,
        program.route,
        program.dialect.id,
        program.dialect.version,
        program.token_accountant.0,
        program.token_accountant.1
    )?;
    writeln!(
        out,
        "estimated tokens: {} of {}",
        program.estimated_tokens, program.budget_tokens
    )?;
    if program.dropped_sections.is_empty() {
        writeln!(out, "dropped: none")?;
    } else {
        writeln!(out, "dropped: {}", program.dropped_sections.join(", "))?;
    }
    writeln!(out, "program digest: {}", program.program_digest)?;
    for (i, message) in program.messages.iter().enumerate() {
        let sections: Vec<String> = message
            .sections
            .iter()
            .map(|s| {
                let flag = if s.experimental { ", experimental" } else { "" };
                format!("{}@{} ({}{flag})", s.id, s.version, s.origin)
            })
            .collect();
        writeln!(
            out,
            "\n--- message {} [{}] {}",
            i + 1,
            message.role.as_str(),
            sections.join(", ")
        )?;
        writeln!(out, "{}", message.content)?;
    }
    Ok(0)
}

/// `<id>[@family|@family@model]` → that template's body.
fn template_body(reference: &str) -> Result<&'static str, PromptsError> {
    let (id, target) = reference.split_once('@').unwrap_or((reference, ""));
    let schema = ALL_SECTIONS
        .iter()
        .find(|s| s.id == id)
        .ok_or_else(|| PromptsError::Usage(format!("unknown section `{id}`")))?;
    schema
        .templates()
        .find(|t| match t.target {
            TemplateTarget::Base => target.is_empty() || target == "base",
            other => other.to_string() == target,
        })
        .map(|t| t.body)
        .ok_or_else(|| PromptsError::Usage(format!("section `{id}` has no `{target}` override")))
}

fn diff(a: &str, b: &str, out: &mut dyn Write) -> Result<i32, PromptsError> {
    let (left, right) = (template_body(a)?, template_body(b)?);
    let diff = similar::TextDiff::from_lines(left, right);
    write!(
        out,
        "{}",
        diff.unified_diff().context_radius(3).header(a, b)
    )?;
    Ok(i32::from(left != right))
}

fn lint(path: &Path, out: &mut dyn Write) -> Result<i32, PromptsError> {
    if path
        .join(trellis_prompt_codegen::library::STAGES_FILE)
        .is_file()
    {
        let library = load_library(path)?;
        let committed = manifest::check_manifest(&library)?;
        let problems = activation::verify_activations(&library, &committed);
        for problem in &problems {
            writeln!(out, "{problem}")?;
        }
        writeln!(
            out,
            "{}: {} section files, manifest fresh",
            path.display(),
            library.sections.len()
        )?;
        return Ok(i32::from(!problems.is_empty()));
    }
    let accepted = lint_bundle(path).map_err(PromptsError::Bundle)?;
    for (file, schema, spec) in &accepted {
        writeln!(
            out,
            "{}: replaces {} (v{}, {})",
            file.display(),
            schema.id,
            spec.version,
            spec.content_hash
        )?;
    }
    writeln!(
        out,
        "{}: {} valid replacement(s)",
        path.display(),
        accepted.len()
    )?;
    Ok(0)
}

fn evaluate(
    workspace: &Path,
    library_root: &Path,
    results: &Path,
    out: &mut dyn Write,
) -> Result<i32, PromptsError> {
    let file_error = |reason: String| PromptsError::File {
        path: results.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(results).map_err(|e| file_error(e.to_string()))?;
    let paired: PairedResults =
        serde_json::from_str(&text).map_err(|e| file_error(e.to_string()))?;
    let config = PromptsConfig::load(workspace)
        .map_err(|(path, reason)| PromptsError::File { path, reason })?;
    let record = activation::evaluate(paired, &config);
    let stored =
        activation::write_record(library_root, &record).map_err(|e| PromptsError::File {
            path: library_root.join(activation::CHANGES_DIR),
            reason: e.to_string(),
        })?;
    writeln!(out, "change record {}", record.record_digest)?;
    writeln!(out, "stored at {}", stored.display())?;
    writeln!(out, "paired tasks: {}", record.metrics.tasks)?;
    if let Some(i) = record.metrics.hard_pass_difference {
        writeln!(
            out,
            "hard-pass difference 95% interval: [{:.4}, {:.4}]",
            i.lower, i.upper
        )?;
    }
    if let Some(i) = record.metrics.cost_difference {
        writeln!(
            out,
            "cost difference 95% interval: [{:.4}, {:.4}]",
            i.lower, i.upper
        )?;
    }
    match &record.decision {
        Decision::Activate => {
            writeln!(
                out,
                "decision: activate (run `trellis prompts activate {}`)",
                record.record_digest
            )?;
            Ok(0)
        }
        Decision::Refuse(reasons) => {
            writeln!(out, "decision: refuse")?;
            for reason in reasons {
                writeln!(out, "  - {reason}")?;
            }
            Ok(1)
        }
    }
}
