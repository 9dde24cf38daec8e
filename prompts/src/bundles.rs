//! External replacement bundles (`[prompts] bundles = [...]`).
//!
//! A running program cannot gain new Rust types, so a bundle may only replace
//! a known section id with a body that has exactly that section's compiled
//! schema, role and stage. Bundles are validated when a session starts, copied
//! into the content-addressed store, and never reread: the session keeps the
//! validated bodies in memory. Bundle sections are experimental (they carry no
//! Gate AE evidence), and replacing a platform section additionally needs
//! `--allow-core-prompt-override`.

use std::fs;
use std::path::{Path, PathBuf};

use trellis_prompt_codegen::section::{display_type, parse_section, schema_signature};

pub use trellis_prompt_codegen::SectionSpec;

use crate::route::ResolutionPolicy;
use crate::schema::SectionSchema;

/// A validated replacement, pinned by content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedReplacement {
    pub schema: &'static SectionSchema,
    pub version: u32,
    pub content_hash: String,
    pub body: String,
    /// Where the bundle file was read from (for messages only).
    pub source: PathBuf,
    /// The content-addressed copy in the store.
    pub stored: PathBuf,
}

/// A bundle file that was refused, with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleError {
    pub file: PathBuf,
    pub line: usize,
    pub reason: String,
}

impl std::fmt::Display for BundleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.reason)
    }
}

/// The signature of a compiled schema, comparable with a parsed section's.
pub fn compiled_signature(schema: &SectionSchema) -> String {
    schema_signature(
        schema.role,
        schema.required,
        schema.priority,
        schema
            .vars
            .iter()
            .map(|v| (v.name, display_type(v.optional, &v.kind))),
    )
}

/// Validates every `.md` file under `dir` against the compiled library
/// (`trellis prompts lint PATH` and session start use this).
pub fn lint_bundle(dir: &Path) -> Result<Vec<AcceptedSection>, Vec<BundleError>> {
    let mut files = Vec::new();
    collect_markdown(dir, &mut files).map_err(|e| {
        vec![BundleError {
            file: dir.to_path_buf(),
            line: 0,
            reason: format!("cannot read bundle: {e}"),
        }]
    })?;
    files.sort();
    let mut errors = Vec::new();
    let mut texts = Vec::new();
    for file in files {
        match crate::files::read_regular(&file, crate::files::MAX_SECTION_BYTES) {
            Ok(Some(text)) => texts.push((file, text)),
            unread => errors.push(BundleError {
                file,
                line: 0,
                reason: unread
                    .err()
                    .unwrap_or_else(|| "vanished while the bundle was read".to_owned()),
            }),
        }
    }
    match validate_sections(texts) {
        Ok(accepted) if errors.is_empty() => Ok(accepted),
        Ok(_) => Err(errors),
        Err(mut more) => {
            errors.append(&mut more);
            Err(errors)
        }
    }
}

/// A bundle section that passed validation: where it came from, the
/// compiled section it replaces, and its parsed form.
pub type AcceptedSection = (PathBuf, &'static SectionSchema, SectionSpec);

/// The codegen's validations over section texts already in memory (a
/// bundle directory, or a version read back from the bundle store): front
/// matter and placeholders parse, the id is a compiled section, the schema
/// (role, required, priority, variables) and the `max_bytes` budget are the
/// compiled ones, and no section is replaced twice. Every file is checked; all errors are returned.
pub fn validate_sections(
    files: Vec<(PathBuf, String)>,
) -> Result<Vec<AcceptedSection>, Vec<BundleError>> {
    let mut errors = Vec::new();
    let mut accepted: Vec<AcceptedSection> = Vec::new();
    for (file, text) in files {
        let (schema, spec) = match check_section(&file, &text) {
            Ok(checked) => checked,
            Err(mut e) => {
                errors.append(&mut e);
                continue;
            }
        };
        if accepted.iter().any(|(_, s, _)| s.id == schema.id) {
            errors.push(BundleError {
                file,
                line: spec.id_line,
                reason: format!("section `{}` is replaced twice", spec.id),
            });
            continue;
        }
        accepted.push((file, schema, spec));
    }
    if errors.is_empty() {
        Ok(accepted)
    } else {
        Err(errors)
    }
}

/// Validates and pins every configured bundle at session start. Any invalid
/// file refuses start-up; nothing is partially loaded, and nothing is
/// copied into the store until every bundle has passed.
pub fn load_bundles(
    bundles: &[PathBuf],
    workspace: &Path,
    store: &Path,
    policy: ResolutionPolicy,
) -> Result<Vec<PinnedReplacement>, Vec<BundleError>> {
    let mut pinned: Vec<PinnedReplacement> = Vec::new();
    let mut errors = Vec::new();
    for bundle in bundles {
        let dir = workspace.join(bundle);
        match lint_bundle(&dir) {
            Err(mut e) => errors.append(&mut e),
            Ok(accepted) => {
                for (file, schema, spec) in accepted {
                    let refuse = |reason: String| BundleError {
                        file: file.clone(),
                        line: spec.id_line,
                        reason,
                    };
                    if !policy.allow_experimental {
                        errors.push(refuse(format!(
                            "replacement of `{}` is experimental and needs --allow-experimental-prompts",
                            schema.id
                        )));
                        continue;
                    }
                    if schema.library == "platform" && !policy.allow_core_override {
                        errors.push(refuse(format!(
                            "replacing platform section `{}` also needs --allow-core-prompt-override",
                            schema.id
                        )));
                        continue;
                    }
                    if pinned.iter().any(|p| p.schema.id == schema.id) {
                        errors.push(refuse(format!(
                            "section `{}` is replaced by two bundles",
                            schema.id
                        )));
                        continue;
                    }
                    let stored = store.join("prompt-bundles").join(format!(
                        "{}.md",
                        spec.content_hash.trim_start_matches("sha256:")
                    ));
                    pinned.push(PinnedReplacement {
                        schema,
                        version: spec.version,
                        content_hash: spec.content_hash.clone(),
                        body: spec.body.clone(),
                        source: file,
                        stored,
                    });
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    for p in &pinned {
        // Never copy through a link planted at the destination.
        let linked = fs::symlink_metadata(&p.stored).is_ok_and(|m| m.is_symlink());
        let copied =
            fs::create_dir_all(p.stored.parent().expect("has a parent")).and_then(
                |()| match linked {
                    true => Err(std::io::Error::other("it is a symbolic link")),
                    false => fs::copy(&p.source, &p.stored),
                },
            );
        if let Err(e) = copied {
            errors.push(BundleError {
                file: p.source.clone(),
                line: 0,
                reason: format!("cannot store in {}: {e}", p.stored.display()),
            });
        }
    }
    if errors.is_empty() {
        Ok(pinned)
    } else {
        Err(errors)
    }
}

/// One bundle file checked against the compiled library: readable, then
/// [`check_section`].
fn check_file(file: &Path) -> Result<(&'static SectionSchema, SectionSpec), Vec<BundleError>> {
    match crate::files::read_regular(file, crate::files::MAX_SECTION_BYTES) {
        Ok(Some(text)) => check_section(file, &text),
        unread => Err(vec![BundleError {
            file: file.to_path_buf(),
            line: 0,
            reason: unread
                .err()
                .unwrap_or_else(|| "vanished while the bundle was read".to_owned()),
        }]),
    }
}

/// One section text checked against the compiled library: a well-formed
/// section, replacing a known section with its exact schema and budget.
fn check_section(
    file: &Path,
    text: &str,
) -> Result<(&'static SectionSchema, SectionSpec), Vec<BundleError>> {
    let refuse = |line: usize, reason: String| {
        vec![BundleError {
            file: file.to_path_buf(),
            line,
            reason,
        }]
    };
    let spec = parse_section(file, text).map_err(|parse_errors| {
        parse_errors
            .0
            .into_iter()
            .map(|e| BundleError {
                file: e.file,
                line: e.line,
                reason: e.message,
            })
            .collect::<Vec<_>>()
    })?;
    let Some(schema) = crate::sections::ALL_SECTIONS
        .iter()
        .find(|s| s.id == spec.id)
    else {
        return Err(refuse(
            spec.id_line,
            format!(
                "replaces unknown section `{}`; a bundle can only replace compiled sections \
                 (a new stage or section needs a compiled domain package)",
                spec.id
            ),
        ));
    };
    let expected = compiled_signature(schema);
    if spec.schema_signature() != expected {
        return Err(refuse(
            spec.id_line,
            format!(
                "must keep the compiled schema of `{}`: expected `{expected}`, found `{}`",
                spec.id,
                spec.schema_signature()
            ),
        ));
    }
    // The static body's budget is the compiled section's: a replacement
    // changes text, never a budget.
    if spec.max_bytes != schema.base.max_bytes {
        return Err(refuse(
            spec.id_line,
            format!(
                "declares `max_bytes: {}`, but the compiled `{}` has {}: a bundle replaces \
                 text and cannot change a budget",
                spec.max_bytes, spec.id, schema.base.max_bytes
            ),
        ));
    }
    Ok((*schema, spec))
}

/// Reads a pinned replacement back from its store copy (replay, resume):
/// the copy must still be a valid section of this build with exactly the
/// content hash the session pinned. Never a best effort: a changed,
/// missing or unparsable copy is an error naming it.
pub fn restore_pinned(stored: &Path, content_hash: &str) -> Result<PinnedReplacement, BundleError> {
    let (schema, spec) = check_file(stored).map_err(|mut e| e.remove(0))?;
    if spec.content_hash != content_hash {
        return Err(BundleError {
            file: stored.to_path_buf(),
            line: 0,
            reason: format!(
                "the pinned copy hashes to {}, not the {content_hash} the session pinned",
                spec.content_hash
            ),
        });
    }
    Ok(PinnedReplacement {
        schema,
        version: spec.version,
        content_hash: spec.content_hash,
        body: spec.body,
        source: stored.to_path_buf(),
        stored: stored.to_path_buf(),
    })
}

/// Every `.md` file under `dir`. Links are never followed (a link to a
/// parent would make the walk endless): one inside a bundle is refused.
fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            return Err(std::io::Error::other(format!(
                "{} is a symbolic link; a bundle holds only files and directories",
                path.display()
            )));
        }
        if kind.is_dir() {
            collect_markdown(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}
