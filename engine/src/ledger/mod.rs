//! The workspace ledger: every session, measurement, gate decision,
//! promotion, refusal and search event, hash-chained in SQLite.
//!
//! * [`event`] — the two alphabets (mechanism events and runtime search
//!   events in their versioned envelope) and how stored rows decode.
//! * [`store`] — `.trellis/ledger.db`: append-only, chained, fsync'd at
//!   decisions.
//! * [`verify`] — names the first changed, removed or reordered event.
//! * [`witness`] — `.trellis/head`, the last head kept outside the
//!   database, so a lost or rewritten tail is caught.
//! * [`fold`] — the accepted projection replay rebuilds (invariant under
//!   removal of search events) and the search state a resume inherits.

pub mod event;
pub mod fold;
mod selections;
pub mod store;
pub mod verify;
pub mod witness;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
pub(crate) mod test_support;

pub use event::{
    AcceptedStateStored, BundleComponent, BundlesAttached, CandidateMeasured, ClusterSummary,
    DecodedRow, GateDecisionRecorded, GateVerdict, LedgerEvent, Promoted, PromotionRoute,
    RefusalReason, Refused, RolledBack, SearchCounters, SearchEncoding, SearchEnvelopeV1,
    SearchEvent, SelectionKeys, SessionStarted, SnapshotTaken, StageOutcome, StoredFile,
};
pub use fold::{
    AcceptedFold, CandidateKey, FoldError, FoldedCandidate, FoldedNoGood, InterruptedForest,
    NoGoodRecord, ResumeFold, fold_accepted, fold_resume,
};
pub use selections::{Rederived, SelectionDiverges, rederive_selections};
pub use store::{EventRef, Ledger, LedgerError, Row};
pub use verify::{ChainError, VerifyReport};
pub use witness::{Head, HeadSource};
