//! Calibration of a route's accountant by what its endpoint reports: every
//! chat completion's `usage.prompt_tokens` counts the request as the
//! model's own tokenizer and chat template did. The accountant is a bound
//! on the texts, so a request that counted more than its plan allowed for
//! (its messages and β_tool, times the calibration in force) met what the
//! accountant cannot see: a chat template heavier than
//! `MESSAGE_OVERHEAD`, a normalizer that expands text. It is ledgered as
//! `context_underestimated`, and the route's later plans divide the window
//! by the ratio reported ÷ charged (`Allowance::calibration`), so the same
//! content is planned that much larger.
//!
//! The calibration is a fold over the run's answered requests, per
//! endpoint, from values the ledger holds (each request's plan and each
//! turn's usage), so replay derives every plan's calibration again and
//! checks it. It only ever grows within a run, and never past
//! [`MAX_CALIBRATION`]: a server that reports nonsense can shrink the
//! allowance, never make it unbounded or negative. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::accountant::UNCALIBRATED;
use super::plan::ResidentPlan;

/// The largest calibration, four reported tokens per token charged.
pub const MAX_CALIBRATION: u32 = 4000;

/// A request the endpoint counted larger than its plan charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Underestimate {
    /// What the plan charged: its messages and β_tool.
    pub planned: u64,
    /// What the endpoint counted (`usage.prompt_tokens`).
    pub reported: u64,
    /// The route's calibration from the next request on, in thousandths.
    pub calibration: u32,
}

/// What a request's reported size says of the plan it was sent under:
/// `None` while the plan held, that is while `reported` is at most its
/// charge times the calibration in force (or its accountant is one that
/// does not calibrate); otherwise the underestimate, with the calibration
/// of later plans: the ratio reported ÷ charged, rounded up, at most
/// [`MAX_CALIBRATION`].
pub fn observe(plan: &ResidentPlan, reported: u64) -> Option<Underestimate> {
    let calibrates = plan.allowance.accountant().is_ok_and(|a| a.calibrates());
    let planned = plan.request_tokens + plan.allowance.tools;
    let allowed_for = planned * u64::from(plan.allowance.calibration.max(UNCALIBRATED));
    // Saturating: the report is the server's word, whatever its size.
    let reported_thousandths = reported.saturating_mul(u64::from(UNCALIBRATED));
    if !calibrates || reported_thousandths <= allowed_for {
        return None;
    }
    let ratio = reported_thousandths.div_ceil(planned.max(1));
    let ratio = u32::try_from(ratio).unwrap_or(u32::MAX);
    Some(Underestimate {
        planned,
        reported,
        calibration: ratio.min(MAX_CALIBRATION),
    })
}

/// The calibrations of one run's routes, by endpoint name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calibrations(BTreeMap<String, u32>);

impl Calibrations {
    /// The calibration the next plan for `endpoint` is made at.
    pub fn of(&self, endpoint: &str) -> u32 {
        self.0.get(endpoint).copied().unwrap_or(UNCALIBRATED)
    }

    /// Folds in one answered request: `plan` was sent to `endpoint`, which
    /// counted `reported` prompt tokens.
    pub fn observe(
        &mut self,
        endpoint: &str,
        plan: &ResidentPlan,
        reported: u64,
    ) -> Option<Underestimate> {
        let under = observe(plan, reported)?;
        self.0.insert(endpoint.to_owned(), under.calibration);
        Some(under)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::context::{Accountant, Allowance, ToolForm};

    fn plan(request_tokens: u64, calibration: u32) -> ResidentPlan {
        let allowance = Allowance::for_route(4096, 512, (ToolForm::Full, &[]), calibration);
        ResidentPlan {
            allowance,
            instruction_tokens: request_tokens,
            mandatory_tokens: 0,
            optional_tokens: 0,
            tombstone_tokens: 0,
            request_tokens,
            pages: Vec::new(),
        }
    }

    #[test]
    fn a_request_counted_larger_than_planned_calibrates_the_route() {
        let sent = plan(872, UNCALIBRATED);
        let planned = 872 + sent.allowance.tools;
        assert_eq!(observe(&sent, planned), None, "exactly as planned");
        let under = observe(&sent, planned * 3 / 2).unwrap();
        assert_eq!(under.planned, planned);
        assert_eq!(under.calibration, 1500);
        let mut routes = Calibrations::default();
        assert_eq!(routes.of("local"), UNCALIBRATED);
        routes.observe("local", &sent, planned * 3 / 2);
        assert_eq!(routes.of("local"), 1500);
        assert_eq!(routes.of("other"), UNCALIBRATED, "per endpoint");
        // Under that calibration the same overrun is allowed for; a larger
        // one is another underestimate and calibrates further.
        let calibrated = plan(872, 1500);
        let planned = 872 + calibrated.allowance.tools;
        assert_eq!(observe(&calibrated, planned * 3 / 2), None);
        assert_eq!(observe(&calibrated, planned * 2).unwrap().calibration, 2000);
    }

    #[test]
    fn an_old_accountant_is_never_calibrated() {
        let mut old = plan(100, UNCALIBRATED);
        let (id, version) = Accountant::AsciiThirds.identity();
        old.allowance.accountant = id.to_owned();
        old.allowance.accountant_version = version;
        assert_eq!(observe(&old, 1_000_000), None);
    }

    proptest! {
        /// Monotone and bounded whatever the endpoint reports.
        #[test]
        fn the_calibration_only_grows_and_stays_capped(
            reports in proptest::collection::vec((1u64..5000, prop_oneof![0u64..100_000, Just(u64::MAX)]), 1..12),
        ) {
            let mut routes = Calibrations::default();
            let mut last = UNCALIBRATED;
            for (request, reported) in reports {
                let sent = plan(request, routes.of("e"));
                let before = routes.of("e");
                if let Some(under) = routes.observe("e", &sent, reported) {
                    prop_assert!(under.reported > under.planned);
                    // Recorded only when the calibrated plan was exceeded:
                    // the next plan shrinks unless at the cap.
                    prop_assert!(under.calibration > before || before == MAX_CALIBRATION);
                }
                let now = routes.of("e");
                prop_assert!(now >= last && now <= MAX_CALIBRATION);
                last = now;
            }
        }
    }
}
