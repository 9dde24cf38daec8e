//! How slow work runs inside the engine: the progress it reports, and
//! blocking file-system work kept off the async runtime's threads.
//!
//! It owns no decision and no I/O of its own: it only says where work runs
//! and how its progress is shown.

/// Progress of slow work, shown as a bar (CLI) or `$/progress` (LSP).
pub trait Progress: Send + Sync {
    fn report(&self, message: &str, percent: Option<u32>);

    /// A report a sink that coalesces bursts must still show, because it
    /// records something that happened (a model turn, a refitted context)
    /// rather than where the work stands; a later report never supersedes it.
    fn milestone(&self, message: &str) {
        self.report(message, None);
    }
}

/// A progress sink that shows nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn report(&self, _message: &str, _percent: Option<u32>) {}
}

/// Runs blocking file-system work (hashing a tree, copying a slot) without
/// stalling the async runtime's other tasks: the language server keeps
/// answering requests while a snapshot is taken.
pub(crate) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
