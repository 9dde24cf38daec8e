//! `trellis ledger verify` and `trellis ledger replay`.

use trellis_engine::actor::model_calls_with;
use trellis_engine::bundles::attached_texts;
use trellis_engine::ledger::{
    DecodedRow, Head, Ledger, LedgerEvent, fold_accepted, rederive_selections,
};

use super::terminal::{eprintln_escaped, println_escaped};
use super::{EXIT_OK, EXIT_RESIDUALS, fail, render, workspace};
use crate::{Format, LedgerCommand};

pub fn run(command: LedgerCommand) -> u8 {
    let result = match command {
        LedgerCommand::Verify { path, expect_head } => {
            workspace(path).map(|root| verify(&root, expect_head))
        }
        LedgerCommand::Replay { path, format } => workspace(path).map(|root| replay(&root, format)),
    };
    result.unwrap_or_else(|code| code)
}

fn open(root: &std::path::Path) -> Result<Ledger, u8> {
    let dir = root.join(".trellis");
    if !dir.join("ledger.db").exists() {
        return Err(fail(format!(
            "{}: no ledger here (run `trellis check` or `trellis repair` first)",
            dir.display()
        )));
    }
    Ledger::open(&dir).map_err(fail)
}

fn verify(root: &std::path::Path, expect_head: Option<Head>) -> u8 {
    let ledger = match open(root) {
        Ok(ledger) => ledger,
        Err(code) => return code,
    };
    match ledger.verify_expecting(expect_head) {
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
                ledger.path().display()
            );
            EXIT_RESIDUALS
        }
    }
}

fn replay(root: &std::path::Path, format: Format) -> u8 {
    let ledger = match open(root) {
        Ok(ledger) => ledger,
        Err(code) => return code,
    };
    if let Err(e) = ledger.verify() {
        eprintln_escaped!(
            "error: {}: refusing to replay a broken chain: {e}",
            ledger.path().display()
        );
        return EXIT_RESIDUALS;
    }
    let fold = match ledger
        .rows()
        .map_err(|e| e.to_string())
        .and_then(|rows| fold_accepted(&rows).map_err(|e| e.to_string()))
    {
        Ok(fold) => fold,
        Err(e) => return fail(e),
    };
    let decisions: Vec<_> = fold.decisions().collect();
    // Gate Z: every model call's exact request, rebuilt without a model; a
    // call that cannot be rebuilt fails the replay.
    // A repair that attached bundles is rebuilt with the very texts it
    // recorded, read back from the bundle store by version and checksum.
    let texts = attached_texts(&root.join(".trellis"));
    let calls = match ledger
        .rows()
        .map_err(|e| e.to_string())
        .and_then(|rows| model_calls_with(&rows, ledger.state_dir().path(), &texts))
    {
        Ok(calls) => calls,
        Err(e) => return fail(format!("{}: {e}", ledger.path().display())),
    };
    // Proposition 5: every recorded selection, re-derived from the measured
    // keys alone; one the events do not reproduce fails the replay.
    let (selections, unkeyed) = match ledger.rows().map_err(|e| e.to_string()).and_then(|rows| {
        let events = rows.iter().filter_map(|row| match &row.event {
            DecodedRow::Search { event, .. } => Some(event),
            _ => None,
        });
        rederive_selections(events).map_err(|e| e.to_string())
    }) {
        Ok(selections) => selections,
        Err(e) => return fail(format!("{}: {e}", ledger.path().display())),
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
                "promotions": fold.promotions,
                "refusals": fold.refusals,
                "recoveries": fold.recoveries,
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
            for p in &fold.promotions {
                println_escaped!(
                    "promoted {} via {:?}: {}",
                    p.repair_id,
                    p.via,
                    render::names(&p.files)
                );
            }
            for r in &fold.refusals {
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
            for r in &fold.recoveries {
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
