//! `trellis.toml`: the workspace's configuration.
//!
//! Layers, lowest precedence first: the user's config directory
//! (`~/.config/trellis/config.toml`), the workspace's `trellis.toml`, then the
//! editor's `initializationOptions`. Each layer is checked on its own, so an
//! unknown key or a wrong type is reported with the file (or "LSP
//! initializationOptions") it came from; the merged result is then validated
//! and a bad value is reported with its dotted key.
//!
//! A file is read only when it is a regular file (a symlink to one is fine)
//! of at most [`MAX_CONFIG_BYTES`]: a FIFO would block start-up forever and a
//! link to `/dev/zero` would exhaust memory. `[prompts]` is honoured only in
//! the workspace's `trellis.toml`, where `Engine::open` pins its bundles
//! (workspace-relative paths); in the user file or `initializationOptions`
//! it is refused by name rather than dropped.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod models;
mod sandbox;

use crate::gate::GateParams;
use crate::language::{self, Language, StageRole};
use crate::search::{Counter, SearchLimits};
use models::{
    ModelEndpoint, TurnLimits, TurnLimitsLayer, VerificationConfig, VerificationLayer,
    validate_models,
};
pub use sandbox::SandboxConfig;
use sandbox::SandboxLayer;

/// The file a workspace is configured by.
pub const WORKSPACE_FILE: &str = "trellis.toml";

/// The largest configuration file read (1 MiB); a larger one is refused.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    /// The languages whose markers the workspace root holds
    /// ([`crate::workspace::languages`]); each one's stage set runs.
    pub languages: Vec<Language>,
    pub gate: GateParams,
    pub stages: StagesConfig,
    pub exploration: ExplorationConfig,
    /// `[[models]]`: the model endpoints in failover order; empty = no model.
    pub models: Vec<ModelEndpoint>,
    /// `[model_turns]`: the allowances of one model branch.
    pub model_turns: TurnLimits,
    pub verification: VerificationConfig,
    pub build: BuildConfig,
    pub python: PythonConfig,
    pub sandbox: SandboxConfig,
}

/// `[python]`: how the Python stages run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PythonConfig {
    /// The interpreter the stages measure with (relative to the workspace
    /// or absolute); unset: `VIRTUAL_ENV`, then `.venv`, then `python3`.
    pub interpreter: Option<PathBuf>,
}

/// `[build]`: how cargo is run in the slots.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BuildConfig {
    /// `RUSTC_WRAPPER` for slot builds (`"sccache"`); unset keeps the
    /// environment's.
    pub rustc_wrapper: Option<String>,
    /// Build each slot where the workspace is, in a private mount namespace
    /// (Linux), so rustc reuses the user's incremental state. On by
    /// default; where the system does not allow it, slots build at their
    /// own paths.
    pub at_workspace_path: bool,
}

impl Default for BuildConfig {
    fn default() -> Self {
        Self {
            rustc_wrapper: None,
            at_workspace_path: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StagesConfig {
    /// Stages whose passing is hard pass. Others are advisory. Unset, the
    /// default stages of every detected language ([`language::default_required`]).
    pub required: Vec<String>,
    /// The deadline of every stage that is not a test stage.
    pub build_timeout_secs: u64,
    pub test_timeout_secs: u64,
    /// Stages declared nondeterministic (PSP-10 Assumption 2): a failing
    /// test there is re-run once, alone and by exact name, before it may
    /// support a no-good. By default every stage that can re-run its
    /// failures ([`language::rerunnable_stages`]).
    pub nondeterministic: Vec<String>,
}

impl StagesConfig {
    /// The deadline of the stage `stage`, by its role.
    pub fn timeout_secs(&self, stage: &str) -> u64 {
        match language::stage_role(stage) {
            StageRole::Test => self.test_timeout_secs,
            StageRole::Check | StageRole::Lint => self.build_timeout_secs,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExplorationConfig {
    /// Branches opened before any expansion trigger (always 1 today).
    pub initial_branches: usize,
    /// Branches per search step (1..=3).
    pub max_branches: usize,
    /// Accepted steps per repair before it stops with residuals.
    pub max_steps: usize,
    /// How often a branch may continue its own partial checkpoint (local
    /// repair) before the search opens a child from it instead (0..=8).
    pub local_retries: u32,
    /// Eager-copy reservation limits per branch.
    pub workspace_files: u64,
    pub workspace_bytes: u64,
    /// Per-forest search limits (`[exploration.limits]`), one per counter.
    pub limits: SearchLimits,
}

/// A branch continuing its own partial checkpoint more often than this is
/// stuck in place; the budget is better spent on a child or another branch.
const MAX_LOCAL_RETRIES: u32 = 8;

impl Default for Config {
    fn default() -> Self {
        Config {
            languages: vec![Language::Rust],
            gate: GateParams {
                rho: 0.5,
                rejection_budget: 2,
            },
            stages: StagesConfig {
                required: vec!["build".into(), "test".into()],
                build_timeout_secs: 300,
                test_timeout_secs: 600,
                // A failure that does not reproduce would otherwise block
                // its exact repair until the files change; re-running only
                // the failing tests of an already built binary costs little.
                nondeterministic: language::rerunnable_stages()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            },
            exploration: ExplorationConfig {
                initial_branches: 1,
                max_branches: 3,
                max_steps: 8,
                local_retries: 2,
                workspace_files: 100_000,
                workspace_bytes: 2 << 30,
                limits: SearchLimits::DEFAULT_LIMITS,
            },
            models: Vec::new(),
            model_turns: TurnLimits::DEFAULT,
            verification: VerificationConfig::default(),
            build: BuildConfig::default(),
            python: PythonConfig::default(),
            sandbox: SandboxConfig::default(),
        }
    }
}

/// One layer as written: every key optional, no unknown keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Layer {
    gate: Option<GateLayer>,
    stages: Option<StagesLayer>,
    exploration: Option<ExplorationLayer>,
    build: Option<BuildLayer>,
    python: Option<PythonLayer>,
    sandbox: Option<SandboxLayer>,
    /// `[prompts]`: validated by `trellis-prompts` when a session starts
    /// (`Engine::open`), from the workspace file only.
    prompts: Option<toml::Value>,
    /// The pre-search `[ensemble]` table; present only to refuse it clearly.
    ensemble: Option<toml::Value>,
    /// A layer's `[[models]]` replace the chain of the layers below it.
    models: Option<Vec<ModelEndpoint>>,
    model_turns: Option<TurnLimitsLayer>,
    verification: Option<VerificationLayer>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildLayer {
    rustc_wrapper: Option<String>,
    at_workspace_path: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PythonLayer {
    interpreter: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GateLayer {
    rho: Option<f64>,
    rejection_budget: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StagesLayer {
    required: Option<Vec<String>>,
    build_timeout_secs: Option<u64>,
    test_timeout_secs: Option<u64>,
    nondeterministic: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExplorationLayer {
    initial_branches: Option<usize>,
    max_branches: Option<usize>,
    max_steps: Option<usize>,
    local_retries: Option<u32>,
    workspace_files: Option<u64>,
    workspace_bytes: Option<u64>,
    limits: Option<LimitsLayer>,
}

/// `[exploration.limits]`: one optional value per search counter.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsLayer {
    actions: Option<u64>,
    model_turns: Option<u64>,
    tool_calls: Option<u64>,
    mutations: Option<u64>,
    verifier_runs: Option<u64>,
    tokens: Option<u64>,
    elapsed_secs: Option<u64>,
    result_bytes: Option<u64>,
    workspace_files: Option<u64>,
    workspace_bytes: Option<u64>,
}

impl LimitsLayer {
    fn apply(self, limits: &mut SearchLimits) {
        let set = |slot: &mut u64, value: Option<u64>| *slot = value.unwrap_or(*slot);
        set(&mut limits.actions, self.actions);
        set(&mut limits.model_turns, self.model_turns);
        set(&mut limits.tool_calls, self.tool_calls);
        set(&mut limits.mutations, self.mutations);
        set(&mut limits.verifier_runs, self.verifier_runs);
        set(&mut limits.tokens, self.tokens);
        set(&mut limits.elapsed_secs, self.elapsed_secs);
        set(&mut limits.result_bytes, self.result_bytes);
        set(&mut limits.workspace_files, self.workspace_files);
        set(&mut limits.workspace_bytes, self.workspace_bytes);
    }
}

/// A configuration problem, naming where it came from.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct ConfigError {
    /// The file, or `LSP initializationOptions`.
    pub source_name: String,
    pub message: String,
}

/// Why `[prompts]` outside the workspace file is refused: its bundles are
/// workspace files, pinned into that workspace's `.trellis/`, so a user-wide
/// or editor-wide list has no root to resolve against.
const PROMPTS_ONLY_IN_WORKSPACE: &str = "`[prompts]` is read only from the workspace's `trellis.toml` \
     (its bundles are paths in the workspace); move the table there";

/// The text of a configuration file; `None` when there is none. Refuses
/// anything that is not a regular file after following symlinks (a FIFO, a
/// device, a directory), a dangling symlink, and a file larger than
/// [`MAX_CONFIG_BYTES`], without blocking on the open or reading past the cap.
fn read_config_file(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read as _;

    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read: {e}")),
        Ok(_) => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Opening a FIFO for reading waits for a writer; non-blocking, it does
    // not, and the type check below refuses it before any read.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "cannot read: it is a symlink to nothing".to_owned(),
        _ => format!("cannot read: {e}"),
    })?;
    let metadata = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
    if !metadata.is_file() {
        return Err(format!(
            "not a regular file ({}); a configuration file must be one",
            file_kind(&metadata.file_type())
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(format!(
            "larger than {} KiB; a configuration file is at most that",
            MAX_CONFIG_BYTES >> 10
        ));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| format!("cannot read: not UTF-8 ({e})"))
}

fn file_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

impl Config {
    /// Loads the layers for `workspace`. `user_file` is normally
    /// [`Config::user_file`]; `init_options` the editor's JSON object.
    /// The workspace's languages are detected from its markers; a root with
    /// none is sensed as Rust, whose tools then say what is missing.
    pub fn load(
        workspace: &Path,
        user_file: Option<&Path>,
        init_options: Option<&serde_json::Value>,
    ) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        let detected = crate::workspace::languages(workspace);
        if !detected.is_empty() {
            config.languages = detected;
        }
        config.stages.required = language::default_required(&config.languages);
        let mut origin = "defaults".to_owned();
        let workspace_file = workspace.join(WORKSPACE_FILE);
        for path in user_file
            .into_iter()
            .map(Path::to_path_buf)
            .chain([workspace_file.clone()])
        {
            let name = path.display().to_string();
            let error = |message: String| ConfigError {
                source_name: name.clone(),
                message,
            };
            let Some(text) = read_config_file(&path).map_err(error)? else {
                continue;
            };
            let layer: Layer =
                toml::from_str(&text).map_err(|e| error(e.to_string().trim_end().to_owned()))?;
            if path != workspace_file && layer.prompts.is_some() {
                return Err(error(PROMPTS_ONLY_IN_WORKSPACE.into()));
            }
            config.apply(layer).map_err(error)?;
            origin = name;
        }
        if let Some(options) = init_options.filter(|v| !v.is_null()) {
            let name = "LSP initializationOptions".to_owned();
            let layer: Layer =
                serde_json::from_value(options.clone()).map_err(|e| ConfigError {
                    source_name: name.clone(),
                    message: e.to_string(),
                })?;
            if layer.prompts.is_some() {
                return Err(ConfigError {
                    source_name: name,
                    message: PROMPTS_ONLY_IN_WORKSPACE.into(),
                });
            }
            config.apply(layer).map_err(|message| ConfigError {
                source_name: name.clone(),
                message,
            })?;
            origin = name;
        }
        config
            .validate()
            .and_then(|()| config.sandbox.check_against(workspace))
            .map_err(|message| ConfigError {
                source_name: origin,
                message,
            })?;
        Ok(config)
    }

    /// `~/.config/trellis/config.toml` (or the platform's equivalent).
    pub fn user_file() -> Option<PathBuf> {
        dirs::config_dir().map(|d| d.join("trellis").join("config.toml"))
    }

    fn apply(&mut self, layer: Layer) -> Result<(), String> {
        if layer.ensemble.is_some() {
            return Err("`[ensemble]` was replaced by `[exploration]`: move `max_branches` there (at most 3), \
                        set `initial_branches = 1`, and delete `[ensemble]`"
                .into());
        }
        if let Some(b) = layer.build {
            match b.rustc_wrapper {
                Some(w) if w.trim().is_empty() => {
                    return Err("`build.rustc_wrapper` is empty: name a program such as \"sccache\", or remove the key".into());
                }
                Some(w) => self.build.rustc_wrapper = Some(w),
                None => {}
            }
            if let Some(at) = b.at_workspace_path {
                self.build.at_workspace_path = at;
            }
        }
        if let Some(p) = layer.python {
            match p.interpreter {
                Some(i) if i.as_os_str().is_empty() => {
                    return Err("`python.interpreter` is empty: name an interpreter such as \".venv/bin/python\", or remove the key".into());
                }
                Some(i) => self.python.interpreter = Some(i),
                None => {}
            }
        }
        if let Some(s) = layer.sandbox {
            s.apply(&mut self.sandbox)?;
        }
        if let Some(g) = layer.gate {
            self.gate.rho = g.rho.unwrap_or(self.gate.rho);
            self.gate.rejection_budget = g.rejection_budget.unwrap_or(self.gate.rejection_budget);
        }
        if let Some(s) = layer.stages {
            self.stages.required = s
                .required
                .unwrap_or(std::mem::take(&mut self.stages.required));
            self.stages.build_timeout_secs = s
                .build_timeout_secs
                .unwrap_or(self.stages.build_timeout_secs);
            self.stages.test_timeout_secs =
                s.test_timeout_secs.unwrap_or(self.stages.test_timeout_secs);
            if let Some(nondeterministic) = s.nondeterministic {
                self.stages.nondeterministic = nondeterministic;
            }
        }
        if let Some(s) = layer.exploration {
            let e = &mut self.exploration;
            e.initial_branches = s.initial_branches.unwrap_or(e.initial_branches);
            e.max_branches = s.max_branches.unwrap_or(e.max_branches);
            e.max_steps = s.max_steps.unwrap_or(e.max_steps);
            e.local_retries = s.local_retries.unwrap_or(e.local_retries);
            e.workspace_files = s.workspace_files.unwrap_or(e.workspace_files);
            e.workspace_bytes = s.workspace_bytes.unwrap_or(e.workspace_bytes);
            if let Some(limits) = s.limits {
                limits.apply(&mut e.limits);
            }
        }
        if let Some(models) = layer.models {
            self.models = models;
        }
        if let Some(t) = layer.model_turns {
            t.apply(&mut self.model_turns);
        }
        if let Some(v) = layer.verification {
            v.apply(&mut self.verification);
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), String> {
        if !(self.gate.rho.is_finite() && self.gate.rho > 0.0) {
            return Err(format!(
                "`gate.rho` must be a positive number, got {}",
                self.gate.rho
            ));
        }
        let e = &self.exploration;
        if !(1..=3).contains(&e.max_branches) {
            return Err(format!(
                "`exploration.max_branches` must be 1, 2 or 3, got {}",
                e.max_branches
            ));
        }
        if e.initial_branches != 1 {
            return Err(format!(
                "`exploration.initial_branches` must be 1 (a search starts with one branch), got {}",
                e.initial_branches
            ));
        }
        if e.max_steps == 0 {
            return Err("`exploration.max_steps` must be at least 1".into());
        }
        if e.local_retries > MAX_LOCAL_RETRIES {
            return Err(format!(
                "`exploration.local_retries` must be at most {MAX_LOCAL_RETRIES}, got {}",
                e.local_retries
            ));
        }
        if e.workspace_files == 0 || e.workspace_bytes == 0 {
            return Err("`exploration.workspace_files` and `exploration.workspace_bytes` must be at least 1".into());
        }
        // A zero limit would close every forest before its first action.
        if let Some(counter) = Counter::ALL.into_iter().find(|c| e.limits.get(*c) == 0) {
            return Err(format!(
                "`exploration.limits.{}` must be at least 1",
                counter.name()
            ));
        }
        language::check_required(&self.stages.required, &self.languages)?;
        let rerunnable = language::rerunnable_stages();
        for stage in &self.stages.nondeterministic {
            if !rerunnable.contains(&stage.as_str()) {
                return Err(format!(
                    "`stages.nondeterministic` names `{stage}`, which cannot re-run its failures \
                     one by one (allowed: {}; `[]` declares every stage deterministic)",
                    rerunnable.join(", ")
                ));
            }
        }
        if self.stages.build_timeout_secs == 0 || self.stages.test_timeout_secs == 0 {
            return Err(
                "`stages.build_timeout_secs` and `stages.test_timeout_secs` must be at least 1"
                    .into(),
            );
        }
        validate_models(&self.models)?;
        self.model_turns.validate()?;
        self.verification.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_with(text: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(WORKSPACE_FILE), text).unwrap();
        Config::load(dir.path(), None, None)
    }

    #[test]
    fn defaults_without_any_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            Config::load(dir.path(), None, None).unwrap(),
            Config::default()
        );
    }

    #[test]
    fn an_unknown_key_names_the_file_and_key() {
        let err = load_with("[gate]\nroh = 1.0\n").unwrap_err();
        assert!(err.source_name.ends_with("trellis.toml"), "{err}");
        assert!(err.message.contains("roh"), "{err}");
    }

    #[test]
    fn a_bad_value_names_the_dotted_key() {
        let err = load_with("[exploration]\nmax_branches = 7\n").unwrap_err();
        assert!(err.message.contains("exploration.max_branches"), "{err}");
        let err = load_with("[stages]\nrequired = [\"lint\"]\n").unwrap_err();
        assert!(err.message.contains("unknown stage `lint`"), "{err}");
        let err = load_with("[exploration]\nlocal_retries = 9\n").unwrap_err();
        assert!(err.message.contains("exploration.local_retries"), "{err}");
        let c = load_with("[exploration]\nlocal_retries = 0\n").unwrap();
        assert_eq!(c.exploration.local_retries, 0);
    }

    #[test]
    fn per_limit_values_are_read_and_a_bad_one_names_its_key() {
        let c = load_with("[exploration.limits]\nverifier_runs = 5\n").unwrap();
        assert_eq!(c.exploration.limits.verifier_runs, 5);
        assert_eq!(
            c.exploration.limits.actions,
            SearchLimits::DEFAULT_LIMITS.actions
        );
        let err = load_with("[exploration.limits]\nverifier_runs = 0\n").unwrap_err();
        assert!(
            err.message.contains("exploration.limits.verifier_runs"),
            "{err}"
        );
        let err = load_with("[exploration.limits]\nbranches = 2\n").unwrap_err();
        assert!(err.message.contains("branches"), "{err}");
    }

    /// Item 12: every test stage whose sensor can re-run its failures is
    /// declared nondeterministic unless a layer says otherwise; a stage
    /// that cannot re-run its failures is refused by name.
    #[test]
    fn nondeterministic_stages_default_to_the_rerunnable_tests_and_are_validated() {
        let c = load_with("").unwrap();
        assert_eq!(
            c.stages.nondeterministic,
            ["test", "python.test", "typescript.test"]
        );
        let c = load_with("[stages]\nnondeterministic = [\"python.test\"]\n").unwrap();
        assert_eq!(c.stages.nondeterministic, ["python.test"]);
        let c = load_with("[stages]\nnondeterministic = []\n").unwrap();
        assert!(c.stages.nondeterministic.is_empty());
        // A type check has no tests to re-run.
        let err =
            load_with("[stages]\nnondeterministic = [\"typescript.typecheck\"]\n").unwrap_err();
        assert!(
            err.message.contains(
                "`stages.nondeterministic` names `typescript.typecheck`, which cannot re-run"
            ) && err
                .message
                .contains("allowed: test, python.test, typescript.test"),
            "{err}"
        );
        let err = load_with("[stages]\nnondeterministic = [\"build\"]\n").unwrap_err();
        assert!(
            err.message
                .contains("`stages.nondeterministic` names `build`"),
            "{err}"
        );
        let err = load_with("[stages]\nnondeterministic = \"test\"\n").unwrap_err();
        assert!(err.message.contains("nondeterministic"), "{err}");
    }

    #[test]
    fn a_python_workspace_requires_its_typecheck_and_test_stages_by_default() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("pyproject.toml"),
            "[project]\nname = \"p\"\n",
        )
        .unwrap();
        let c = Config::load(dir.path(), None, None).unwrap();
        assert_eq!(c.languages, [Language::Python]);
        assert_eq!(c.stages.required, ["python.typecheck", "python.test"]);
        std::fs::write(
            dir.path().join(WORKSPACE_FILE),
            "[stages]\nrequired = [\"python.test\", \"python.lint\"]\n",
        )
        .unwrap();
        let c = Config::load(dir.path(), None, None).unwrap();
        assert_eq!(c.stages.required, ["python.test", "python.lint"]);
    }

    #[test]
    fn a_required_stage_of_a_language_the_workspace_lacks_names_the_key_and_marker() {
        let err = load_with("[stages]\nrequired = [\"build\", \"python.test\"]\n").unwrap_err();
        assert!(err.source_name.ends_with("trellis.toml"), "{err}");
        assert!(
            err.message
                .contains("`stages.required` names `python.test`"),
            "{err}"
        );
        assert!(err.message.contains("pyproject.toml"), "{err}");
    }

    #[test]
    fn the_python_interpreter_is_read_and_an_empty_one_names_its_key() {
        let c = load_with("[python]\ninterpreter = \"env/bin/python\"\n").unwrap();
        assert_eq!(c.python.interpreter, Some(PathBuf::from("env/bin/python")));
        let err = load_with("[python]\ninterpreter = \"\"\n").unwrap_err();
        assert!(
            err.message.contains("`python.interpreter` is empty"),
            "{err}"
        );
        let err = load_with("[python]\ninterpeter = \"x\"\n").unwrap_err();
        assert!(err.message.contains("interpeter"), "{err}");
    }

    #[test]
    fn each_stage_gets_the_timeout_of_its_role() {
        let stages = Config::default().stages;
        assert_eq!(stages.timeout_secs("python.test"), stages.test_timeout_secs);
        assert_eq!(stages.timeout_secs("test"), stages.test_timeout_secs);
        assert_eq!(
            stages.timeout_secs("python.lint"),
            stages.build_timeout_secs
        );
        assert_eq!(stages.timeout_secs("build"), stages.build_timeout_secs);
    }

    #[test]
    fn an_empty_required_stage_list_is_refused() {
        let err = load_with("[stages]\nrequired = []\n").unwrap_err();
        assert!(
            err.message
                .contains("`stages.required` must name at least one stage"),
            "{err}"
        );
    }

    #[test]
    fn initial_branches_other_than_one_is_refused_by_name() {
        let c = load_with("[exploration]\ninitial_branches = 1\n").unwrap();
        assert_eq!(c.exploration.initial_branches, 1);
        let err = load_with("[exploration]\ninitial_branches = 2\n").unwrap_err();
        assert!(
            err.message
                .contains("`exploration.initial_branches` must be 1"),
            "{err}"
        );
    }

    #[test]
    fn a_legacy_ensemble_section_gets_a_migration_message() {
        let err = load_with("[ensemble]\nsize = 4\n").unwrap_err();
        assert!(err.message.contains("replaced by `[exploration]`"), "{err}");
    }

    #[test]
    fn layers_override_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.toml");
        std::fs::write(&user, "[gate]\nrho = 0.25\nrejection_budget = 5\n").unwrap();
        std::fs::write(dir.path().join(WORKSPACE_FILE), "[gate]\nrho = 0.75\n").unwrap();
        let init = serde_json::json!({ "exploration": { "max_branches": 1 } });
        let c = Config::load(dir.path(), Some(&user), Some(&init)).unwrap();
        assert_eq!(c.gate.rho, 0.75);
        assert_eq!(c.gate.rejection_budget, 5);
        assert_eq!(c.exploration.max_branches, 1);
        let bad = serde_json::json!({ "exploration": { "branches": 1 } });
        let err = Config::load(dir.path(), None, Some(&bad)).unwrap_err();
        assert_eq!(err.source_name, "LSP initializationOptions");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_link_to_a_device_is_refused_without_blocking_or_reading() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(WORKSPACE_FILE);
        let status = std::process::Command::new("mkfifo")
            .arg(&file)
            .status()
            .unwrap();
        assert!(status.success());
        let err = Config::load(dir.path(), None, None).unwrap_err();
        assert!(err.source_name.ends_with("trellis.toml"), "{err}");
        assert!(err.message.contains("not a regular file (a FIFO)"), "{err}");

        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
        let err = Config::load(dir.path(), None, None).unwrap_err();
        assert!(
            err.message.contains("not a regular file (a device)"),
            "{err}"
        );

        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(dir.path().join("missing.toml"), &file).unwrap();
        let err = Config::load(dir.path(), None, None).unwrap_err();
        assert!(err.message.contains("a symlink to nothing"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_to_a_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.toml");
        std::fs::write(&real, "[gate]\nrho = 0.25\n").unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join(WORKSPACE_FILE)).unwrap();
        assert_eq!(Config::load(dir.path(), None, None).unwrap().gate.rho, 0.25);
    }

    #[test]
    fn a_rustc_wrapper_is_read_and_an_empty_one_refused() {
        let config = load_with("[build]\nrustc_wrapper = \"sccache\"\n").unwrap();
        assert_eq!(config.build.rustc_wrapper.as_deref(), Some("sccache"));
        assert!(config.build.at_workspace_path, "on unless switched off");
        let off = load_with("[build]\nat_workspace_path = false\n").unwrap();
        assert!(!off.build.at_workspace_path);
        let err = load_with("[build]\nrustc_wrapper = \" \"\n").unwrap_err();
        assert!(
            err.message.contains("`build.rustc_wrapper` is empty"),
            "{err}"
        );
        let err = load_with("[build]\nwrapper = \"sccache\"\n").unwrap_err();
        assert!(err.message.contains("wrapper"), "{err}");
    }

    #[test]
    fn a_file_over_the_cap_is_refused() {
        let big = format!("# {}\n", "x".repeat(MAX_CONFIG_BYTES as usize));
        let err = load_with(&big).unwrap_err();
        assert!(err.message.contains("larger than 1024 KiB"), "{err}");
    }

    #[test]
    fn prompts_outside_the_workspace_file_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.toml");
        std::fs::write(&user, "[prompts]\nbundles = [\"b.toml\"]\n").unwrap();
        let err = Config::load(dir.path(), Some(&user), None).unwrap_err();
        assert_eq!(err.source_name, user.display().to_string());
        assert!(
            err.message.contains("`[prompts]` is read only from"),
            "{err}"
        );

        let init = serde_json::json!({ "prompts": { "bundles": ["b.toml"] } });
        let err = Config::load(dir.path(), None, Some(&init)).unwrap_err();
        assert_eq!(err.source_name, "LSP initializationOptions");
        assert!(
            err.message.contains("`[prompts]` is read only from"),
            "{err}"
        );

        std::fs::write(
            dir.path().join(WORKSPACE_FILE),
            "[prompts]\nactivation_min_tasks = 40\n",
        )
        .unwrap();
        assert!(Config::load(dir.path(), None, None).is_ok());
    }
}

#[cfg(test)]
mod effects;
#[cfg(test)]
mod keys;
#[cfg(test)]
mod model_tables;
