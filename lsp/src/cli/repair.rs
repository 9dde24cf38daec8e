//! `trellis repair`: search for a verified repair and optionally commit it.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;
use trellis_engine::{EngineError, PromptPolicy, RepairOptions, RepairStatus, View};

use super::Format;
use super::render::{Detail, Then};
use super::terminal::{self, println_escaped};
use super::{
    EXIT_ERROR, EXIT_OK, EXIT_OUTSIDE_CHANGED, Spinner, cancel_on_interrupt, fail, open,
    print_json, render, verdict_code,
};

pub async fn run(
    path: Option<PathBuf>,
    commit: bool,
    options: RepairOptions,
    format: Format,
    detail: Detail,
    prompts: PromptPolicy,
) -> u8 {
    let engine = match open(path, prompts) {
        Ok(engine) => engine,
        Err(code) => return code,
    };
    let cancel = CancellationToken::new();
    cancel_on_interrupt(&cancel);
    let spinner = Spinner::new(format == Format::Human);
    let outcome = engine
        .repair(&View::default(), &options, &spinner, cancel)
        .await;
    spinner.finish();
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e @ EngineError::OutsideChanged { .. }) => {
            fail(e);
            return EXIT_OUTSIDE_CHANGED;
        }
        Err(e) => return fail(e),
    };
    let diff = render::unified_diff(engine.root(), &outcome.changes);
    let promotion = if commit && outcome.is_verified() {
        Some(engine.promote_to_disk(&outcome))
    } else {
        None
    };
    // Printed after every repair, so a user can keep it and later check the
    // ledger against it (`trellis ledger verify --expect-head`).
    let head = match engine.ledger_head() {
        Ok(head) => head.map(|h| h.to_string()),
        Err(e) => return fail(e),
    };

    match format {
        Format::Json => {
            let doc = serde_json::json!({
                "workspace": engine.root(),
                "repair_id": outcome.repair_id,
                "status": outcome.status,
                "start_root": outcome.start_root,
                "final_root": outcome.final_root,
                "initial": outcome.initial,
                "steps": outcome.steps,
                "changes": outcome.changes,
                "summary": outcome.summary,
                "model_would_help": outcome.model_would_help,
                "unfixed": outcome.unfixed,
                "promotion": match &promotion {
                    Some(Ok(p)) => serde_json::to_value(p).expect("serializable"),
                    Some(Err(e @ EngineError::PromotionRolledBack { rolled_back, .. })) => {
                        serde_json::json!({ "error": e.to_string(), "rolled_back": rolled_back })
                    }
                    Some(Err(e)) => serde_json::json!({ "error": e.to_string() }),
                    None => serde_json::Value::Null,
                },
                "ledger_head": head,
            });
            print_json(doc);
        }
        Format::Human => {
            terminal::print(&render::check_report(
                &outcome.initial,
                detail,
                Then::Repair,
            ));
            terminal::print(&render::repair_steps(&outcome, detail));
            if !diff.is_empty() {
                println_escaped!(
                    "{}",
                    match (outcome.status, detail) {
                        (RepairStatus::HardPass, _) => "verified diff:",
                        (_, Detail::Plain) =>
                            "fixes kept so far (not written: a check still fails):",
                        (_, Detail::Verbose) => "accepted so far (not promotable):",
                    }
                );
                terminal::print(&diff);
            }
            let verbose = detail == Detail::Verbose;
            let verdict = match outcome.status {
                RepairStatus::AlreadyClean => {
                    "nothing to repair: every required check passes".to_owned()
                }
                // Named as the editor's Preview names it.
                RepairStatus::HardPass => format!(
                    "verified repair: {} (by {})",
                    terminal::line(&outcome.summary),
                    outcome.routes()
                ),
                RepairStatus::ResidualsRemain if verbose => format!(
                    "residuals remain: {}; nothing written",
                    terminal::line(&outcome.summary)
                ),
                RepairStatus::ResidualsRemain => {
                    "problems remain after the fixes kept so far; nothing written".to_owned()
                }
                RepairStatus::NoEligibleCandidate if verbose => {
                    "no eligible candidate; nothing written".to_owned()
                }
                RepairStatus::NoEligibleCandidate => {
                    "no candidate fix could be used; nothing written".to_owned()
                }
                RepairStatus::BoundReached if verbose => {
                    "the decision bound was reached; nothing written".to_owned()
                }
                RepairStatus::BoundReached => {
                    "the search reached its limit of decisions; nothing written".to_owned()
                }
                RepairStatus::Cancelled => "cancelled; nothing written".to_owned(),
            };
            println_escaped!("{verdict}");
            terminal::print(&super::why::unfixed(&outcome.unfixed));
            match &promotion {
                Some(Ok(p)) => println_escaped!("written: {}", render::names(&p.files)),
                Some(Err(_)) => {}
                None if outcome.is_verified() => {
                    println!("not written: run with --commit to apply it")
                }
                None => {}
            }
            if let Some(head) = &head {
                println!("ledger head: {head}");
            }
        }
    }
    // Last, so what it says follows the report rather than interrupting it.
    super::gc::after_repair(&engine);
    match (outcome.status, promotion) {
        (_, Some(Err(e))) => {
            let _ = fail(&e);
            EXIT_ERROR
        }
        (RepairStatus::AlreadyClean | RepairStatus::HardPass, _) => EXIT_OK,
        (RepairStatus::Cancelled, _) => EXIT_ERROR,
        _ => verdict_code(&outcome.initial),
    }
}
