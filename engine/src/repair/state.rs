//! What one repair's search carries from step to step: the session, the
//! gate's trajectory, the accepted state x_k and the roots already
//! measured. The loop in [`super::search`] owns it and each
//! [`super::step::Step`] borrows it, so it sits apart from both.

use std::collections::BTreeSet;

use crate::digest::Digest;
use crate::gate::AcceptedTrajectory;
use crate::snapshot::{Overlay, Snapshot};

use super::Ctx;
use super::accepted::Accepted;
use super::session::Session;

/// One repair's search from its measured start state.
pub(super) struct Search<'a> {
    pub(super) ctx: &'a Ctx<'a>,
    pub(super) session: &'a mut Session,
    pub(super) trajectory: AcceptedTrajectory,
    /// x_k.
    pub(super) accepted: Accepted,
    /// Every root measured in this repair: a candidate reaching one again
    /// is a duplicate, never re-measured.
    pub(super) measured_roots: BTreeSet<Digest>,
    pub(super) max_branches: usize,
    /// The model route's failover chain, built at its first use: one per
    /// repair, so an endpoint retired in one step stays retired.
    pub(super) model_chain: Option<crate::actor::FailoverChain>,
    /// The repair's start and the content realizing it over the user's
    /// disk: the tests `backward-compatible` holds every candidate to.
    pub(super) start: (Snapshot, Overlay),
}
