//! The session's prompt policy and the prompt bundles pinned under it.
//!
//! The workspace's `[prompts]` table and its bundles are validated when the
//! engine opens and copied into `.trellis/prompt-bundles/`; the session uses
//! that pinned copy and never rereads the source. It must never start a
//! session over a bundle it refused: any problem refuses start-up, naming
//! the file and the reason.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::EngineError;

/// The session's stance on experimental prompt text (`--allow-experimental-prompts`,
/// `--allow-core-prompt-override`). Both are recorded when the session starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptPolicy {
    pub allow_experimental: bool,
    pub allow_core_override: bool,
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
) -> Result<Vec<PinnedBundleSection>, EngineError> {
    let config = trellis_prompts::activation::PromptsConfig::load(root)
        .map_err(|(path, message)| EngineError::Config { path, message })?;
    if config.bundles.is_empty() {
        return Ok(Vec::new());
    }
    // The store is `.trellis/prompt-bundles/`, checked not to be a link.
    state.child("prompt-bundles", true)?;
    let store = state.path();
    let policy = trellis_prompts::ResolutionPolicy {
        allow_experimental: policy.allow_experimental,
        allow_core_override: policy.allow_core_override,
    };
    // Each error names its bundle file and line; the config file is where the bundle was listed.
    let pinned = trellis_prompts::bundles::load_bundles(&config.bundles, root, store, policy)
        .map_err(|errors| EngineError::Config {
            path: root.join(crate::config::WORKSPACE_FILE),
            message: errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; "),
        })?;
    Ok(pinned
        .into_iter()
        .map(|p| PinnedBundleSection {
            section: p.schema.id.to_owned(),
            content_hash: p.content_hash,
            stored: p.stored,
        })
        .collect())
}

/// The store bundles one repair runs with: `refs` resolved once, now,
/// through the bundle store, for a run with this configuration's tools and
/// required stages under `policy`. This is the one way a session obtains
/// store bundles; the texts it returns are values the store can no longer
/// change.
pub(crate) fn session_bundles(
    store: &crate::bundles::BundleStore,
    refs: &[String],
    config: &crate::config::Config,
    policy: PromptPolicy,
) -> Result<crate::bundles::Attached, EngineError> {
    if refs.is_empty() {
        return Ok(crate::bundles::Attached::default());
    }
    // Without a model there is no actor, so no tool a bundle could rely on.
    let tools: &[&str] = if config.models.is_empty() {
        &[]
    } else {
        &crate::actor::tools::TOOL_NAMES
    };
    let run = crate::bundles::RunCapabilities {
        tools,
        stages: &config.stages.required,
        allow_experimental: policy.allow_experimental,
        allow_core_override: policy.allow_core_override,
    };
    Ok(crate::bundles::attach(store, refs, &run)?)
}
