//! The operator commands of the prompt plane, as plain functions: what
//! `trellis prompts …` runs once the binary has parsed its arguments.
//!
//! [`list`], [`render`] and [`diff`] read the sections compiled into this
//! build, so they work anywhere. [`lint`] of a library, [`write_manifest`],
//! [`evaluate`] and [`activate`] act on a library's sources, which
//! [`source_library`] finds (or refuses to guess) under a workspace. Argument
//! parsing and exit codes belong to the binary; this module never reads the
//! ledger and never writes outside the library it was given.

use std::io::Write;
use std::path::{Path, PathBuf};

use trellis_prompt_codegen::library::STAGES_FILE;
use trellis_prompt_codegen::{CodegenErrors, load_library, manifest};

use crate::activation::{self, Decision, PairedResults, PromptsConfig};
use crate::bundles::{BundleError, lint_bundle};
use crate::compose::{CompileError, CompileOptions, compile};
use crate::dialect::ModelDialect;
use crate::fixtures::{default_composition, values_from_json};
use crate::route::{PromptRoute, ResolutionPolicy};
use crate::schema::{PromptStage, TemplateTarget};
use crate::sections::ALL_SECTIONS;

/// Where a workspace keeps its prompt library sources.
pub const LIBRARY_DIR: &str = "prompts";

/// Failures of a prompts command; each names the file or input at fault.
#[derive(Debug, thiserror::Error)]
pub enum PromptsError {
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error(
        "`trellis prompts {command}` acts on the prompt library sources, and {} does not exist; \
         run it from the Trellis source tree (the directory that holds `prompts/`){hint}",
        .stages.display()
    )]
    NoLibrary {
        command: &'static str,
        stages: PathBuf,
        hint: &'static str,
    },
    #[error("{0}")]
    Library(#[from] CodegenErrors),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error("activation refused:\n  {}", .0.join("\n  "))]
    ActivationRefused(Vec<String>),
    #[error("invalid prompt bundle:\n  {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Bundle(Vec<BundleError>),
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
}

impl From<trellis_prompt_codegen::CodegenError> for PromptsError {
    fn from(error: trellis_prompt_codegen::CodegenError) -> Self {
        PromptsError::Library(error.into())
    }
}

/// The prompt library sources under `workspace` that `command` needs. A
/// directory without `prompts/stages.toml` is refused up front, so no
/// command creates a half library in whatever directory it was run from.
pub fn source_library(workspace: &Path, command: &'static str) -> Result<PathBuf, PromptsError> {
    let root = workspace.join(LIBRARY_DIR);
    let stages = root.join(STAGES_FILE);
    if stages.is_file() {
        return Ok(root);
    }
    let hint = match command {
        "lint" => ", or pass the library or bundle to lint: `trellis prompts lint <path>`",
        _ => "",
    };
    Err(PromptsError::NoLibrary {
        command,
        stages,
        hint,
    })
}

/// What [`render`] compiles: a stage for a route, under a budget.
#[derive(Debug, Clone, Copy)]
pub struct RenderRequest<'a> {
    /// Stage name, e.g. `branch_correct`.
    pub stage: &'a str,
    /// `adapter/family[/model]`.
    pub route: &'a str,
    /// Instruction budget in accountant tokens; the dialect's default when `None`.
    pub budget: Option<u64>,
    /// JSON file `{ "<section id>": { "<var>": value } }` overriding fixture values.
    pub vars: Option<&'a Path>,
    pub policy: ResolutionPolicy,
}

/// Regenerates `manifest.toml` of the library at `library_root`.
pub fn write_manifest(library_root: &Path, out: &mut dyn Write) -> Result<i32, PromptsError> {
    let library = load_library(library_root)?;
    manifest::write_manifest(&library)?;
    writeln!(
        out,
        "wrote {}",
        library_root.join(manifest::MANIFEST_FILE).display()
    )?;
    Ok(0)
}

/// Activates the override bound by the stored change record `digest`.
pub fn activate(
    library_root: &Path,
    digest: &str,
    out: &mut dyn Write,
) -> Result<i32, PromptsError> {
    let library = load_library(library_root)?;
    let file = activation::activate(&library, digest).map_err(PromptsError::ActivationRefused)?;
    writeln!(out, "activated {file} with change record {digest}")?;
    writeln!(
        out,
        "commit prompts/manifest.toml and prompts/changes/ to make it effective"
    )?;
    Ok(0)
}

/// Every compiled section: id, version, stage, overrides and their state, hash.
pub fn list(out: &mut dyn Write) -> Result<i32, PromptsError> {
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

/// Compiles one stage with fixture variables and shows the program and drop set.
pub fn render(request: &RenderRequest<'_>, out: &mut dyn Write) -> Result<i32, PromptsError> {
    let RenderRequest {
        stage,
        route,
        budget,
        vars,
        policy,
    } = *request;
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

/// Diffs two section bodies, `<id>[@family|@family@model]`; 1 when they differ.
pub fn diff(a: &str, b: &str, out: &mut dyn Write) -> Result<i32, PromptsError> {
    let (left, right) = (template_body(a)?, template_body(b)?);
    let diff = similar::TextDiff::from_lines(left, right);
    write!(
        out,
        "{}",
        diff.unified_diff().context_radius(3).header(a, b)
    )?;
    Ok(i32::from(left != right))
}

/// Validates a library (a directory with `stages.toml`) or an external bundle;
/// 1 when a library's activations do not verify.
pub fn lint(path: &Path, out: &mut dyn Write) -> Result<i32, PromptsError> {
    if path.join(STAGES_FILE).is_file() {
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

/// Computes and stores the Gate AE change record of a paired evaluation,
/// under the `[prompts]` settings of `workspace`; 1 when the decision refuses.
pub fn evaluate(
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
