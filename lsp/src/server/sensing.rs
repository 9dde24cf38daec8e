//! When to run the sensors: a debounce timer and a generation counter.
//!
//! Opens and saves arrive in bursts (an editor restoring a session opens a
//! dozen files at once). Each trigger pushes the start back by the debounce
//! delay (a session's first run waits less: nothing is shown yet, and an
//! editor sends its burst at once); when the timer fires a new run starts
//! and cancels the one still running, whose cargo process the engine then
//! kills. Only the newest generation's results are published: a cancelled
//! run that still manages to report is ignored. A run publishes twice: what
//! its first stages found (the build's diagnostics) while the rest still
//! run, then everything.
//!
//! Pure state over `Instant`s so the rules are tested without sleeping.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// The delay between the last trigger and the start of a run.
pub const SENSING_DEBOUNCE: Duration = Duration::from_millis(300);

/// The delay before a session's first run: long enough to gather the opens
/// an editor sends at once when it restores a session, short enough that
/// opening a project shows its diagnostics about when its build has them.
pub const FIRST_SENSING_DELAY: Duration = Duration::from_millis(50);

#[derive(Debug)]
pub struct Debouncer {
    first_delay: Duration,
    delay: Duration,
    deadline: Option<Instant>,
    generation: u64,
    running: Option<(u64, CancellationToken)>,
}

/// A run the caller must now start.
#[derive(Debug)]
pub struct Run {
    pub generation: u64,
    pub cancel: CancellationToken,
}

impl Debouncer {
    /// Runs start `delay` after the last trigger; the first run,
    /// `first_delay` after it.
    pub fn new(first_delay: Duration, delay: Duration) -> Debouncer {
        Debouncer {
            first_delay,
            delay,
            deadline: None,
            generation: 0,
            running: None,
        }
    }

    /// Something worth sensing happened at `now`.
    pub fn trigger(&mut self, now: Instant) {
        let delay = if self.generation == 0 {
            self.first_delay
        } else {
            self.delay
        };
        self.deadline = Some(now + delay);
    }

    /// When the pending run is due, if one is pending.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Starts the pending run if it is due at `now`, cancelling the one
    /// still running.
    pub fn start_if_due(&mut self, now: Instant) -> Option<Run> {
        if self.deadline.is_none_or(|deadline| now < deadline) {
            return None;
        }
        self.deadline = None;
        if let Some((_, older)) = self.running.take() {
            older.cancel();
        }
        self.generation += 1;
        let cancel = CancellationToken::new();
        self.running = Some((self.generation, cancel.clone()));
        Some(Run {
            generation: self.generation,
            cancel,
        })
    }

    /// A run reported what its first stages found, and goes on. True while
    /// it is the newest run and still running: what an older run or one
    /// already finished says about part of the stages is out of date.
    pub fn partial(&self, generation: u64) -> bool {
        generation == self.generation
            && self.running.as_ref().is_some_and(|(g, _)| *g == generation)
    }

    /// A run ended. True when it is the newest, so its results stand.
    pub fn finish(&mut self, generation: u64) -> bool {
        if self.running.as_ref().is_some_and(|(g, _)| *g == generation) {
            self.running = None;
        }
        generation == self.generation
    }

    /// Cancels the running run and forgets the pending one (shutdown).
    pub fn stop(&mut self) {
        self.deadline = None;
        if let Some((_, token)) = self.running.take() {
            token.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_millis(300);

    #[test]
    fn a_burst_of_triggers_starts_one_run_after_the_last_one() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(DELAY, DELAY);
        d.trigger(t0);
        d.trigger(t0 + Duration::from_millis(200));
        assert!(d.start_if_due(t0 + Duration::from_millis(350)).is_none());
        assert_eq!(d.deadline(), Some(t0 + Duration::from_millis(500)));
        let run = d.start_if_due(t0 + Duration::from_millis(500)).unwrap();
        assert_eq!(run.generation, 1);
        assert!(d.deadline().is_none());
        assert!(d.start_if_due(t0 + Duration::from_secs(9)).is_none());
    }

    #[test]
    fn the_first_run_waits_only_for_its_burst_and_later_ones_the_full_delay() {
        let t0 = Instant::now();
        let first = Duration::from_millis(50);
        let mut d = Debouncer::new(first, DELAY);
        d.trigger(t0);
        d.trigger(t0 + Duration::from_millis(30));
        assert!(d.start_if_due(t0 + Duration::from_millis(70)).is_none());
        assert!(d.start_if_due(t0 + Duration::from_millis(80)).is_some());
        d.trigger(t0 + Duration::from_millis(100));
        assert_eq!(d.deadline(), Some(t0 + Duration::from_millis(100) + DELAY));
    }

    #[test]
    fn a_newer_run_cancels_the_older_and_only_the_newest_result_stands() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(DELAY, DELAY);
        d.trigger(t0);
        let first = d.start_if_due(t0 + DELAY).unwrap();
        d.trigger(t0 + DELAY);
        let second = d.start_if_due(t0 + DELAY * 2).unwrap();
        assert!(first.cancel.is_cancelled());
        assert!(!second.cancel.is_cancelled());
        assert!(!d.finish(first.generation));
        assert!(d.finish(second.generation));
    }

    #[test]
    fn a_partial_result_stands_only_for_the_newest_run_while_it_runs() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(DELAY, DELAY);
        d.trigger(t0);
        let first = d.start_if_due(t0 + DELAY).unwrap();
        assert!(d.partial(first.generation));
        d.trigger(t0 + DELAY);
        let second = d.start_if_due(t0 + DELAY * 2).unwrap();
        assert!(!d.partial(first.generation), "an older run's stage");
        assert!(d.partial(second.generation));
        assert!(d.finish(second.generation));
        assert!(
            !d.partial(second.generation),
            "a stage reported after its run's result"
        );
    }

    #[test]
    fn stop_cancels_the_running_run_and_the_pending_one() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(DELAY, DELAY);
        d.trigger(t0);
        let run = d.start_if_due(t0 + DELAY).unwrap();
        d.trigger(t0 + DELAY);
        d.stop();
        assert!(run.cancel.is_cancelled());
        assert!(d.deadline().is_none());
    }
}
