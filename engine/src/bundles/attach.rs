//! Attaching bundles to one repair: refs resolved once, at its start,
//! into frozen values (the texts the repair's prompts use, and the
//! components the ledger records), checked against what the run can do.
//!
//! Authority stays with the consumer: a bundle's `requires` are checked
//! against the run's own tools and required stages, and its sections
//! against the session's prompt policy; nothing here adds a tool, a stage
//! or a budget. A refusal names the bundle and what the run lacks, and
//! attaches nothing. This module never reads the store again after
//! [`attach`] returns: a later write cannot reach the repair.

use std::path::{Path, PathBuf};

use trellis_prompts::bundles::PinnedReplacement;

use super::error::BundleError;
use super::refs::BundleRef;
use super::store::BundleStore;
use crate::ledger::{BundleComponent, BundlesAttached};

/// What the consuming run has: a bundle may require these, never add to them.
pub struct RunCapabilities<'a> {
    /// The governed tools the run's model actor is offered (none without a model).
    pub tools: &'a [&'a str],
    /// The stages the run requires for a hard pass.
    pub stages: &'a [String],
    /// The session's prompt flags (`--allow-experimental-prompts`,
    /// `--allow-core-prompt-override`).
    pub allow_experimental: bool,
    pub allow_core_override: bool,
}

/// The bundles one repair runs with, frozen at its start.
#[derive(Clone, Debug, Default)]
pub struct Attached {
    /// Resolved ids, versions, checksums and origins, in ref order: what
    /// the ledger records for the repair.
    pub components: Vec<BundleComponent>,
    /// The section texts the repair's prompts use in place of the library's.
    pub replacements: Vec<PinnedReplacement>,
}

/// Resolves `refs` through `store` for a run with `run`'s capabilities.
pub(crate) fn attach(
    store: &BundleStore,
    refs: &[String],
    run: &RunCapabilities,
) -> Result<Attached, BundleError> {
    let mut parsed: Vec<BundleRef> = Vec::with_capacity(refs.len());
    for text in refs {
        let r: BundleRef = text.parse()?;
        if parsed.iter().any(|p| p.id() == r.id()) {
            return Err(BundleError::Usage(format!(
                "bundle `{}` is named twice; a repair attaches one version of each id",
                r.id()
            )));
        }
        parsed.push(r);
    }
    let mut attached = Attached::default();
    for r in &parsed {
        let (row, draft) = store.resolve(r)?;
        let refuse = |reason: String| BundleError::Requirement {
            id: row.id.clone(),
            version: row.version,
            reason,
        };
        let requires = &draft.manifest.requires;
        if let Some(tool) = requires
            .tools
            .iter()
            .find(|t| !run.tools.contains(&t.as_str()))
        {
            return Err(refuse(if run.tools.is_empty() {
                format!(
                    "it requires the tool `{tool}`, and this repair has no model actor \
                     (configure [[models]])"
                )
            } else {
                format!("it requires the tool `{tool}`, which this repair does not offer")
            }));
        }
        if let Some(stage) = requires.stages.iter().find(|s| !run.stages.contains(s)) {
            return Err(refuse(format!(
                "it requires the stage `{stage}`, which this workspace does not require \
                 (stages.required = [{}]); a bundle cannot add a stage",
                run.stages.join(", ")
            )));
        }
        if !run.allow_experimental {
            return Err(refuse(
                "store bundles are experimental prompt text and need --allow-experimental-prompts"
                    .to_owned(),
            ));
        }
        let before = attached.replacements.len();
        add(&mut attached, r, &row, &draft)?;
        if let Some(platform) = attached.replacements[before..]
            .iter()
            .find(|p| p.schema.library == "platform")
            && !run.allow_core_override
        {
            return Err(refuse(format!(
                "it replaces platform section `{}`, which also needs --allow-core-prompt-override",
                platform.schema.id
            )));
        }
    }
    Ok(attached)
}

/// Adds one resolved version: compiled again against this build's library
/// (a version written by another build must still fit it), each section
/// replaced by one bundle at most.
fn add(
    attached: &mut Attached,
    r: &BundleRef,
    row: &super::VersionRow,
    draft: &super::Draft,
) -> Result<(), BundleError> {
    let compiled = draft.compile(&row.id)?;
    let mut sections = Vec::new();
    for (schema, spec) in compiled.sections {
        if let Some(other) = attached
            .replacements
            .iter()
            .find(|p| p.schema.id == schema.id)
        {
            return Err(BundleError::Requirement {
                id: row.id.clone(),
                version: row.version,
                reason: format!(
                    "section `{}` is also replaced by {}",
                    schema.id,
                    other.source.display()
                ),
            });
        }
        let source = PathBuf::from(format!("{}@{}/{}", row.id, row.version, schema.name()));
        sections.push(schema.id.to_owned());
        attached.replacements.push(PinnedReplacement {
            schema,
            version: spec.version,
            content_hash: spec.content_hash.clone(),
            body: spec.body.clone(),
            stored: source.clone(),
            source,
        });
    }
    attached.components.push(BundleComponent {
        reference: r.to_string(),
        id: row.id.clone(),
        version: row.version,
        checksum: row.checksum.clone(),
        origin: row.origin.clone(),
        sections,
    });
    Ok(())
}

/// Re-attaches what a ledgered repair recorded, for replay: each component
/// by its exact version and checksum, so replay reads the very content the
/// repair ran with, or fails naming it. The run's requirements and policy
/// were checked when it attached (the policy is ledgered with the session);
/// replay reproduces, it does not decide again.
pub fn reattach(
    store: &BundleStore,
    components: &[BundleComponent],
) -> Result<Attached, BundleError> {
    let mut attached = Attached::default();
    for c in components {
        let r = BundleRef::Checksum(c.id.clone(), c.checksum.clone());
        let (row, draft) = store.resolve(&r)?;
        add(
            &mut attached,
            &BundleRef::Version(c.id.clone(), c.version),
            &row,
            &draft,
        )?;
    }
    Ok(attached)
}

/// For a reader of the ledger in `trellis_dir` (replay,
/// explain-session): the section texts each `bundles_attached` row
/// names, read back by exact version and checksum ([`reattach`]).
/// A store that cannot be opened fails each such row, saying why.
pub fn attached_texts(
    trellis_dir: &Path,
) -> impl Fn(&BundlesAttached) -> Result<Vec<PinnedReplacement>, String> + use<> {
    let store = BundleStore::open(trellis_dir).map_err(|e| e.to_string());
    move |attached| match &store {
        Ok(store) => reattach(store, &attached.components)
            .map(|a| a.replacements)
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::draft::Draft;
    use super::super::draft::tests::{draft, role_section};
    use super::super::store::WriteOptions;
    use super::*;
    use crate::statedir::Dir;

    fn store_with(dir: &std::path::Path, drafts: &[(&str, Draft)]) -> BundleStore {
        let store = BundleStore::open_in(&Dir::open_last(dir, true).unwrap()).unwrap();
        for (id, d) in drafts {
            store.write(id, d, &WriteOptions::default()).unwrap();
        }
        store
    }

    fn run<'a>(tools: &'a [&'a str], stages: &'a [String]) -> RunCapabilities<'a> {
        RunCapabilities {
            tools,
            stages,
            allow_experimental: true,
            allow_core_override: false,
        }
    }

    #[test]
    fn attach_resolves_once_into_values_a_later_write_cannot_reach() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(
            dir.path(),
            &[("terse", draft("terse", &role_section("one")))],
        );
        let stages = vec!["build".to_owned()];
        let attached = attach(&store, &["terse".into()], &run(&[], &stages)).unwrap();
        let options = WriteOptions {
            base: Some(1),
            ..WriteOptions::default()
        };
        store
            .write("terse", &draft("terse", &role_section("two")), &options)
            .unwrap();
        store.set_default("terse", 2, "").unwrap();
        assert_eq!(attached.components[0].version, 1);
        assert!(attached.replacements[0].body.contains("one"));
        let again = reattach(&store, &attached.components).unwrap();
        assert_eq!(again.replacements, attached.replacements);
    }

    #[test]
    fn a_requirement_the_run_cannot_meet_is_refused_at_attach() {
        let dir = tempfile::tempdir().unwrap();
        let mut needs = draft("needs", &role_section("x"));
        needs.manifest.requires.tools = vec!["run_tests".into()];
        let mut staged = draft("staged", &role_section("y"));
        staged.manifest.requires.stages = vec!["test".into()];
        let store = store_with(dir.path(), &[("needs", needs), ("staged", staged)]);
        let build_only = vec!["build".to_owned()];
        let error = attach(&store, &["needs".into()], &run(&[], &build_only)).unwrap_err();
        assert!(
            error.to_string().contains("requires the tool `run_tests`"),
            "{error}"
        );
        assert!(attach(&store, &["needs".into()], &run(&["run_tests"], &build_only)).is_ok());
        let error = attach(&store, &["staged".into()], &run(&[], &build_only)).unwrap_err();
        assert!(
            error.to_string().contains("a bundle cannot add a stage"),
            "{error}"
        );
        let strict = RunCapabilities {
            allow_experimental: false,
            ..run(&["run_tests"], &build_only)
        };
        let error = attach(&store, &["needs@1".into()], &strict).unwrap_err();
        assert!(
            error.to_string().contains("--allow-experimental-prompts"),
            "{error}"
        );
    }

    #[test]
    fn two_bundles_replacing_one_section_or_one_id_twice_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with(
            dir.path(),
            &[
                ("a", draft("a", &role_section("a"))),
                ("b", draft("b", &role_section("b"))),
            ],
        );
        let stages = vec!["build".to_owned()];
        assert!(attach(&store, &["a".into(), "b".into()], &run(&[], &stages)).is_err());
        assert!(attach(&store, &["a".into(), "a@1".into()], &run(&[], &stages)).is_err());
    }
}
