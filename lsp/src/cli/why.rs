//! Why a candidate fix was not used, why a repair left a problem, and what
//! would help, in the user's words.
//!
//! Renders the engine's typed reasons ([`NotUsed`], [`UnfixedReason`],
//! [`Help`]) and nothing else: it never reads the engine's precise reason
//! strings (those are for `--verbose` and the ledger) and never decides
//! what would help; the engine does.

use std::fmt::Write as _;

use trellis_engine::{Help, NotUsed, Unfixed, UnfixedReason};

/// `1 problem`, `3 problems`.
pub(super) fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Why a candidate fix was not used, in the user's terms; the engine's
/// precise reason (energies, ρ, no-goods, budgets) is kept for `--verbose`.
pub(super) fn plain_reason(cause: &NotUsed) -> String {
    match cause {
        NotUsed::NoDescent => "it does not leave fewer or less severe problems".into(),
        NotUsed::MeasuredOnMore { units } => format!(
            "it lets `{}` be checked, which could not be before, and nothing it revealed there \
             can be fixed",
            units.join("`, `")
        ),
        NotUsed::MeasuredOnLess { units } => format!(
            "it keeps `{}` from being checked, so its problems cannot be compared with before",
            units.join("`, `")
        ),
        NotUsed::StageUnavailable { stages } => {
            format!("a required check could not run: {}", stages.join(", "))
        }
        NotUsed::BudgetExhausted { .. } => "the search reached its limits first".into(),
        NotUsed::TriedBefore => "it was tried on the same files before and failed".into(),
        NotUsed::NoBetterAlternative => "tried alone, no alternative builds better".into(),
        NotUsed::NothingNew => "it changes nothing not already checked".into(),
        NotUsed::OriginalTestsFail => {
            "the tests as they were fail with it (changing a test does not fix the code)".into()
        }
        NotUsed::TestsWeakened { tests } => format!(
            "it removes or switches off tests the repair must satisfy, not the code's bug: {}",
            tests.join(", ")
        ),
        NotUsed::ModelUnavailable => "the model could not be used".into(),
        NotUsed::NotMade => "its edits could not be made in the private copy".into(),
        NotUsed::Barrier => "a safety check on it does not hold".into(),
        NotUsed::Stopped => "the search stopped before it was checked".into(),
    }
}

/// Why a problem was left, in the user's terms.
fn unfixed_reason(reason: &UnfixedReason) -> String {
    match reason {
        UnfixedReason::NoSuggestion => "the compiler offers no fix to try".into(),
        UnfixedReason::NoneUsable { tried, reasons } => {
            let tried = counted(*tried, "candidate fix", "candidate fixes");
            if reasons.is_empty() {
                format!("{tried} tried, none usable")
            } else {
                let why: Vec<String> = reasons.iter().map(plain_reason).collect();
                format!("{tried} tried, none usable: {}", why.join("; "))
            }
        }
        UnfixedReason::StageUnavailable { stages } => format!(
            "the required check `{}` could not run, so no fix can be verified",
            stages.join("`, `")
        ),
        UnfixedReason::NotReached => "the search stopped before it got to it".into(),
    }
}

/// What would let a later repair do better, in the user's terms.
fn help_text(help: &Help) -> String {
    match help {
        Help::ConfigureModel => {
            "a model could try: add a `[[models]]` table to trellis.toml (see the README)".into()
        }
        Help::MakeStageRunnable { stages } => format!(
            "make the `{}` check runnable (the checks line says why it could not run)",
            stages.join("`, `")
        ),
        Help::RaiseLimit { limit: Some(limit) } if limit == "max_steps" => {
            "a higher limit: raise `max_steps` under `[exploration]` in trellis.toml".into()
        }
        Help::RaiseLimit { limit: Some(limit) } => {
            format!("a higher limit: raise `{limit}` under `[exploration.limits]` in trellis.toml")
        }
        Help::RaiseLimit { limit: None } => {
            "higher limits under `[exploration.limits]` in trellis.toml".into()
        }
    }
}

/// Why each problem left by a repair was left and what would help: one
/// `why:` when every problem has the same answer, else one per problem.
pub fn unfixed(unfixed: &[Unfixed]) -> String {
    let mut out = String::new();
    let Some(first) = unfixed.first() else {
        return out;
    };
    let same = unfixed
        .iter()
        .all(|u| u.reason == first.reason && u.help == first.help);
    if same {
        let _ = writeln!(out, "why: {}", unfixed_reason(&first.reason));
        if let Some(help) = &first.help {
            let _ = writeln!(out, "would help: {}", help_text(help));
        }
        return out;
    }
    let _ = writeln!(out, "why, per problem:");
    for u in unfixed {
        let _ = writeln!(
            out,
            "  {} [{}]: {}",
            super::terminal::line(&u.cluster_title),
            u.cluster_id,
            unfixed_reason(&u.reason)
        );
        if let Some(help) = &u.help {
            let _ = writeln!(out, "    would help: {}", help_text(help));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left(id: &str, reason: UnfixedReason, help: Option<Help>) -> Unfixed {
        Unfixed {
            cluster_id: id.to_owned(),
            cluster_title: format!("problem {id}"),
            reason,
            help,
        }
    }

    #[test]
    fn one_answer_is_said_once_and_different_answers_per_problem() {
        let model = Some(Help::ConfigureModel);
        let same = [
            left("c1", UnfixedReason::NoSuggestion, model.clone()),
            left("c2", UnfixedReason::NoSuggestion, model.clone()),
        ];
        let text = unfixed(&same);
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.starts_with("why: the compiler offers no fix to try\n"),
            "{text}"
        );
        assert!(text.contains("would help: a model could try"), "{text}");

        let different = [
            left("c1", UnfixedReason::NoSuggestion, model),
            left(
                "c2",
                UnfixedReason::NoneUsable {
                    tried: 2,
                    reasons: vec![NotUsed::BudgetExhausted {
                        limit: Some("verifier_runs".into()),
                    }],
                },
                Some(Help::RaiseLimit {
                    limit: Some("verifier_runs".into()),
                }),
            ),
        ];
        let text = unfixed(&different);
        assert!(text.starts_with("why, per problem:\n"), "{text}");
        assert!(
            text.contains("  problem c1 [c1]: the compiler offers no fix"),
            "{text}"
        );
        assert!(
            text.contains(
                "  problem c2 [c2]: 2 candidate fixes tried, none usable: the search reached its limits first"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "    would help: a higher limit: raise `verifier_runs` under `[exploration.limits]`"
            ),
            "{text}"
        );
        assert!(unfixed(&[]).is_empty());
    }
}
