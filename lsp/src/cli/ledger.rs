//! `trellis ledger verify` and `trellis ledger replay`.

use std::path::PathBuf;

use trellis_engine::ledger::{Head, LedgerEvent};
use trellis_engine::{History, HistoryError, Replay};

use super::terminal::{eprintln_escaped, println_escaped};
use super::{EXIT_OK, EXIT_RESIDUALS, Format, fail, render, workspace};

#[derive(clap::Subcommand)]
pub enum LedgerCommand {
    /// Check the hash chain; names the first changed, removed, reordered or lost event.
    ///
    /// Besides the chain's own links, the ledger must reach the head that
    /// the workspace last recorded (`.trellis/head`) and, with
    /// `--expect-head`, a head you kept from an earlier run (every
    /// `trellis repair` prints one): a ledger that ends before it lost
    /// events, and one that hashes differently there was rewritten.
    Verify {
        /// A directory of the project (default: the current directory); its root is found above it, as cargo finds it.
        path: Option<PathBuf>,
        /// A head printed earlier, `SEQ:HASH`: the ledger must still reach
        /// event SEQ with exactly that hash.
        #[arg(long, value_name = "SEQ:HASH", value_parser = parse_head)]
        expect_head: Option<Head>,
    },
    /// Fold the accepted trajectory from the ledger without running anything.
    Replay {
        /// A directory of the project (default: the current directory); its root is found above it, as cargo finds it.
        path: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
}

fn parse_head(text: &str) -> Result<Head, String> {
    text.parse()
}

pub fn run(command: LedgerCommand) -> u8 {
    let result = match command {
        LedgerCommand::Verify { path, expect_head } => {
            workspace(path).map(|root| verify(&root, expect_head))
        }
        LedgerCommand::Replay { path, format } => workspace(path).map(|root| replay(&root, format)),
    };
    result.unwrap_or_else(|code| code)
}

/// The workspace's history; a workspace without a ledger is an error here.
fn open(root: &std::path::Path) -> Result<History, u8> {
    match History::open(root) {
        Ok(Some(history)) => Ok(history),
        Ok(None) => Err(fail(format!(
            "{}: no ledger here (run `trellis check` or `trellis repair` first)",
            root.join(".trellis").display()
        ))),
        Err(e) => Err(fail(e)),
    }
}

fn verify(root: &std::path::Path, expect_head: Option<Head>) -> u8 {
    let history = match open(root) {
        Ok(history) => history,
        Err(code) => return code,
    };
    match history.verify(expect_head) {
        Ok(report) => match report.last() {
            Some(head) => {
                println_escaped!("ledger intact: {} events, head {head}", report.events);
                EXIT_OK
            }
            None => {
                println_escaped!("ledger intact: no events yet");
                EXIT_OK
            }
        },
        Err(e) => {
            eprintln_escaped!(
                "error: {}: the hash chain is broken: {e}",
                history.path().display()
            );
            EXIT_RESIDUALS
        }
    }
}

fn replay(root: &std::path::Path, format: Format) -> u8 {
    let history = match open(root) {
        Ok(history) => history,
        Err(code) => return code,
    };
    let Replay {
        decisions,
        promotions,
        refusals,
        recoveries,
        selections,
        selections_unkeyed: unkeyed,
        model_calls: calls,
    } = match history.replay() {
        Ok(replay) => replay,
        Err(e @ HistoryError::BrokenChain { .. }) => {
            eprintln_escaped!("error: {e}");
            return EXIT_RESIDUALS;
        }
        Err(e) => return fail(e),
    };
    match format {
        Format::Json => {
            let model_calls: Vec<_> = calls
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "seq": c.seq,
                        "forest_id": c.forest_id,
                        "branch_id": c.branch_id,
                        "turn": c.turn,
                        "endpoint": c.endpoint,
                        "program_digest": c.program_digest,
                        "request": c.request(),
                        "reproduced": true,
                    })
                })
                .collect();
            let doc = serde_json::json!({
                "selections": selections,
                "selections_unkeyed": unkeyed,
                "model_calls": model_calls,
                "decisions": decisions,
                "promotions": promotions,
                "refusals": refusals,
                "recoveries": recoveries,
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&doc).expect("serializable")
            );
        }
        Format::Human => {
            println_escaped!("{} decision(s):", decisions.len());
            for d in &decisions {
                println_escaped!(
                    "  {:<22} {:<24} energy {:.2} (best before {:.2})  root {}",
                    d.candidate_id,
                    d.verdict.as_str(),
                    d.observed_energy,
                    d.best_before,
                    d.root.short(12)
                );
            }
            for p in &promotions {
                println_escaped!(
                    "promoted {} via {:?}: {}",
                    p.repair_id,
                    p.via,
                    render::names(&p.files)
                );
            }
            for r in &refusals {
                match &r.rolled_back {
                    Some(undone) => println_escaped!(
                        "refused {}: {}; put back: {}; kept as edited: {}",
                        r.repair_id,
                        r.detail,
                        render::names(&undone.put_back),
                        render::names(&undone.kept)
                    ),
                    None => println_escaped!("refused {}: {}", r.repair_id, r.detail),
                }
            }
            for r in &recoveries {
                println_escaped!("{}", LedgerEvent::PromotionRecovered(r.clone()));
            }
            println_escaped!(
                "{} selection(s) re-derived from the recorded keys{}",
                selections.len(),
                if unkeyed > 0 {
                    format!(" ({unkeyed} recorded before their keys were, not re-derived)")
                } else {
                    String::new()
                }
            );
            for c in &calls {
                println_escaped!(
                    "model call #{} {}/{} turn {} at {}: request reproduced ({} bytes, programs {})",
                    c.seq,
                    c.forest_id,
                    c.branch_id,
                    c.turn,
                    c.endpoint,
                    c.request_body.len(),
                    c.program_digest
                );
            }
        }
    }
    EXIT_OK
}
