//! `[sandbox]`: what a slot's processes may do beyond their slot
//! (`sensor/sandbox`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sensor::sandbox::{Network, Policy};

/// `[sandbox]`, as merged from every layer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SandboxConfig {
    /// The network model-written code gets: its own loopback only
    /// (`"loopback"`, the default) or the machine's (`"allow"`). The
    /// user's own code and their tools' fixes always get the machine's,
    /// as the user's own runs do.
    pub network: Network,
    /// Refuse to run model-written code where the system cannot sandbox
    /// it (on by default); `false` runs it with the user's rights.
    pub require: bool,
    /// Directories outside the slot that the user's own code and their
    /// tools' fixes may also write when a slot builds and tests them: a
    /// compiler cache, the log of a `rustc_wrapper`. Absolute (or `~/`),
    /// existing, and never the workspace or anything around it. Code a
    /// model wrote never gets them.
    pub writable: Vec<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            network: Network::Loopback,
            require: true,
            writable: Vec::new(),
        }
    }
}

impl SandboxConfig {
    /// The sandbox policy of a run of the user's code or their tools'
    /// fixes: the machine's network, `writable`, and a run without a
    /// sandbox where the system offers none.
    pub fn for_user_code(&self) -> Policy {
        Policy {
            writable: self.writable.clone(),
            ..Policy::USER_CODE
        }
    }

    /// The sandbox policy of a run of code a model wrote.
    pub fn for_model_code(&self) -> Policy {
        Policy {
            network: self.network,
            require: self.require,
            model_code: true,
            writable: Vec::new(),
            hidden: Vec::new(),
        }
    }

    /// Refuses a writable directory that would open the workspace at
    /// `root` to a slot's processes (the workspace itself, a directory in
    /// it, or one around it), or Trellis's own slots (a directory holding
    /// the cache, whose seed store shares the user's build artifacts).
    pub(super) fn check_against(&self, root: &Path) -> Result<(), String> {
        let canonical = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let cache = canonical(&crate::slots::cache_root(root));
        let root = canonical(root);
        for dir in &self.writable {
            let (what, why) = if dir.starts_with(&root) {
                ("is in the workspace", &root)
            } else if root.starts_with(dir) {
                ("holds the workspace", &root)
            } else if cache.starts_with(dir) {
                ("holds Trellis's slots", &cache)
            } else {
                continue;
            };
            return Err(format!(
                "`sandbox.writable` names {}, which {what} {}: a slot's processes must never \
                 write the user's files, nor another slot's",
                dir.display(),
                why.display()
            ));
        }
        Ok(())
    }
}

/// `[sandbox]` as one layer writes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SandboxLayer {
    network: Option<Network>,
    require: Option<bool>,
    writable: Option<Vec<PathBuf>>,
}

impl SandboxLayer {
    /// Applies this layer over `config`: its `writable` replaces the lower
    /// layers' list. Each directory must be absolute (`~/` is the home
    /// directory) and exist; it is kept by its canonical path.
    pub(super) fn apply(self, config: &mut SandboxConfig) -> Result<(), String> {
        config.network = self.network.unwrap_or(config.network);
        config.require = self.require.unwrap_or(config.require);
        if let Some(writable) = self.writable {
            config.writable = writable
                .iter()
                .map(|dir| writable_dir(dir))
                .collect::<Result<_, _>>()?;
        }
        Ok(())
    }
}

fn writable_dir(dir: &Path) -> Result<PathBuf, String> {
    let expanded = match dir.strip_prefix("~") {
        Ok(rest) => dirs::home_dir()
            .ok_or("`sandbox.writable` uses `~`, but there is no home directory")?
            .join(rest),
        Err(_) => dir.to_path_buf(),
    };
    if !expanded.is_absolute() {
        return Err(format!(
            "`sandbox.writable` names {}, which is not absolute: write it from `/` or `~/`",
            dir.display()
        ));
    }
    let canonical = expanded.canonicalize().map_err(|e| {
        format!(
            "`sandbox.writable` names {}, which cannot be used: {e}",
            dir.display()
        )
    })?;
    if !canonical.is_dir() {
        return Err(format!(
            "`sandbox.writable` names {}, which is not a directory",
            dir.display()
        ));
    }
    if canonical.parent().is_none() {
        return Err("`sandbox.writable` names `/`: a slot's processes could write anything".into());
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::super::{Config, WORKSPACE_FILE};

    fn load(text: &str) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(WORKSPACE_FILE), text).unwrap();
        Config::load(dir.path(), None, None).map_err(|e| e.to_string())
    }

    #[test]
    fn the_defaults_confine_model_code_to_its_own_loopback_and_require_a_sandbox() {
        let config = load("").unwrap();
        let model = config.sandbox.for_model_code();
        assert_eq!(model.network, crate::sensor::sandbox::Network::Loopback);
        assert!(model.require && model.model_code && model.writable.is_empty());
        let user = config.sandbox.for_user_code();
        assert_eq!(user, crate::sensor::sandbox::Policy::USER_CODE);
    }

    #[test]
    fn writable_directories_must_be_absolute_existing_and_apart_from_the_workspace() {
        let beside = tempfile::tempdir().unwrap();
        let ok = load(&format!(
            "[sandbox]\nwritable = [{:?}]\n",
            beside.path().display().to_string()
        ))
        .unwrap();
        assert_eq!(ok.sandbox.writable, [beside.path().canonicalize().unwrap()]);
        assert!(
            ok.sandbox.for_model_code().writable.is_empty(),
            "never a model's"
        );
        for (text, said) in [
            ("writable = [\"cache\"]", "not absolute"),
            (
                "writable = [\"/nonexistent/trellis-cache\"]",
                "cannot be used",
            ),
            ("writable = [\"/\"]", "could write anything"),
            ("writable = [\"/etc/hostname\"]", "not a directory"),
            ("network = \"everywhere\"", "unknown variant"),
        ] {
            let err = load(&format!("[sandbox]\n{text}\n")).unwrap_err();
            assert!(err.contains(said), "{text}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("inside")).unwrap();
        let text = format!(
            "[sandbox]\nwritable = [{:?}]\n",
            dir.path().join("inside").display().to_string()
        );
        std::fs::write(dir.path().join(WORKSPACE_FILE), text).unwrap();
        let err = Config::load(dir.path(), None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is in the workspace"), "{err}");
    }
}
