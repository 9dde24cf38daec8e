//! What the ledger records for every compiled program (Gate Z), and the
//! `explain-session` report built from those records.

use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::bounded::VarValue;
use crate::bundles::PinnedReplacement;
use crate::compose::{
    CompileOptions, CompiledPromptProgram, SectionProvenance, StageComposition, compile,
};
use crate::dialect::ModelDialect;
use crate::route::{PromptRoute, ResolutionPolicy};
use crate::schema::PromptStage;

/// One ledger row per compiled program of a model call: everything
/// compilation depends on (Proposition 4), so replay can rebuild the exact
/// program or report a mismatch without calling a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramRecord {
    pub session_id: String,
    pub stage: String,
    /// `adapter/family[/model]`.
    pub route: String,
    pub dialect_id: String,
    pub dialect_version: u32,
    /// Ordered section identities, versions, hashes and origins.
    pub sections: Vec<SectionProvenance>,
    pub dropped_sections: Vec<String>,
    /// Rendered hash of each message, in order.
    pub rendered_hashes: Vec<String>,
    pub program_digest: String,
    /// The invocation this program belongs to, when paired.
    #[serde(default)]
    pub invocation_digest: Option<String>,
    /// Digest of the manifest of the build that compiled the program.
    pub manifest_digest: String,
    pub budget_tokens: u64,
    pub tool_spec_hash: String,
    pub policy: ResolutionPolicy,
    /// Predicate outcomes in composition order.
    pub inclusion: Vec<(String, bool)>,
    /// Canonical variable values of each included section.
    pub values: Vec<(String, Vec<VarValue>)>,
}

impl ProgramRecord {
    /// The record of `program`, compiled from `composition` under `options`.
    pub fn new(
        session_id: &str,
        composition: &StageComposition,
        options: &CompileOptions<'_>,
        program: &CompiledPromptProgram,
        invocation_digest: Option<&str>,
    ) -> Self {
        ProgramRecord {
            session_id: session_id.to_owned(),
            stage: program.stage.clone(),
            route: program.route.to_string(),
            dialect_id: program.dialect.id.clone(),
            dialect_version: program.dialect.version,
            sections: program.sections().cloned().collect(),
            dropped_sections: program.dropped_sections.clone(),
            rendered_hashes: program
                .messages
                .iter()
                .map(|m| m.rendered_hash.clone())
                .collect(),
            program_digest: program.program_digest.clone(),
            invocation_digest: invocation_digest.map(str::to_owned),
            manifest_digest: crate::sections::MANIFEST_DIGEST.to_owned(),
            budget_tokens: options.budget_tokens,
            tool_spec_hash: options.tool_spec_hash.clone(),
            policy: options.policy,
            inclusion: composition
                .inclusion()
                .iter()
                .map(|(id, included)| ((*id).to_owned(), *included))
                .collect(),
            values: composition
                .values()
                .into_iter()
                .map(|(id, values)| (id.to_owned(), values))
                .collect(),
        }
    }
}

/// Recompiles a recorded program from this build's sections plus the pinned
/// bundle replacements, and checks it has the recorded digest. Resume must
/// refuse when this fails (Gate Z).
pub fn reconstruct(
    record: &ProgramRecord,
    replacements: &[PinnedReplacement],
) -> Result<CompiledPromptProgram, String> {
    let stage: PromptStage = record.stage.parse()?;
    let route: PromptRoute = record.route.parse()?;
    let dialect = ModelDialect::ALL
        .iter()
        .find(|d| d.id == record.dialect_id && d.version == record.dialect_version)
        .ok_or_else(|| {
            format!(
                "dialect {} v{} is not in this build",
                record.dialect_id, record.dialect_version
            )
        })?;
    let schema = |id: &str| {
        crate::sections::ALL_SECTIONS
            .iter()
            .copied()
            .find(|s| s.id == id)
            .ok_or_else(|| format!("section `{id}` is not in this build"))
    };
    let inclusion = record
        .inclusion
        .iter()
        .map(|(id, included)| Ok((schema(id)?.id, *included)))
        .collect::<Result<Vec<_>, String>>()?;
    let entries = record
        .values
        .iter()
        .map(|(id, values)| Ok((schema(id)?, values.clone())))
        .collect::<Result<Vec<_>, String>>()?;
    let composition = StageComposition::from_recorded(stage, inclusion, entries);
    let options = CompileOptions {
        route: &route,
        dialect,
        budget_tokens: record.budget_tokens,
        tool_spec_hash: record.tool_spec_hash.clone(),
        policy: record.policy,
        replacements,
    };
    let program = compile(&composition, &options).map_err(|e| e.to_string())?;
    if program.program_digest != record.program_digest {
        let dropped = if program.dropped_sections == record.dropped_sections {
            String::new()
        } else {
            format!(
                " (drop set {:?} instead of {:?})",
                program.dropped_sections, record.dropped_sections
            )
        };
        return Err(format!(
            "recompiled digest {} differs from the recorded {}{dropped}",
            program.program_digest, record.program_digest
        ));
    }
    Ok(program)
}

/// Whether a recorded section can be rebuilt from the compiled library.
fn reconstructable(section: &SectionProvenance) -> bool {
    crate::sections::ALL_SECTIONS
        .iter()
        .filter(|s| s.id == section.id)
        .flat_map(|s| s.templates())
        .any(|t| t.content_hash == section.content_hash && t.version == section.version)
}

/// Writes which programs a session compiled. Returns 0 when every program
/// has a digest and every section reconstructs from built-ins; 1 otherwise
/// (a bundle section needs its pinned artifact; a changed built-in means
/// the session was recorded by a different build).
pub fn explain_session(records: &[ProgramRecord], out: &mut dyn Write) -> std::io::Result<i32> {
    let mut status = 0;
    if records.is_empty() {
        writeln!(out, "no compiled prompt programs recorded")?;
        return Ok(1);
    }
    writeln!(
        out,
        "session {}: {} compiled program(s)",
        records[0].session_id,
        records.len()
    )?;
    for (i, record) in records.iter().enumerate() {
        let known_stage = record.stage.parse::<PromptStage>().is_ok();
        writeln!(
            out,
            "\n#{} {} via {} ({} v{})",
            i + 1,
            record.stage,
            record.route,
            record.dialect_id,
            record.dialect_version
        )?;
        if record.program_digest.is_empty() {
            status = 1;
            writeln!(
                out,
                "  program digest: MISSING (the call cannot be replayed)"
            )?;
        } else {
            writeln!(out, "  program digest: {}", record.program_digest)?;
        }
        if record.manifest_digest != crate::sections::MANIFEST_DIGEST {
            writeln!(
                out,
                "  manifest:       {} (this build: {})",
                record.manifest_digest,
                crate::sections::MANIFEST_DIGEST
            )?;
        }
        if let Some(invocation) = &record.invocation_digest {
            writeln!(out, "  invocation:     {invocation}")?;
        }
        if !known_stage {
            status = 1;
            writeln!(
                out,
                "  stage `{}` is not compiled into this build",
                record.stage
            )?;
        }
        for section in &record.sections {
            let mut flags = Vec::new();
            if section.experimental {
                flags.push("experimental");
            }
            if section.core_override {
                flags.push("core-override");
            }
            let rebuild = if reconstructable(section) {
                "built-in"
            } else {
                status = 1;
                "NOT in this build (needs a pinned artifact)"
            };
            writeln!(
                out,
                "  {}@{} [{}]{} {} — {}",
                section.id,
                section.version,
                section.origin,
                if flags.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", flags.join(", "))
                },
                short(&section.content_hash),
                rebuild
            )?;
        }
        match reconstruct(record, &[]) {
            Ok(_) => writeln!(out, "  reconstruction: exact, from built-in sections")?,
            Err(reason) => {
                status = 1;
                writeln!(out, "  reconstruction: FAILED: {reason}")?;
            }
        }
        if record.dropped_sections.is_empty() {
            writeln!(out, "  dropped: none")?;
        } else {
            writeln!(out, "  dropped: {}", record.dropped_sections.join(", "))?;
        }
    }
    Ok(status)
}

fn short(hash: &str) -> &str {
    let end = hash.len().min("sha256:".len() + 12);
    &hash[..end]
}
