//! The session's prompt policy and the prompt bundles pinned under it.
//!
//! The workspace's `[prompts]` table and its bundles are validated when the
//! engine opens and copied into `.trellis/prompt-bundles/`; the session uses
//! that pinned copy and never rereads the source. It must never start a
//! session over a bundle it refused: any problem refuses start-up, naming
//! the file and the reason.
//!
//! Two functions are the whole interface by which a session obtains its
//! bundles, so a versioned store can replace what sits behind them:
//! [`pin_prompt_bundles`] at start (the [`SessionPrompts`] every model call
//! compiles with), and [`restore_pinned`] when replay or a resume reads a
//! ledgered session's pins back.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use trellis_prompts::ResolutionPolicy;
use trellis_prompts::bundles::PinnedReplacement;

use crate::error::EngineError;

/// The session's stance on experimental prompt text (`--allow-experimental-prompts`,
/// `--allow-core-prompt-override`). Both are recorded when the session starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptPolicy {
    pub allow_experimental: bool,
    pub allow_core_override: bool,
}

impl PromptPolicy {
    /// The resolution policy the prompt plane compiles under.
    pub(crate) fn resolution(self) -> ResolutionPolicy {
        ResolutionPolicy {
            allow_experimental: self.allow_experimental,
            allow_core_override: self.allow_core_override,
        }
    }
}

/// What a session's model calls compile with: the policy and the bundles
/// pinned under it, as ledgered (`pinned`) and as substituted into the
/// programs (`replacements`).
#[derive(Clone, Debug, Default)]
pub(crate) struct SessionPrompts {
    pub(crate) policy: PromptPolicy,
    pub(crate) pinned: Vec<PinnedBundleSection>,
    pub(crate) replacements: Vec<PinnedReplacement>,
}

/// A prompt bundle section pinned for the whole session: the store copy is
/// what the session uses; the source is never reread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedBundleSection {
    pub section: String,
    pub content_hash: String,
    pub stored: PathBuf,
}

/// Validates the workspace's `[prompts]` table and its bundles, and pins
/// them into `.trellis/prompt-bundles/`. Any problem refuses start-up with
/// the file and the reason.
pub(crate) fn pin_prompt_bundles(
    root: &Path,
    state: &crate::statedir::Dir,
    policy: PromptPolicy,
) -> Result<SessionPrompts, EngineError> {
    let config = trellis_prompts::activation::PromptsConfig::load(root)
        .map_err(|(path, message)| EngineError::Config { path, message })?;
    if config.bundles.is_empty() {
        return Ok(SessionPrompts {
            policy,
            ..SessionPrompts::default()
        });
    }
    // The store is `.trellis/prompt-bundles/`, checked not to be a link.
    state.child("prompt-bundles", true)?;
    let store = state.path();
    let resolution = policy.resolution();
    // Each error names its bundle file and line; the config file is where the bundle was listed.
    let replacements =
        trellis_prompts::bundles::load_bundles(&config.bundles, root, store, resolution).map_err(
            |errors| EngineError::Config {
                path: root.join(crate::config::WORKSPACE_FILE),
                message: errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            },
        )?;
    let pinned = replacements
        .iter()
        .map(|p| PinnedBundleSection {
            section: p.schema.id.to_owned(),
            content_hash: p.content_hash.clone(),
            stored: p.stored.clone(),
        })
        .collect();
    Ok(SessionPrompts {
        policy,
        pinned,
        replacements,
    })
}

/// A ledgered session's pinned bundles, read back from the store under
/// `state` (the `.trellis` directory) by content hash: each copy must still
/// be a valid section of this build with exactly the pinned hash. An error
/// names the copy and why it cannot stand for the pin (Gate Z: a program
/// that substituted it could not be rebuilt).
pub fn restore_pinned(
    state: &Path,
    pinned: &[PinnedBundleSection],
) -> Result<Vec<PinnedReplacement>, String> {
    pinned
        .iter()
        .map(|p| {
            let stored = state.join("prompt-bundles").join(format!(
                "{}.md",
                p.content_hash.trim_start_matches("sha256:")
            ));
            let restored = trellis_prompts::bundles::restore_pinned(&stored, &p.content_hash)
                .map_err(|e| format!("pinned bundle of `{}`: {e}", p.section))?;
            if restored.schema.id != p.section {
                return Err(format!(
                    "pinned bundle {} replaces `{}`, not the pinned `{}`",
                    stored.display(),
                    restored.schema.id,
                    p.section
                ));
            }
            Ok(restored)
        })
        .collect()
}

/// The store bundles one repair runs with: `refs` resolved once, now,
/// through the bundle store, for a run with this configuration's tools and
/// required stages under `policy` (`actor_tools`: the model actor's tool
/// names). This is the one way a session obtains
/// store bundles; the texts it returns are values the store can no longer
/// change.
pub(crate) fn session_bundles(
    store: &crate::bundles::BundleStore,
    refs: &[String],
    config: &crate::config::Config,
    (policy, actor_tools): (PromptPolicy, &[&str]),
) -> Result<crate::bundles::Attached, EngineError> {
    if refs.is_empty() {
        return Ok(crate::bundles::Attached::default());
    }
    // Without a model there is no actor, so no tool a bundle could rely on.
    let tools: &[&str] = if config.models.is_empty() {
        &[]
    } else {
        actor_tools
    };
    let run = crate::bundles::RunCapabilities {
        tools,
        stages: &config.stages.required,
        allow_experimental: policy.allow_experimental,
        allow_core_override: policy.allow_core_override,
    };
    Ok(crate::bundles::attach(store, refs, &run)?)
}

/// The replacements a model call compiles with: the session's pinned
/// `[prompts]` bundles, with any section the repair attached from the
/// bundle store in place of the pinned one (the repair's explicit refs win).
pub(crate) fn layered(
    pinned: &[PinnedReplacement],
    attached: &[PinnedReplacement],
) -> Vec<PinnedReplacement> {
    pinned
        .iter()
        .filter(|p| attached.iter().all(|a| a.schema.id != p.schema.id))
        .chain(attached)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOW: PromptPolicy = PromptPolicy {
        allow_experimental: true,
        allow_core_override: false,
    };

    #[test]
    fn pins_read_back_by_hash_and_a_changed_or_missing_copy_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(
            ws.path().join(crate::config::WORKSPACE_FILE),
            "[prompts]\nbundles = [\"bundle\"]\n",
        )
        .unwrap();
        std::fs::create_dir(ws.path().join("bundle")).unwrap();
        std::fs::write(
            ws.path().join("bundle/role.md"),
            "---\nid: branch_correct/role\nversion: 3\nrole: system\nrequired: true\n\
             priority: 100\nmax_bytes: 1024\nowner: team\nrationale: r\nreview: 2026-11-30\n\
             vars: {}\n---\nPinned role.\n",
        )
        .unwrap();
        let state = crate::statedir::open_state(ws.path()).unwrap();
        let prompts = pin_prompt_bundles(ws.path(), &state, ALLOW).unwrap();
        assert_eq!(prompts.policy, ALLOW);
        assert_eq!(prompts.pinned.len(), 1);

        let restored = restore_pinned(state.path(), &prompts.pinned).unwrap();
        let pinned = &prompts.replacements[0];
        assert_eq!(
            (
                restored[0].schema.id,
                &restored[0].body,
                &restored[0].content_hash
            ),
            (pinned.schema.id, &pinned.body, &pinned.content_hash)
        );

        let copy = &prompts.pinned[0].stored;
        let text = std::fs::read_to_string(copy).unwrap();
        std::fs::write(copy, text.replace("Pinned role.", "Another role.")).unwrap();
        let err = restore_pinned(state.path(), &prompts.pinned).unwrap_err();
        assert!(
            err.contains("branch_correct/role") && err.contains(&pinned.content_hash),
            "{err}"
        );
        std::fs::remove_file(copy).unwrap();
        let err = restore_pinned(state.path(), &prompts.pinned).unwrap_err();
        assert!(err.contains("branch_correct/role"), "{err}");
    }
}
