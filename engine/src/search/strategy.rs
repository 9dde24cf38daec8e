//! The strategies a branch can take (PSP-10 system 20): each names one way
//! of going about a correction and declares the assumption that must hold
//! for it. A branch's spec carries its strategy ([`super::forest`]), and
//! expansion picks the next one ([`super::expansion`]); both read it here.

use serde::{Deserialize, Serialize};
use trellis_core::vocabulary::OperatorKind;

use crate::digest::{CanonicalHasher, Digest};

/// How a branch goes about a correction. Each strategy declares one
/// assumption that is checked deterministically before it is chosen and
/// after every measurement; a failed assumption is an expansion trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Apply the tools' single-fix suggestions. Assumes there is at least one.
    ApplySuggestions,
    /// Take the next untried alternative the tools offer (another import
    /// path). Assumes an untried alternative remains.
    NextAlternative,
    /// Localize before editing: probe the affected sites or the offered
    /// alternatives with narrowed sensor runs (the build stage alone, a
    /// focused test) and edit only what the probe implicates. Assumes the
    /// evidence names at least one site.
    DiagnosticProbe,
    /// Continue a witnessed partial checkpoint with its correction packet.
    /// Assumes such a partial exists.
    LocalRepair,
    /// A configured model works the cluster in its branch through the
    /// governed tools (system 20's last route). Never chosen by expansion:
    /// the step opens it after the deterministic route.
    ModelActor,
}

impl Strategy {
    /// Every strategy, in the order expansion tries them.
    pub const ALL: [Strategy; 4] = [
        Strategy::ApplySuggestions,
        Strategy::NextAlternative,
        Strategy::DiagnosticProbe,
        Strategy::LocalRepair,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::ApplySuggestions => "apply_suggestions",
            Strategy::NextAlternative => "next_alternative",
            Strategy::DiagnosticProbe => "diagnostic_probe",
            Strategy::LocalRepair => "local_repair",
            Strategy::ModelActor => "model_actor",
        }
    }

    /// The strategy digest, a component of the no-good key.
    pub fn digest(self) -> Digest {
        CanonicalHasher::new("trellis.strategy.v1")
            .str(self.name())
            .finish()
    }

    /// The strategy's declared assumption, checked against the evidence.
    pub fn assumption_holds(self, context: &StrategyContext) -> bool {
        match self {
            Strategy::ApplySuggestions => context.single_fix_suggestions > 0,
            Strategy::NextAlternative => context.untried_alternatives > 0,
            Strategy::DiagnosticProbe => context.localized_sites > 0,
            Strategy::LocalRepair => context.witnessed_partial,
            Strategy::ModelActor => true,
        }
    }

    /// Whether the strategy can carry out `operator`.
    pub fn supports(self, operator: OperatorKind) -> bool {
        match self {
            Strategy::ApplySuggestions => operator == OperatorKind::ApplySuggestions,
            Strategy::NextAlternative => operator == OperatorKind::ChooseAlternative,
            Strategy::DiagnosticProbe => matches!(
                operator,
                OperatorKind::ChooseAlternative
                    | OperatorKind::Edit
                    | OperatorKind::SatisfyCounterexample
            ),
            Strategy::LocalRepair => true,
            Strategy::ModelActor => matches!(
                operator,
                OperatorKind::Edit | OperatorKind::SatisfyCounterexample
            ),
        }
    }
}

/// The evidence the strategy assumptions are checked against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrategyContext {
    /// Suggestion groups offering exactly one fix.
    pub single_fix_suggestions: usize,
    /// Alternatives offered by the tools and not yet tried in this forest.
    pub untried_alternatives: usize,
    /// Sites (paths with spans, failing tests) the evidence points at.
    pub localized_sites: usize,
    /// A witnessed partial checkpoint with a correction packet exists.
    pub witnessed_partial: bool,
}
