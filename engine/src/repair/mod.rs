//! The repair runtime: bounded search steps over the accepted trajectory.
//!
//! One step is one [`SearchForest`](crate::search::SearchForest) over
//! (node, generation, accepted root): build the correction packet of the
//! target cluster, ask the proposer for candidates, and open one branch at
//! a time. Every eager copy and every sensor run reserves against the
//! forest's budget before it runs and settles with actuals, and the usage
//! is ledgered after each (erratum 14), so a crash resumes with at least
//! what was reserved. An exact no-good refuses a repeated attempt for free.
//! Branch previews never decide; the forest selects one candidate
//! (Proposition 5) and commits it once through the gate's
//! [`AcceptedTrajectory`](crate::gate::AcceptedTrajectory). Steps repeat
//! from the new accepted state until hard pass, the decision bound, or no
//! eligible candidate. Nothing here writes the user's files: promotion is
//! separate and requires a hard pass.
//!
//! The rooms, in the order a repair passes through them:
//!
//! - [`session`]: what a repair inherits from the ledger (no-goods, the
//!   continuation of an interrupted generation, refusals of an ambiguous
//!   record);
//! - [`search`](mod@search): the loop over steps, and the continuation of a generation;
//! - [`plan`]: pure: plans, quanta and the identities of attempts;
//! - [`step`]: one forest: quanta, expansion, selection, the one commit;
//! - [`model`]: the model route's chain and the turn state its programs
//!   present, from the step's correction packet and the ledger's previous
//!   hypothesis;
//! - [`kept_tests`]: under every policy, the start's tests a candidate
//!   removed or switched off (read here, compared by the sensors' rooms);
//! - [`quantum`]: one quantum of a branch: realize, probe, measure, judge;
//! - [`effects`]: the only code that copies, measures or moves the budget;
//! - [`accepted`]: the accepted-state store and its rebuild;
//! - [`status`]: the ledger's search rows folded for display;
//! - [`unfixed`]: pure: why each problem a repair left was left, and what
//!   would help.

mod accepted;
mod effects;
mod kept_tests;
mod model;
mod plan;
mod quantum;
mod search;
mod session;
mod state;
mod status;
mod step;
#[cfg(test)]
mod test_support;
mod unfixed;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::ledger::Ledger;
use crate::runtime::Progress;
use crate::sensor::Sensor;
use crate::sensor::sandbox::Policy;
use crate::slots::Slots;

pub(crate) use accepted::Accepted;
pub(crate) use search::search;
pub(crate) use session::Session;
pub use status::{BranchState, BranchStatus, ForestStatus, SearchStatus};

/// What the runtime needs from the engine for one repair.
pub(crate) struct Ctx<'a> {
    pub root: &'a Path,
    pub config: &'a Config,
    pub sensors: &'a [Box<dyn Sensor>],
    pub ledger: &'a Ledger,
    pub slots: &'a Slots,
    /// The session's prompt policy and pinned bundles, for model calls.
    pub prompts: &'a crate::prompt_policy::SessionPrompts,
    pub progress: &'a dyn Progress,
    pub cancel: &'a CancellationToken,
    /// The store bundles attached at the repair's start (frozen values).
    pub bundles: &'a [trellis_prompts::bundles::PinnedReplacement],
    /// Set once code a model wrote may be in this repair's slots: from the
    /// model actor's first turn, or from the start when it resumes states
    /// a model may have written. Never cleared: what a model wrote stays
    /// in the accepted states the later branches start from.
    pub model_code: AtomicBool,
}

impl Ctx<'_> {
    /// The sandbox policy of a branch's run now (`[sandbox]` once a model
    /// may have written into the slots, with the verification oracle
    /// hidden where the user keeps it: model-written code cannot read it
    /// and show it to the model).
    pub(crate) fn sandbox_policy(&self) -> Policy {
        if self.model_code.load(Ordering::SeqCst) {
            let oracle = self.config.verification.oracle(self.root);
            Policy {
                hidden: oracle
                    .map(|o| self.root.join(o.path()))
                    .into_iter()
                    .collect(),
                ..self.config.sandbox.for_model_code()
            }
        } else {
            self.config.sandbox.for_user_code()
        }
    }
}
