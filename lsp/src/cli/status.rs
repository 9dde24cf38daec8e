//! `trellis status`: the last search as the ledger records it.

use std::path::Path;

use trellis_engine::ledger::Ledger;
use trellis_engine::{BranchState, SearchStatus};

use super::{EXIT_OK, fail, workspace};
use crate::Format;

pub fn run(path: Option<std::path::PathBuf>, format: Format) -> u8 {
    let root = match workspace(path) {
        Ok(root) => root,
        Err(code) => return code,
    };
    let status = match read(&root) {
        Ok(status) => status,
        Err(message) => return fail(message),
    };
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&status).expect("serializable")
        ),
        Format::Human => print_human(&status),
    }
    EXIT_OK
}

/// The status of `root`'s ledger; a workspace without one has no search yet.
fn read(root: &Path) -> Result<SearchStatus, String> {
    if !root.is_dir() {
        return Err(format!("{}: not a directory", root.display()));
    }
    let dir = root.join(".trellis");
    if !dir.join("ledger.db").exists() {
        return Ok(SearchStatus::default());
    }
    let ledger = Ledger::open(&dir).map_err(|e| e.to_string())?;
    let rows = ledger
        .rows()
        .map_err(|e| format!("{}: {e}", ledger.path().display()))?;
    Ok(SearchStatus::from_rows(&rows))
}

fn print_human(status: &SearchStatus) {
    if status.forests.is_empty() {
        println!("no search recorded yet");
    }
    for forest in &status.forests {
        let state = match &forest.closed {
            Some(reason) => format!("closed: {reason}"),
            None => "open (interrupted?)".to_owned(),
        };
        println!(
            "forest {}  root {}  {state}",
            forest.forest_id,
            forest.accepted_root.short(12)
        );
        if let Some(from) = &forest.resumed_from {
            println!("  resumed from {from}");
        }
        let counts: Vec<String> = BranchState::ALL
            .iter()
            .skip(1)
            .map(|&s| format!("{} {}", forest.count(s), s.name().replace('_', " ")))
            .collect();
        println!(
            "  branches: {} opened; {}",
            forest.branches.len(),
            counts.join(", ")
        );
        for b in &forest.branches {
            match &b.reason {
                Some(reason) => println!("    {:<4} {:<13} {reason}", b.branch_id, b.state),
                None => println!("    {:<4} {}", b.branch_id, b.state),
            }
        }
        let remaining: Vec<String> = forest
            .remaining
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!("  remaining: {}", remaining.join(", "));
        println!("  no-goods recorded here: {}", forest.no_goods);
    }
    println!("no-goods in the ledger: {}", status.no_goods);
    if status.unreadable_rows > 0 {
        println!(
            "{} search row(s) from a newer trellis were not interpreted",
            status.unreadable_rows
        );
    }
}
