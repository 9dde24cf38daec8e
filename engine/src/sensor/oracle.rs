//! `[verification] test_policy = "external-oracle"` (erratum 37): a
//! protected overlay of tests (`oracle_path`, a file or directory of the
//! workspace) run by `oracle_command` on a candidate, as one more verdict
//! that must pass before the candidate is a hard pass.
//!
//! The overlay is withheld from everything a search shows or copies: it is
//! left out of every snapshot (so of every slot, diff and promotion), and
//! the model's tools refuse its paths. It exists in a branch slot only
//! while the oracle runs there: copied in at its place, the command run
//! with the slot as its working directory (through
//! [`super::process::run_bounded`], like every tool), then removed. A
//! candidate that already holds something where the overlay goes, or an
//! oracle that leaves the verified tree changed, fails the verdict: it
//! would no longer be the candidate's tree that was verified. The
//! candidate's content is kept aside in the workspace's blob store before
//! the oracle runs, so what it changed is put back and the branch goes on
//! from its own tree. What the
//! oracle printed is kept out of the verdict, which the model's next
//! attempt is shown.
//!
//! Fails closed: a missing overlay or a command that cannot start is an
//! error naming `verification.oracle_path` or `verification.oracle_command`
//! when the repair starts ([`Oracle::check`]), and a failed verdict later.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SensorRun;
use super::process::{Confinement, ProcessError, ProcessLimits, run_bounded};
use crate::runtime::blocking;
use crate::snapshot::fsutil::confine;
use crate::snapshot::{
    BlobStore, ContentSource as _, DirSource, Overlay, Snapshot, SnapshotError, Snapshotter,
};

/// The oracle's verdict on one candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum OracleVerdict {
    Passed {
        duration_ms: u64,
    },
    /// Blocks hard pass; `reason` says why in Trellis's words (an exit
    /// status, a timeout), never the oracle's output.
    Failed {
        reason: String,
        duration_ms: u64,
    },
    /// The candidate's own stages already block hard pass: the oracle
    /// could not change that, so it was not run.
    NotRun {
        reason: String,
    },
}

impl OracleVerdict {
    pub fn passed(&self) -> bool {
        matches!(self, OracleVerdict::Passed { .. })
    }
}

/// The configured oracle of a workspace.
#[derive(Clone, Debug)]
pub struct Oracle {
    root: PathBuf,
    /// Workspace-relative (checked by the configuration).
    path: String,
    command: Vec<String>,
}

impl Oracle {
    /// The oracle of the workspace at `root`: the overlay at the
    /// workspace-relative `path`, run by `command` (the configuration's
    /// `VerificationConfig::oracle` makes it).
    pub(crate) fn new(root: &Path, path: String, command: Vec<String>) -> Oracle {
        Oracle {
            root: root.to_path_buf(),
            path,
            command,
        }
    }

    /// The workspace-relative path of the overlay.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether `rel` is the overlay or inside it.
    pub fn covers(&self, rel: &str) -> bool {
        crate::snapshot::withholds(&self.path, rel)
    }

    /// Fails closed before a search spends anything: the overlay must be
    /// there, hold no link, and the command's program must be found.
    pub fn check(&self) -> Result<(), String> {
        self.overlay_files()?;
        let program = &self.command[0];
        let found = if program.contains('/') {
            // Run from the verification tree, which is the workspace's.
            let path = self.root.join(program);
            is_executable(&path).then_some(path)
        } else {
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|dir| dir.join(program))
                .find(|path| is_executable(path))
        };
        match found {
            Some(_) => Ok(()),
            None => Err(format!(
                "`verification.oracle_command` runs `{program}`, which is not an executable \
                 {}; the oracle must be runnable before a repair can be verified by it",
                if program.contains('/') {
                    "file in the workspace"
                } else {
                    "program on PATH"
                }
            )),
        }
    }

    /// Every file of the overlay, relative to the workspace, in order.
    fn overlay_files(&self) -> Result<Vec<String>, String> {
        let missing = |e: std::io::Error| {
            format!(
                "`verification.oracle_path` names `{}`, which cannot be read: {e}",
                self.path
            )
        };
        let mut files = Vec::new();
        let mut pending = vec![self.path.clone()];
        while let Some(rel) = pending.pop() {
            let meta = fs::symlink_metadata(self.root.join(&rel)).map_err(missing)?;
            if meta.file_type().is_symlink() {
                return Err(format!(
                    "`verification.oracle_path`: `{rel}` is a symlink; the oracle is copied \
                     as files, never through a link"
                ));
            }
            if meta.is_dir() {
                for entry in fs::read_dir(self.root.join(&rel)).map_err(missing)? {
                    let name = entry.map_err(missing)?.file_name();
                    let name = name.into_string().map_err(|name| {
                        format!(
                            "`verification.oracle_path`: `{rel}/{}` is not a UTF-8 name",
                            name.to_string_lossy()
                        )
                    })?;
                    pending.push(format!("{rel}/{name}"));
                }
            } else {
                files.push(rel);
            }
        }
        files.sort();
        Ok(files)
    }

    /// Runs the oracle on the candidate `state` in the slot `run.dir`: the
    /// overlay copied in, the command run there within `run.deadline` and
    /// confined like any process of the slot (`run.sandbox()`), the overlay
    /// and anything else the run added taken out again, and the candidate's
    /// files checked to be as they were. `CARGO_TARGET_DIR` is the slot's
    /// own build output, so an oracle running `cargo test` reuses it.
    pub async fn run(&self, run: &SensorRun<'_>, state: &Snapshot) -> OracleVerdict {
        let slot = run.dir;
        let started = std::time::Instant::now();
        let failed = |reason: String| OracleVerdict::Failed {
            reason,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        if fs::symlink_metadata(slot.join(&self.path)).is_ok() {
            return failed(format!(
                "the candidate has files at `{}`, where only the oracle \
                 (`verification.oracle_path`) may be",
                self.path
            ));
        }
        let store = match blocking(|| self.keep_aside(slot, state)) {
            Ok(store) => store,
            Err(e) => {
                return failed(format!(
                    "the candidate could not be kept aside before the oracle ran: {e}"
                ));
            }
        };
        let placed = blocking(|| self.place(slot));
        let ran = match placed {
            Ok(()) => {
                let mut command = tokio::process::Command::new(&self.command[0]);
                command
                    .args(&self.command[1..])
                    .current_dir(slot)
                    .env("CARGO_TARGET_DIR", run.own_target())
                    .env("TRELLIS_ORACLE_PATH", slot.join(&self.path))
                    // The tree is verified, not written: no bytecode, no
                    // pytest cache in it.
                    .env("PYTHONDONTWRITEBYTECODE", "1")
                    .env("PYTEST_ADDOPTS", "-p no:cacheprovider");
                let sandbox = run.sandbox();
                let limits = ProcessLimits::with_deadline(run.deadline);
                Ok(run_bounded(
                    command,
                    Confinement::Slot(&sandbox, None),
                    &limits,
                    &run.cancel,
                )
                .await)
            }
            Err(reason) => Err(reason),
        };
        // Whatever the run did, the slot goes back to the candidate: what
        // is not the candidate's (the overlay, anything the run added) is
        // taken out, and what it changed is put back from the store.
        let changed = blocking(|| restore(slot, state, &store));
        let verdict = match ran {
            Err(reason) => failed(reason),
            Ok(Ok(output)) if output.status.success() => OracleVerdict::Passed {
                duration_ms: u64::try_from(output.elapsed.as_millis()).unwrap_or(u64::MAX),
            },
            Ok(Ok(output)) => failed(format!(
                "`verification.oracle_command` {}",
                exit_text(&output.status)
            )),
            Ok(Err(ProcessError::Launch { program, source })) => failed(format!(
                "`verification.oracle_command` could not start `{program}`: {source}"
            )),
            Ok(Err(e)) => failed(format!("`verification.oracle_command`: {e}")),
        };
        match changed {
            Ok(changed) if changed.is_empty() => verdict,
            Ok(changed) => failed(format!(
                "the oracle changed the candidate's {}, so its verdict is not the \
                 candidate's (an oracle writes only below `CARGO_TARGET_DIR` or a temp \
                 directory); the candidate's content was put back",
                changed.join(", ")
            )),
            Err(e) => failed(format!("the verified tree cannot be read again: {e}")),
        }
    }

    /// Puts every entry of `state` that the workspace's blob store lacks
    /// there, read from `slot` and verified against `state`: what a changed
    /// file is put back from. Content already stored costs one lookup.
    fn keep_aside(&self, slot: &Path, state: &Snapshot) -> Result<BlobStore, SnapshotError> {
        let store = BlobStore::open(
            self.root
                .join(".trellis")
                .join(crate::snapshot::store::OBJECTS),
        )?;
        let candidate = DirSource::new(slot, Overlay::default());
        for (path, entry) in &state.entries {
            if !store.object_path(&entry.blob).is_file() {
                store.put(&candidate.read(path, entry)?)?;
            }
        }
        Ok(store)
    }

    /// Copies the overlay's files into `slot` at their places.
    fn place(&self, slot: &Path) -> Result<(), String> {
        for rel in self.overlay_files()? {
            let to = confine(slot, &rel).map_err(|e| e.to_string())?;
            let parent = to.parent().expect("a confined path has a parent");
            fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
            fs::copy(self.root.join(&rel), &to).map_err(|e| {
                format!(
                    "`verification.oracle_path`: cannot copy `{rel}` into the verification \
                     tree: {e}"
                )
            })?;
        }
        Ok(())
    }
}

/// Takes out of `slot` every file that is not `state`'s (and the
/// directories left empty by that), puts back from `store` the files of
/// `state` that changed or went missing, and names them.
fn restore(slot: &Path, state: &Snapshot, store: &BlobStore) -> Result<Vec<String>, SnapshotError> {
    let after = Snapshotter::new(slot, None).snapshot(&Overlay::default())?;
    for path in after
        .entries
        .keys()
        .filter(|p| !state.entries.contains_key(*p))
    {
        let full = confine(slot, path)?;
        fs::remove_file(&full).map_err(SnapshotError::io(&full))?;
        // Its directories, as far up as they are empty and not the state's.
        let mut dir = Path::new(path.as_str()).parent();
        while let Some(rel) = dir.filter(|d| !d.as_os_str().is_empty()) {
            if fs::remove_dir(slot.join(rel)).is_err() {
                break;
            }
            dir = rel.parent();
        }
    }
    let changed: Vec<(&str, &crate::snapshot::Entry)> = state
        .entries
        .iter()
        .filter(|(path, entry)| after.entries.get(*path) != Some(entry))
        .map(|(path, entry)| (path.as_str(), entry))
        .collect();
    crate::snapshot::rewrite(slot, store, &changed)?;
    Ok(changed.iter().map(|(path, _)| (*path).to_owned()).collect())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `exited with status 1`, `was killed by signal 9`.
fn exit_text(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => format!("ended with {status}"),
    }
}
