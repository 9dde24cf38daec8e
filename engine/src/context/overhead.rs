//! The fixed overhead of a request: the instructions and the tool schemas
//! every request carries, whatever its pages, and how a route's window is
//! shared with them (issue 33).
//!
//! Under the byte charge (a token a UTF-8 byte, `accountant`) the full
//! instructions and tool schemas cost more than a small local model's
//! whole window, so every request on such a route would be refused as
//! `context_infeasible`. [`fixed_overhead`] decides, from plain figures,
//! how a route carries them:
//!
//! - the full form (the full tool descriptions, the instructions compiled
//!   at the route's full budget) when instructions and schemas together
//!   take at most [`OVERHEAD_SHARE`] of the window and the instructions
//!   fit the input allowance: every large window, unchanged;
//! - otherwise the compact schemas (each tool's discovery summary and bare
//!   argument types) and an instruction budget of the share less what
//!   those schemas and the turn block charge. Within it the prompt compiler
//!   drops optional sections in its one documented order (increasing
//!   priority, ties by id; PSP-10 Definition 4) and never a required one.
//!
//! Why a share and not "whatever leaves the latest page room": the pages
//! are what the model works with, and the overhead repeats in every
//! request; a fixed share keeps the choice a function of the route alone,
//! so every turn of a route makes the same choice and a plan never flips
//! between forms as the conversation grows. Pure: the choice is recorded
//! in the plan's allowance (`tool_form`) and each program's budget and
//! dropped sections, so replay rebuilds the request without choosing again.

use super::accountant::ToolForm;

/// The share of the window the fixed overhead may take before the compact
/// form is chosen: three fifths, so the shipped defaults (about 8,500
/// tokens in full) keep the full form from a 16,384-token window up, and
/// an 8,192-token window, which they would overflow, gets the compact one.
pub const OVERHEAD_SHARE: (u64, u64) = (3, 5);

/// The figures the choice is made from, all under the route's accountant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverheadInput {
    /// β_win.
    pub window: u64,
    /// β_in with the full schemas.
    pub full_input: u64,
    /// β_tool of the full and the compact schemas.
    pub full_tools: u64,
    pub compact_tools: u64,
    /// c(I_t) with the instructions compiled at the route's full budget.
    pub full_instructions: u64,
    /// What of c(I_t) no instruction budget shrinks: the turn block.
    pub turn_block: u64,
}

/// How a route carries its fixed overhead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overhead {
    /// The full schemas and the instructions at the route's full budget.
    Full,
    /// The compact schemas, and the programs compiled within
    /// `instruction_budget` tokens (the platform first, the domain within
    /// what it leaves).
    Compact { instruction_budget: u64 },
}

impl Overhead {
    pub fn tool_form(self) -> ToolForm {
        match self {
            Overhead::Full => ToolForm::Full,
            Overhead::Compact { .. } => ToolForm::Compact,
        }
    }
}

/// The share of `window` the fixed overhead may take.
pub fn overhead_cap(window: u64) -> u64 {
    window * OVERHEAD_SHARE.0 / OVERHEAD_SHARE.1
}

/// The form a route's requests take (see the module doc).
pub fn fixed_overhead(input: OverheadInput) -> Overhead {
    let cap = overhead_cap(input.window);
    let full = input.full_instructions + input.full_tools;
    if full <= cap && input.full_instructions <= input.full_input {
        return Overhead::Full;
    }
    Overhead::Compact {
        instruction_budget: cap.saturating_sub(input.compact_tools + input.turn_block),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Figures of the order a qwen route's shipped defaults charge.
    fn measured(window: u64) -> OverheadInput {
        OverheadInput {
            window,
            full_input: (window - 256 - (window / 16).max(64)).saturating_sub(3765),
            full_tools: 3765,
            compact_tools: 1947,
            full_instructions: 4735,
            turn_block: 170,
        }
    }

    #[test]
    fn a_large_window_keeps_the_full_form_and_a_small_one_gets_the_compact() {
        assert_eq!(fixed_overhead(measured(32_768)), Overhead::Full);
        assert_eq!(fixed_overhead(measured(131_072)), Overhead::Full);
        assert_eq!(fixed_overhead(measured(16_384)), Overhead::Full);
        let small = fixed_overhead(measured(8_192));
        assert_eq!(
            small,
            Overhead::Compact {
                instruction_budget: 8_192 * 3 / 5 - 1947 - 170
            }
        );
        assert_eq!(small.tool_form(), ToolForm::Compact);
        // Little is left for the programs: the compiler keeps the required
        // sections only.
        assert_eq!(
            fixed_overhead(measured(4_096)),
            Overhead::Compact {
                instruction_budget: 4_096 * 3 / 5 - 1947 - 170
            }
        );
        // Below what the compact schemas charge, nothing is left at all.
        assert_eq!(
            fixed_overhead(measured(2_048)),
            Overhead::Compact {
                instruction_budget: 0
            }
        );
    }

    #[test]
    fn instructions_over_the_allowance_get_the_compact_form_whatever_the_share() {
        let input = OverheadInput {
            full_input: 100,
            ..measured(1 << 20)
        };
        assert!(matches!(fixed_overhead(input), Overhead::Compact { .. }));
    }

    proptest! {
        #[test]
        fn the_choice_is_the_share_rule_and_a_larger_window_is_never_more_compact(
            window in 64u64..1 << 20,
            grow in 0u64..1 << 20,
            full_tools in 0u64..10_000,
            compact_tools in 0u64..10_000,
            full_instructions in 0u64..20_000,
            turn_block in 0u64..1_000,
            slack in 0u64..20_000,
        ) {
            let input = OverheadInput {
                window,
                full_input: full_instructions + slack,
                full_tools,
                compact_tools,
                full_instructions,
                turn_block,
            };
            let chosen = fixed_overhead(input);
            prop_assert_eq!(chosen, fixed_overhead(input), "deterministic");
            let cap = overhead_cap(window);
            match chosen {
                Overhead::Full => prop_assert!(full_tools + full_instructions <= cap),
                Overhead::Compact { instruction_budget } => {
                    prop_assert!(full_tools + full_instructions > cap);
                    prop_assert!(
                        instruction_budget + compact_tools + turn_block <= cap
                            || instruction_budget == 0
                    );
                }
            }
            // A larger window (whose allowance is no smaller) never takes
            // the full form away.
            let larger = OverheadInput {
                window: window + grow,
                full_input: input.full_input + grow,
                ..input
            };
            if chosen == Overhead::Full {
                prop_assert_eq!(fixed_overhead(larger), Overhead::Full);
            }
        }
    }
}
