//! A workspace's record, read: what `trellis ledger`, `status`, `prompts`
//! and `context` show, assembled from `.trellis/ledger.db` in one place.
//!
//! The front ends open no ledger and fold no rows of their own: they ask a
//! [`History`] and render what it returns. Reading never creates a ledger;
//! a workspace without one has no history ([`History::open`] is `None`).
//!
//! Architecture invariant: replay refuses a broken chain before it folds
//! anything, and a session's rows run from its `session_started` to the
//! next one's (`history::tests`, `lsp/tests/it/ledger_history.rs`).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::actor::{ModelCall, model_calls_with};
use crate::bundles::attached_texts;
use crate::context::{TurnContext, context_turns};
use crate::ledger::event::PromotionRecovered;
use crate::ledger::{
    ChainError, DecodedRow, GateDecisionRecorded, Head, Ledger, LedgerEvent, Promoted, Rederived,
    Refused, Row, VerifyReport, fold_accepted, rederive_selections,
};
use crate::promote::PromoteError;
use crate::repair::SearchStatus;

/// Why the record could not be read.
#[derive(Debug)]
pub enum HistoryError {
    /// The ledger, or the state directory holding it, could not be opened.
    Open { dir: PathBuf, message: String },
    /// Replay found the hash chain broken and folded nothing.
    BrokenChain {
        ledger: PathBuf,
        error: Box<ChainError>,
    },
    /// The rows could not be read or folded.
    Read { ledger: PathBuf, message: String },
    /// No session with that id (or none at all, for `None`).
    NoSession {
        ledger: PathBuf,
        session: Option<String>,
    },
}

impl fmt::Display for HistoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HistoryError::Open { dir, message } => write!(f, "{}: {message}", dir.display()),
            HistoryError::BrokenChain { ledger, error } => write!(
                f,
                "{}: refusing to replay a broken chain: {error}",
                ledger.display()
            ),
            HistoryError::Read { ledger, message } => write!(f, "{}: {message}", ledger.display()),
            HistoryError::NoSession { ledger, session } => match session {
                Some(id) => write!(f, "no session `{id}` in {}", ledger.display()),
                None => write!(f, "no session in {}", ledger.display()),
            },
        }
    }
}

impl std::error::Error for HistoryError {}

/// A workspace's ledger, opened to be read.
pub struct History {
    root: PathBuf,
    ledger: Ledger,
}

/// What `trellis ledger replay` rebuilds from the record alone, running
/// nothing and calling no model.
pub struct Replay {
    /// Every gate decision, in the order the gate made them.
    pub decisions: Vec<GateDecisionRecorded>,
    pub promotions: Vec<Promoted>,
    pub refusals: Vec<Refused>,
    pub recoveries: Vec<PromotionRecovered>,
    /// Proposition 5: every recorded selection, re-derived from its keys.
    pub selections: Vec<Rederived>,
    /// Selections recorded before their keys were, so not re-derived.
    pub selections_unkeyed: usize,
    /// Gate Z: every model call's exact request, rebuilt.
    pub model_calls: Vec<ModelCall>,
}

/// One session's rows: from its `session_started` up to the next one's.
pub struct Session {
    pub id: String,
    rows: Vec<Row>,
    ledger: PathBuf,
    state_dir: PathBuf,
}

impl History {
    /// Opens `root`'s ledger; `None` when the workspace has none yet.
    pub fn open(root: &Path) -> Result<Option<History>, HistoryError> {
        let dir = root.join(".trellis");
        if !dir.join(crate::ledger::store::LEDGER_FILE).exists() {
            return Ok(None);
        }
        let ledger = Ledger::open(&dir).map_err(|e| HistoryError::Open {
            dir,
            message: e.to_string(),
        })?;
        Ok(Some(History {
            root: root.to_path_buf(),
            ledger,
        }))
    }

    /// `.trellis/ledger.db`.
    pub fn path(&self) -> &Path {
        self.ledger.path()
    }

    /// The hash chain checked up to the witnessed head, and to
    /// `expect_head` when one is given.
    pub fn verify(&self, expect_head: Option<Head>) -> Result<VerifyReport, ChainError> {
        self.ledger.verify_expecting(expect_head)
    }

    /// The accepted trajectory, every selection and every model request,
    /// rebuilt from the record; a broken chain is refused before anything
    /// is folded, and a call or selection that does not reproduce fails it.
    pub fn replay(&self) -> Result<Replay, HistoryError> {
        self.ledger
            .verify()
            .map_err(|error| HistoryError::BrokenChain {
                ledger: self.path().to_path_buf(),
                error: Box::new(error),
            })?;
        let rows = self.rows()?;
        let fold = fold_accepted(&rows).map_err(|e| self.read_error(e))?;
        // A repair that attached bundles is rebuilt with the very texts it
        // recorded, read back from the bundle store by version and checksum.
        let texts = attached_texts(&self.root.join(".trellis"));
        let model_calls = model_calls_with(&rows, self.ledger.state_dir().path(), &texts)
            .map_err(|e| self.read_error(e))?;
        let search_events = rows.iter().filter_map(|row| match &row.event {
            DecodedRow::Search { event, .. } => Some(event),
            _ => None,
        });
        let (selections, selections_unkeyed) =
            rederive_selections(search_events).map_err(|e| self.read_error(e))?;
        Ok(Replay {
            decisions: fold.decisions().cloned().collect(),
            promotions: fold.promotions,
            refusals: fold.refusals,
            recoveries: fold.recoveries,
            selections,
            selections_unkeyed,
            model_calls,
        })
    }

    /// What the last repair's search did, with the context of each model
    /// turn and any promotion a crash interrupted.
    pub fn status(&self) -> Result<(SearchStatus, Vec<TurnContext>), HistoryError> {
        let rows = self.rows()?;
        let context = context_turns(&rows).map_err(|e| self.read_error(e))?;
        let status =
            search_status(&self.root, &self.ledger, &rows).map_err(|e| self.read_error(e))?;
        Ok((status, context))
    }

    /// The session `id`, or the latest one for `None`.
    pub fn session(&self, id: Option<&str>) -> Result<Session, HistoryError> {
        let mut rows = self.rows()?;
        let (start, end, found) =
            session_bounds(&rows, id).ok_or_else(|| HistoryError::NoSession {
                ledger: self.path().to_path_buf(),
                session: id.map(str::to_owned),
            })?;
        rows.truncate(end);
        rows.drain(..start);
        Ok(Session {
            id: found,
            rows,
            ledger: self.path().to_path_buf(),
            state_dir: self.ledger.state_dir().path().to_path_buf(),
        })
    }

    fn rows(&self) -> Result<Vec<Row>, HistoryError> {
        self.ledger.rows().map_err(|e| self.read_error(e))
    }

    fn read_error(&self, message: impl fmt::Display) -> HistoryError {
        HistoryError::Read {
            ledger: self.path().to_path_buf(),
            message: message.to_string(),
        }
    }
}

impl Session {
    /// The session's model calls, each request rebuilt (with the bundle
    /// texts its repair recorded) and checked against the one sent (Gate Z).
    pub fn model_calls(&self) -> Result<Vec<ModelCall>, HistoryError> {
        let texts = attached_texts(&self.state_dir);
        model_calls_with(&self.rows, &self.state_dir, &texts).map_err(|e| self.read_error(e))
    }

    /// The context of each of the session's model turns.
    pub fn context_turns(&self) -> Result<Vec<TurnContext>, HistoryError> {
        context_turns(&self.rows).map_err(|e| self.read_error(e))
    }

    /// The ledger the session was read from.
    pub fn ledger(&self) -> &Path {
        &self.ledger
    }

    fn read_error(&self, message: impl fmt::Display) -> HistoryError {
        HistoryError::Read {
            ledger: self.ledger.clone(),
            message: message.to_string(),
        }
    }
}

/// The last search's status from `ledger`'s `rows`, with the promotion a
/// crash interrupted in `root`, if any: `trellis status` and the server's
/// `trellis/status` both read it here.
pub(crate) fn search_status(
    root: &Path,
    ledger: &Ledger,
    rows: &[Row],
) -> Result<SearchStatus, PromoteError> {
    let mut status = SearchStatus::from_rows(rows);
    status.interrupted_promotion = crate::promote::interrupted_promotion(root, ledger)?;
    Ok(status)
}

/// Where session `id` (the latest for `None`) starts and ends among `rows`,
/// with its id: it runs from its `session_started` up to the next one's.
fn session_bounds(rows: &[Row], id: Option<&str>) -> Option<(usize, usize, String)> {
    let starts: Vec<(usize, &str)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, row)| match &row.event {
            DecodedRow::Ledger(LedgerEvent::SessionStarted(s)) => Some((i, s.session_id.as_str())),
            _ => None,
        })
        .collect();
    let position = match id {
        Some(id) => starts.iter().position(|(_, s)| *s == id),
        None => starts.len().checked_sub(1),
    }?;
    let (start, found) = starts[position];
    let end = starts.get(position + 1).map_or(rows.len(), |(i, _)| *i);
    Some((start, end, found.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::SessionStarted;
    use crate::ledger::test_support::*;

    fn session(id: &str) -> LedgerEvent {
        LedgerEvent::SessionStarted(SessionStarted {
            session_id: id.into(),
            workspace: "/w".into(),
            trellis_version: "0".into(),
            config: serde_json::json!({}),
            sensors: Vec::new(),
            required_stages: Vec::new(),
        })
    }

    /// Two sessions, each with one measured candidate; `History` and the
    /// directory it keeps.
    fn two_sessions() -> (tempfile::TempDir, History) {
        let (dir, ledger) = temp_ledger();
        for (id, candidate) in [("s1", "n/0/c0"), ("s2", "n/0/c1")] {
            ledger.append(&session(id)).unwrap();
            ledger.append(&measured("n", 0, candidate, 1.0)).unwrap();
        }
        drop(ledger);
        let history = History::open(dir.path()).unwrap().expect("a ledger");
        (dir, history)
    }

    fn measured_ids(session: &Session) -> Vec<&str> {
        session
            .rows
            .iter()
            .filter_map(|row| match &row.event {
                DecodedRow::Ledger(LedgerEvent::CandidateMeasured(m)) => {
                    Some(m.candidate_id.as_str())
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_workspace_without_a_ledger_has_no_history_and_gets_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(History::open(dir.path()).unwrap().is_none());
        assert!(
            !dir.path().join(".trellis").exists(),
            "reading created state"
        );
    }

    #[test]
    fn a_session_runs_from_its_start_to_the_next_sessions_start() {
        let (_dir, history) = two_sessions();
        let first = history.session(Some("s1")).unwrap();
        assert_eq!(first.id, "s1");
        assert_eq!(measured_ids(&first), ["n/0/c0"]);
        let latest = history.session(None).unwrap();
        assert_eq!(latest.id, "s2");
        assert_eq!(measured_ids(&latest), ["n/0/c1"]);
        let missing = history.session(Some("s3")).err().expect("no s3");
        assert!(
            missing.to_string().starts_with("no session `s3` in "),
            "{missing}"
        );
    }

    #[test]
    fn replay_refuses_a_broken_chain_before_folding_anything() {
        let (_dir, history) = two_sessions();
        assert!(history.replay().is_ok());
        tamper(
            &history.ledger,
            "UPDATE events SET payload = replace(payload, 'n/0/c1', 'n/0/c9') WHERE seq = 4",
        );
        match history.replay() {
            Err(HistoryError::BrokenChain { ledger, .. }) => {
                assert!(
                    ledger.ends_with(".trellis/ledger.db"),
                    "{}",
                    ledger.display()
                )
            }
            Err(other) => panic!("not a broken chain: {other}"),
            Ok(_) => panic!("a tampered ledger replayed"),
        }
    }
}
