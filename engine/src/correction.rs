//! Correction packets (PSP-10 system 26): everything a proposer needs to
//! repair one cluster, in one coherent value.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use trellis_core::vocabulary::OperatorKind;

use crate::cluster::{Assessment, Cluster, ResidualClass};
use crate::diagnostic::{Applicability, Diagnostic, Span, TestFailure};
use crate::workspace_path::WorkspacePath;

/// The paths, spans and tests a correction is expected to touch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffectedSet {
    pub paths: BTreeSet<WorkspacePath>,
    pub spans: Vec<Span>,
    pub tests: Vec<String>,
}

/// What kind of change could resolve the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "operator", rename_all = "snake_case")]
pub enum CorrectionOperator {
    /// Apply tool suggestions that offer a single fix.
    ApplySuggestions { count: usize },
    /// Choose one of several alternatives the tool offers (e.g. imports).
    ChooseAlternative { alternatives: usize },
    /// The tool offers no fix: the code must be edited by hand (or by a model).
    Edit,
    /// Make a failing test pass without weakening it.
    SatisfyCounterexample,
    /// Make the stage runnable (environment, timeout).
    RestoreSensor,
}

impl CorrectionOperator {
    /// The operator without its counts; `None` for `RestoreSensor`, which
    /// no branch can carry out (see [`OperatorKind`]).
    pub fn kind(&self) -> Option<OperatorKind> {
        match self {
            CorrectionOperator::ApplySuggestions { .. } => Some(OperatorKind::ApplySuggestions),
            CorrectionOperator::ChooseAlternative { .. } => Some(OperatorKind::ChooseAlternative),
            CorrectionOperator::Edit => Some(OperatorKind::Edit),
            CorrectionOperator::SatisfyCounterexample => Some(OperatorKind::SatisfyCounterexample),
            CorrectionOperator::RestoreSensor => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CorrectionPacket {
    pub cluster_id: String,
    pub cluster_title: String,
    pub class: ResidualClass,
    /// Correction evidence (compiler diagnostics) of the cluster.
    pub diagnostics: Vec<Diagnostic>,
    /// Concrete counterexamples (failing tests) of the cluster.
    pub counterexamples: Vec<TestFailure>,
    pub affected: AffectedSet,
    pub operators: Vec<CorrectionOperator>,
    /// Stages to run after a correction, in order.
    pub follow_up_stages: Vec<String>,
    /// Stages that did not run, so their verdict is unknown.
    pub uncertainty: Vec<String>,
}

impl CorrectionPacket {
    /// Builds the packet for `cluster` of `assessment`. `stages` are the
    /// configured stages in run order; `unavailable` those that did not run.
    pub fn for_cluster(
        assessment: &Assessment,
        cluster: &Cluster,
        stages: &[String],
        unavailable: &[String],
    ) -> Self {
        let diagnostics: Vec<Diagnostic> = cluster
            .diagnostics
            .iter()
            .map(|&i| assessment.diagnostics[i].clone())
            .collect();
        let counterexamples: Vec<TestFailure> = cluster
            .failures
            .iter()
            .map(|&i| assessment.failures[i].clone())
            .collect();
        let mut affected = AffectedSet::default();
        for site in &cluster.sites {
            if let Some(path) = &site.path {
                affected.paths.insert(path.clone());
            }
            if let Some(span) = &site.span {
                affected.spans.push(span.clone());
            }
        }
        affected.tests = counterexamples
            .iter()
            .map(|f| format!("{}::{}", f.binary, f.name))
            .collect();

        // A diagnostic's suggestions are one choice, however many helps
        // offer them (`propose`): one fix is a suggestion to apply, several
        // are alternatives.
        let (mut single, mut widest) = (0, 0);
        for d in &diagnostics {
            let offered = d
                .suggestions
                .iter()
                .flat_map(|g| &g.alternatives)
                .filter(|s| s.applicability != Applicability::HasPlaceholders)
                .count();
            match offered {
                0 => {}
                1 => single += 1,
                n => widest = widest.max(n),
            }
        }
        let mut operators = Vec::new();
        if single > 0 {
            operators.push(CorrectionOperator::ApplySuggestions { count: single });
        }
        if widest > 0 {
            operators.push(CorrectionOperator::ChooseAlternative {
                alternatives: widest,
            });
        }
        match cluster.class {
            ResidualClass::TestFailure => operators.push(CorrectionOperator::SatisfyCounterexample),
            ResidualClass::SensorUnavailable => operators.push(CorrectionOperator::RestoreSensor),
            _ if operators.is_empty() => operators.push(CorrectionOperator::Edit),
            _ => {}
        }
        let first = stages.iter().position(|s| *s == cluster.stage).unwrap_or(0);
        CorrectionPacket {
            cluster_id: cluster.id.clone(),
            cluster_title: cluster.title.clone(),
            class: cluster.class,
            diagnostics,
            counterexamples,
            affected,
            operators,
            follow_up_stages: stages[first..].to_vec(),
            uncertainty: unavailable.to_vec(),
        }
    }
}
