//! `trellis prompts`: the prompt library's commands, fed from the ledger.

use std::path::Path;

use trellis_engine::ledger::{DecodedRow, Ledger, LedgerEvent};
use trellis_prompts::{ProgramRecord, PromptsCommand, PromptsError};

use super::{EXIT_ERROR, fail};

/// The programs a session compiled. Sessions record their prompt programs
/// only when a model actor runs; a known session without one compiled none.
fn session_records(workspace: &Path, session_id: &str) -> Result<Vec<ProgramRecord>, PromptsError> {
    let dir = workspace.join(".trellis");
    let ledger = Ledger::open(&dir).map_err(|e| PromptsError::Usage(e.to_string()))?;
    let rows = ledger
        .rows()
        .map_err(|e| PromptsError::Usage(e.to_string()))?;
    let known = rows.iter().any(|row| {
        matches!(&row.event, DecodedRow::Ledger(LedgerEvent::SessionStarted(s)) if s.session_id == session_id)
    });
    if known {
        Ok(Vec::new())
    } else {
        Err(PromptsError::Usage(format!(
            "no session `{session_id}` in {}",
            ledger.path().display()
        )))
    }
}

pub fn run(command: PromptsCommand) -> u8 {
    let workspace = Path::new(".");
    let mut out = std::io::stdout().lock();
    match trellis_prompts::run_with_records(command, workspace, &mut out, |id| {
        session_records(workspace, id)
    }) {
        Ok(code) => u8::try_from(code).unwrap_or(EXIT_ERROR),
        Err(e) => fail(e),
    }
}
