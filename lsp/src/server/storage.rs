//! Storage collection in the language server: what `trellis repair` does
//! after each repair (see `cli::gc::after_repair`), at a quiet moment.
//!
//! When the last running repair ends, one collection runs on a blocking
//! thread, past the same thresholds (`trellis_engine::gc`). A repair asked
//! for while it runs is answered at once and starts when it ends. This
//! module must never start a collection while a repair runs, never run two
//! at once, and never make a request wait for one.

use std::sync::Arc;

use tower_lsp_server::ls_types::MessageType;
use trellis_engine::Engine;
use trellis_engine::gc::GcReport;

/// Whether a collection runs, and the repairs waiting for it.
#[derive(Debug, Default)]
pub struct Collector {
    running: bool,
    /// Clusters whose repair was asked for during the collection, in order.
    waiting: Vec<String>,
}

impl Collector {
    /// Starts a collection unless one runs or a repair does; `done` gets
    /// its result on the blocking thread.
    pub fn start_if_quiet(
        &mut self,
        repairs_running: bool,
        engine: Arc<Engine>,
        done: impl FnOnce(Result<GcReport, String>) + Send + 'static,
    ) {
        if self.running || repairs_running {
            return;
        }
        self.running = true;
        tokio::task::spawn_blocking(move || {
            done(engine.collect_garbage(false).map_err(|e| e.to_string()))
        });
    }

    /// Holds back the repair of `cluster` while a collection runs: `true`
    /// when it must wait (see [`Collector::finished`]).
    pub fn hold(&mut self, cluster: &str) -> bool {
        if self.running && !self.waiting.iter().any(|c| c == cluster) {
            self.waiting.push(cluster.to_owned());
        }
        self.running
    }

    /// The collection ended: the repairs that waited for it, to start now.
    pub fn finished(&mut self) -> Vec<String> {
        self.running = false;
        std::mem::take(&mut self.waiting)
    }
}

/// What to tell the client's log about a finished collection, if anything.
pub fn message(result: &Result<GcReport, String>) -> Option<(MessageType, String)> {
    match result {
        Ok(report) if report.bytes_freed > 0 || !report.slot_sets.is_empty() => Some((
            MessageType::INFO,
            format!(
                "Trellis collected unused storage:\n{}",
                crate::cli::gc::render(report)
            ),
        )),
        Ok(_) => None,
        Err(e) => Some((
            MessageType::WARNING,
            format!("Trellis: collecting unused storage failed: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repair_asked_for_during_a_collection_waits_for_it_once() {
        let mut c = Collector::default();
        assert!(!c.hold("c1"), "nothing runs: the repair starts");
        c.running = true;
        assert!(c.hold("c1") && c.hold("c2") && c.hold("c1"));
        assert_eq!(c.finished(), vec!["c1".to_owned(), "c2".to_owned()]);
        assert!(!c.hold("c1"));
        assert!(c.finished().is_empty());
    }
}
