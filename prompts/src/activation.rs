//! Gate AE: measured prompt activation.
//!
//! An override stays experimental until a content-addressed
//! [`PromptChangeRecord`] bound to its exact section identity and hash shows,
//! on at least 30 paired tasks with a predeclared margin and a recorded
//! 10,000-resample bootstrap, no new escaped hard-gate regression,
//! noninferiority of the hidden hard-pass rate, and either a benefit in that
//! rate or in one predeclared cost. Activation rewrites only the manifest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use trellis_prompt_codegen::canonical::prompt_hasher;
use trellis_prompt_codegen::manifest::{self, ActivationState, Manifest};
use trellis_prompt_codegen::{Library, OverrideTarget};

use crate::stats::{Interval, paired_bootstrap};

/// The floor no configuration may lower.
pub const MIN_PAIRED_TASKS: usize = 30;
/// The ceiling of the noninferiority margin ε.
pub const MAX_NONINFERIORITY_MARGIN: f64 = 0.05;
/// The only admissible resample count.
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;
/// Where change records live inside the library root.
pub const CHANGES_DIR: &str = "changes";

/// `[prompts]` settings of `trellis.toml` that govern activation and bundles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptsConfig {
    #[serde(default)]
    pub bundles: Vec<PathBuf>,
    #[serde(default = "default_min_tasks")]
    pub activation_min_tasks: usize,
    #[serde(default = "default_margin")]
    pub noninferiority_margin: f64,
}

fn default_min_tasks() -> usize {
    MIN_PAIRED_TASKS
}

fn default_margin() -> f64 {
    MAX_NONINFERIORITY_MARGIN
}

impl Default for PromptsConfig {
    fn default() -> Self {
        PromptsConfig {
            bundles: Vec::new(),
            activation_min_tasks: MIN_PAIRED_TASKS,
            noninferiority_margin: MAX_NONINFERIORITY_MARGIN,
        }
    }
}

impl PromptsConfig {
    /// Configuration may raise the task floor or tighten ε, never relax
    /// them; every bundle is a relative path that stays in the workspace.
    pub fn validate(&self) -> Result<(), String> {
        for bundle in &self.bundles {
            let inside = bundle.components().all(|part| {
                matches!(
                    part,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
            if !inside || bundle.as_os_str().is_empty() {
                return Err(format!(
                    "`bundles` entry `{}` is not a relative path inside the workspace",
                    bundle.display()
                ));
            }
        }
        if self.activation_min_tasks < MIN_PAIRED_TASKS {
            return Err(format!(
                "`activation_min_tasks = {}` is below the floor of {MIN_PAIRED_TASKS}",
                self.activation_min_tasks
            ));
        }
        if !(0.0..=MAX_NONINFERIORITY_MARGIN).contains(&self.noninferiority_margin) {
            return Err(format!(
                "`noninferiority_margin = {}` is outside [0, {MAX_NONINFERIORITY_MARGIN}]",
                self.noninferiority_margin
            ));
        }
        Ok(())
    }

    /// Reads `[prompts]` from `<workspace>/trellis.toml`; absent file or table
    /// means defaults. Invalid values, and a file that is not a regular file
    /// or is over [`crate::files::MAX_CONFIG_BYTES`], are an error naming it.
    pub fn load(workspace: &Path) -> Result<PromptsConfig, (PathBuf, String)> {
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            prompts: Option<toml::Value>,
        }
        let path = workspace.join("trellis.toml");
        let text = match crate::files::read_regular(&path, crate::files::MAX_CONFIG_BYTES) {
            Ok(Some(text)) => text,
            Ok(None) => return Ok(PromptsConfig::default()),
            Err(reason) => return Err((path, reason)),
        };
        let file: File = toml::from_str(&text).map_err(|e| (path.clone(), e.to_string()))?;
        let config = match file.prompts {
            Some(value) => value
                .try_into::<PromptsConfig>()
                .map_err(|e| (path.clone(), format!("[prompts]: {e}")))?,
            None => PromptsConfig::default(),
        };
        config
            .validate()
            .map_err(|e| (path.clone(), format!("[prompts]: {e}")))?;
        Ok(config)
    }
}

/// Identity of one side of a comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionIdentity {
    pub file: String,
    pub version: u32,
    pub content_hash: String,
}

/// One arm's outcome on one task.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ArmOutcome {
    /// Passed the hidden hard gate.
    pub hard_pass: bool,
    /// A hard-gate failure that escaped to promotion.
    pub escaped_hard_gate_regression: bool,
    /// The predeclared normalized cost (lower is better).
    pub cost: f64,
}

/// Both arms on one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedTask {
    pub task_id: String,
    pub baseline: ArmOutcome,
    pub candidate: ArmOutcome,
}

/// The input of `trellis prompts evaluate`: a paired evaluation as run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairedResults {
    pub section_id: String,
    pub route: String,
    pub stage: String,
    pub base: SectionIdentity,
    pub candidate: SectionIdentity,
    pub baseline_manifest_digest: String,
    pub candidate_manifest_digest: String,
    pub benchmark_digest: String,
    pub model_revision: String,
    pub catalog_digest: String,
    pub task_order_seed: u64,
    /// Absent means the resampling procedure was not recorded.
    pub resampling_seed: Option<u64>,
    pub resamples: usize,
    /// ε, fixed before the evaluation ran.
    pub noninferiority_margin: f64,
    /// The one predeclared cost metric, if benefit may come from cost.
    pub cost_metric: Option<String>,
    pub budgets: BTreeMap<String, u64>,
    pub reviewer: String,
    pub tasks: Vec<PairedTask>,
}

/// The computed evidence and decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub tasks: usize,
    pub new_escaped_regressions: usize,
    pub hard_pass_difference: Option<Interval>,
    pub cost_difference: Option<Interval>,
}

/// Whether the evidence activates the override.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision", content = "reasons")]
pub enum Decision {
    Activate,
    Refuse(Vec<String>),
}

/// A content-addressed record binding an override to its evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptChangeRecord {
    pub results: PairedResults,
    pub config_min_tasks: usize,
    pub config_margin: f64,
    pub metrics: Metrics,
    pub decision: Decision,
    pub record_digest: String,
}

impl PromptChangeRecord {
    /// Canonical digest of everything but the digest field.
    pub fn compute_digest(&self) -> String {
        let r = &self.results;
        let mut h = prompt_hasher("prompt-change-record");
        h.str(&r.section_id).str(&r.route).str(&r.stage);
        for side in [&r.base, &r.candidate] {
            h.str(&side.file)
                .u64(u64::from(side.version))
                .str(&side.content_hash);
        }
        h.str(&r.baseline_manifest_digest)
            .str(&r.candidate_manifest_digest)
            .str(&r.benchmark_digest)
            .str(&r.model_revision)
            .str(&r.catalog_digest)
            .u64(r.task_order_seed)
            .opt_str(r.resampling_seed.map(|s| s.to_string()).as_deref())
            .u64(r.resamples as u64)
            .u64(r.noninferiority_margin.to_bits())
            .opt_str(r.cost_metric.as_deref())
            .u64(r.budgets.len() as u64);
        for (name, value) in &r.budgets {
            h.str(name).u64(*value);
        }
        h.str(&r.reviewer).u64(r.tasks.len() as u64);
        for task in &r.tasks {
            h.str(&task.task_id);
            for arm in [task.baseline, task.candidate] {
                h.bool(arm.hard_pass)
                    .bool(arm.escaped_hard_gate_regression)
                    .u64(arm.cost.to_bits());
            }
        }
        h.u64(self.config_min_tasks as u64)
            .u64(self.config_margin.to_bits());
        // Metrics and decision are functions of the above, but hashing them
        // binds the record to the numbers a reviewer actually saw.
        let m = &self.metrics;
        h.u64(m.tasks as u64).u64(m.new_escaped_regressions as u64);
        for interval in [m.hard_pass_difference, m.cost_difference] {
            match interval {
                Some(i) => h.bool(true).u64(i.lower.to_bits()).u64(i.upper.to_bits()),
                None => h.bool(false),
            };
        }
        match &self.decision {
            Decision::Activate => h.str("activate"),
            Decision::Refuse(reasons) => {
                h.str("refuse").u64(reasons.len() as u64);
                for reason in reasons {
                    h.str(reason);
                }
                &mut h
            }
        };
        h.finish().to_prefixed()
    }

    /// File name of this record inside `changes/`.
    pub fn file_name(digest: &str) -> String {
        format!("{}.json", digest.trim_start_matches("sha256:"))
    }
}

/// Computes metrics and applies every Gate AE rule. Pure and deterministic.
pub fn evaluate(results: PairedResults, config: &PromptsConfig) -> PromptChangeRecord {
    let mut reasons = Vec::new();
    if let Err(reason) = config.validate() {
        reasons.push(format!("configuration: {reason}"));
    }
    let floor = config.activation_min_tasks.max(MIN_PAIRED_TASKS);
    if results.tasks.len() < floor {
        reasons.push(format!(
            "sample floor: {} paired tasks, at least {floor} required",
            results.tasks.len()
        ));
    }
    let mut ids: Vec<&str> = results.tasks.iter().map(|t| t.task_id.as_str()).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        reasons.push("sample: task ids are not unique, so tasks are not paired".to_owned());
    }
    let margin_cap = config.noninferiority_margin.min(MAX_NONINFERIORITY_MARGIN);
    let epsilon = results.noninferiority_margin;
    if !(0.0..=margin_cap).contains(&epsilon) {
        reasons.push(format!(
            "margin: ε = {epsilon} is outside [0, {margin_cap}]"
        ));
    }
    let seed = match results.resampling_seed {
        Some(seed) if results.resamples == BOOTSTRAP_RESAMPLES => Some(seed),
        Some(_) => {
            reasons.push(format!(
                "resampling: {} resamples recorded, the procedure requires exactly {BOOTSTRAP_RESAMPLES}",
                results.resamples
            ));
            None
        }
        None => {
            reasons.push("resampling: no resampling seed was recorded".to_owned());
            None
        }
    };
    let new_escaped_regressions = results
        .tasks
        .iter()
        .filter(|t| {
            t.candidate.escaped_hard_gate_regression && !t.baseline.escaped_hard_gate_regression
        })
        .count();
    if new_escaped_regressions > 0 {
        reasons.push(format!(
            "safety: {new_escaped_regressions} new escaped hard-gate regression(s)"
        ));
    }

    let (hard_pass_difference, cost_difference) = match seed {
        Some(seed) if !results.tasks.is_empty() => {
            let pass = |b: bool| if b { 1.0 } else { 0.0 };
            let hard: Vec<f64> = results
                .tasks
                .iter()
                .map(|t| pass(t.candidate.hard_pass) - pass(t.baseline.hard_pass))
                .collect();
            let cost: Vec<f64> = results
                .tasks
                .iter()
                .map(|t| t.candidate.cost - t.baseline.cost)
                .collect();
            let intervals = paired_bootstrap(&[hard, cost], BOOTSTRAP_RESAMPLES, seed);
            (
                Some(intervals[0]),
                results.cost_metric.as_ref().map(|_| intervals[1]),
            )
        }
        _ => (None, None),
    };
    if let Some(hard) = hard_pass_difference {
        if hard.lower < -epsilon {
            reasons.push(format!(
                "noninferiority: hard-pass difference lower bound {:.4} is below -ε = {:.4}",
                hard.lower, -epsilon
            ));
        } else {
            let benefit_in_cost = cost_difference.is_some_and(|c| c.upper < 0.0);
            if hard.lower <= 0.0 && !benefit_in_cost {
                reasons.push(format!(
                    "benefit: hard-pass lower bound {:.4} is not above 0 and {}",
                    hard.lower,
                    match cost_difference {
                        Some(c) => format!(
                            "the cost difference upper bound {:.4} is not below 0",
                            c.upper
                        ),
                        None => "no cost metric was predeclared".to_owned(),
                    }
                ));
            }
        }
    }

    let metrics = Metrics {
        tasks: results.tasks.len(),
        new_escaped_regressions,
        hard_pass_difference,
        cost_difference,
    };
    let decision = if reasons.is_empty() {
        Decision::Activate
    } else {
        Decision::Refuse(reasons)
    };
    let mut record = PromptChangeRecord {
        results,
        config_min_tasks: config.activation_min_tasks,
        config_margin: config.noninferiority_margin,
        metrics,
        decision,
        record_digest: String::new(),
    };
    record.record_digest = record.compute_digest();
    record
}

/// Re-checks a stored record against the current library: digest, decision
/// (recomputed from the recorded tasks, so an edited or differently resampled
/// record is caught), and binding to the override's current identity.
pub fn verify_record(record: &PromptChangeRecord, library: &Library) -> Result<(), Vec<String>> {
    let mut reasons = Vec::new();
    if record.compute_digest() != record.record_digest {
        reasons.push("digest: the record's content does not hash to its digest".to_owned());
    }
    let config = PromptsConfig {
        bundles: Vec::new(),
        activation_min_tasks: record.config_min_tasks,
        noninferiority_margin: record.config_margin,
    };
    let recomputed = evaluate(record.results.clone(), &config);
    if recomputed.metrics != record.metrics {
        reasons.push(
            "resampling: recomputing the recorded bootstrap gives different intervals".to_owned(),
        );
    }
    if let Decision::Refuse(refusals) = &recomputed.decision {
        reasons.extend(refusals.iter().cloned());
    }
    let r = &record.results;
    let candidate = library
        .sections
        .iter()
        .find(|s| s.rel_path == r.candidate.file);
    match candidate {
        None => reasons.push(format!(
            "binding: no section file `{}` in the library",
            r.candidate.file
        )),
        Some(file) => {
            if file.target == OverrideTarget::Base {
                reasons.push(format!(
                    "binding: `{}` is a base section, not an override",
                    r.candidate.file
                ));
            }
            if file.spec.id != r.section_id {
                reasons.push(format!(
                    "binding: `{}` is section `{}`, not `{}`",
                    r.candidate.file, file.spec.id, r.section_id
                ));
            }
            if file.spec.content_hash != r.candidate.content_hash
                || file.spec.version != r.candidate.version
            {
                reasons.push(format!(
                    "binding: the record is for {} v{}, the override is now {} v{}",
                    r.candidate.content_hash,
                    r.candidate.version,
                    file.spec.content_hash,
                    file.spec.version
                ));
            }
            match library.base(&file.spec.id) {
                Some(base) if base.spec.content_hash == r.base.content_hash => {}
                _ => reasons.push(
                    "binding: the record's base hash is not the current base section".to_owned(),
                ),
            }
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

/// Reads `changes/<digest>.json` from the library root.
pub fn read_record(root: &Path, digest: &str) -> Result<PromptChangeRecord, String> {
    let path = root
        .join(CHANGES_DIR)
        .join(PromptChangeRecord::file_name(digest));
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: no change record for {digest}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{}: malformed change record: {e}", path.display()))
}

/// Stores a record under `changes/` and returns its path.
pub fn write_record(root: &Path, record: &PromptChangeRecord) -> std::io::Result<PathBuf> {
    let dir = root.join(CHANGES_DIR);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(PromptChangeRecord::file_name(&record.record_digest));
    let text = serde_json::to_string_pretty(record).map_err(std::io::Error::other)?;
    std::fs::write(&path, text + "\n")?;
    Ok(path)
}

/// Activates the override bound by the record `digest`, or refuses with
/// every failing condition. On success rewrites only the manifest.
pub fn activate(library: &Library, digest: &str) -> Result<String, Vec<String>> {
    let record = read_record(&library.root, digest).map_err(|e| vec![e])?;
    if record.record_digest != digest {
        return Err(vec![format!(
            "digest: the stored record claims {}, not {digest}",
            record.record_digest
        )]);
    }
    verify_record(&record, library)?;
    let path = library.root.join(manifest::MANIFEST_FILE);
    let text =
        std::fs::read_to_string(&path).map_err(|e| vec![format!("{}: {e}", path.display())])?;
    let mut current: Manifest =
        manifest::parse_manifest(&path, &text).map_err(|e| vec![e.to_string()])?;
    let mut fresh = manifest::build_manifest(library, Some(&current));
    let entry = fresh
        .sections
        .iter_mut()
        .find(|e| e.file == record.results.candidate.file)
        .ok_or_else(|| {
            vec![format!(
                "manifest has no entry for `{}`",
                record.results.candidate.file
            )]
        })?;
    entry.activation = Some(ActivationState::Active);
    entry.change_record = Some(digest.to_owned());
    current = fresh;
    let rendered = manifest::render_manifest(&current);
    std::fs::write(&path, &rendered).map_err(|e| vec![format!("{}: {e}", path.display())])?;
    Ok(record.results.candidate.file.clone())
}

/// Every override the manifest marks active must have a stored, passing
/// record bound to its current content. Returns one message per violation.
pub fn verify_activations(library: &Library, manifest: &Manifest) -> Vec<String> {
    let mut problems = Vec::new();
    for entry in &manifest.sections {
        if entry.activation != Some(ActivationState::Active) {
            continue;
        }
        let Some(digest) = &entry.change_record else {
            problems.push(format!(
                "{}: active override without a change record",
                entry.file
            ));
            continue;
        };
        match read_record(&library.root, digest) {
            Err(e) => problems.push(format!("{}: {e}", entry.file)),
            Ok(record) => {
                if record.results.candidate.file != entry.file {
                    problems.push(format!(
                        "{}: change record {digest} is for `{}`",
                        entry.file, record.results.candidate.file
                    ));
                }
                if let Err(reasons) = verify_record(&record, library) {
                    problems.extend(reasons.into_iter().map(|r| format!("{}: {r}", entry.file)));
                }
            }
        }
    }
    problems
}
