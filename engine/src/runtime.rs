//! How slow work runs inside the engine: the progress it reports,
//! blocking file-system work kept off the async runtime's threads, and
//! work done ahead in the time other work leaves idle.
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

/// Runs blocking `work` on a thread of its own at the lowest CPU priority
/// (on Linux, where a priority is a thread's own and the threads it starts
/// inherit it): work done ahead, such as seeding a slot a later step will
/// build in, takes the time the measurement running meanwhile leaves idle
/// (cargo's start, the slower of two compilations) instead of slowing it.
/// Resolves once `work` has returned (or panicked), or at once without
/// running it when no thread can be started: whatever it would have
/// prepared, the later step then does itself.
pub(crate) async fn in_idle_time(work: impl FnOnce() + Send + 'static) {
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("trellis-ahead".into())
        .spawn(move || {
            lowest_priority();
            work();
            drop(done);
        });
    if spawned.is_ok() {
        // An error only says the thread ended without a value: it is done.
        let _ = finished.await;
    }
}

/// Gives the calling thread the lowest CPU priority (nice 19). Best
/// effort: a thread that cannot lower its priority runs as it is.
fn lowest_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: `setpriority` reads only its integer arguments; on Linux, who
    // 0 with PRIO_PROCESS is the calling thread, not the whole process.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_ahead_runs_at_the_lowest_priority_and_is_awaited() {
        // SAFETY (every `getpriority` here): it reads only its arguments.
        let priority = || unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let before = priority();
        let (seen, told) = std::sync::mpsc::channel();
        in_idle_time(move || seen.send(priority()).unwrap()).await;
        let nice = told
            .try_recv()
            .expect("the work ran before the future resolved");
        if cfg!(target_os = "linux") {
            assert_eq!(nice, 19, "the work ran at nice 19");
        }
        assert_eq!(priority(), before, "the caller's thread keeps its priority");
    }

    #[tokio::test]
    async fn work_ahead_that_panics_still_resolves() {
        in_idle_time(|| panic!("seeding failed")).await;
    }
}
