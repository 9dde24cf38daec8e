//! Test-only fault hooks: compiled into the shipped binary so the
//! end-to-end tests inject faults into exactly what users run, and inert
//! unless `TRELLIS_FAILPOINT` is set.
//!
//! `TRELLIS_FAILPOINT=<point>:<k>:<action>` acts the `k`-th time (from 1)
//! this process reaches `<point>`:
//!
//! - `abort`: `std::process::abort()`, a crash with no cleanup at all (no
//!   destructors, no temp-file removal), like SIGKILL;
//! - `pause`: creates the file named by `TRELLIS_FAILPOINT_MARKER` and waits
//!   until it is removed (at most [`PAUSE_LIMIT`]), so a test can act inside
//!   exactly that window (edit a file, delete `.trellis`) and then let the
//!   process go on;
//! - `fail`: the operation at a point asked with [`fails`] fails as the
//!   system could make it fail.
//!
//! Points, in the order a CLI promotion reaches them: `promote-start`
//! (before the ledger and the disk are checked), `promote-after-stage` (a
//! new content was staged), `promote-before-rename` (a target's old file was
//! moved aside and checked; its new one is about to be renamed in) and
//! `promote-after-rename` (a target was replaced); `gc-collect` (a storage
//! collection starts); `bundles-attached` (a repair resolved its
//! prompt-bundle refs and has not yet run); and `view-measure` (a check,
//! a sensing run or a repair holds the view lock and has copied the view
//! into its slot; its stages are about to run); `mirror-enter` (a
//! slot's cargo is about to enter its mount namespace, asked with
//! [`fails`]); `seed-entry` (an entry of a slot's target directory is
//! staged and about to be renamed into place); and `sandbox-probe` (the
//! probe of what the kernel lets a slot be confined by, asked with
//! [`fails`]: a kernel without Landlock or user namespaces). This
//! module must never change behaviour when the variable is unset, and is
//! never a configuration surface: nothing documents it to users.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Selects the fault: `<point>:<k>:<action>`.
pub const ENV: &str = "TRELLIS_FAILPOINT";
/// The file a `pause` creates and waits to see removed.
pub const MARKER_ENV: &str = "TRELLIS_FAILPOINT_MARKER";
/// A pause never outlives a test that forgot to release it by more than this.
pub const PAUSE_LIMIT: Duration = Duration::from_secs(120);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    Abort,
    Pause(PathBuf),
    Fail,
}

#[derive(Debug)]
struct Armed {
    point: String,
    k: usize,
    action: Action,
    hits: AtomicUsize,
}

/// Parses `<point>:<k>:<action>`; `None` (with a warning) for anything else.
fn parse(spec: &str, marker: Option<PathBuf>) -> Option<Armed> {
    let mut parts = spec.splitn(3, ':');
    let (point, k, action) = (parts.next()?, parts.next()?, parts.next()?);
    let k = k.parse().ok().filter(|k| *k >= 1)?;
    let action = match action {
        "abort" => Action::Abort,
        "pause" => Action::Pause(marker?),
        "fail" => Action::Fail,
        _ => return None,
    };
    Some(Armed {
        point: point.to_owned(),
        k,
        action,
        hits: AtomicUsize::new(0),
    })
}

fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let spec = std::env::var(ENV).ok()?;
            let parsed = parse(&spec, std::env::var_os(MARKER_ENV).map(PathBuf::from));
            if parsed.is_none() {
                tracing::warn!("ignoring malformed {ENV}={spec:?}");
            }
            parsed
        })
        .as_ref()
}

/// The armed action, when this hit of `point` is its `k`-th.
fn reached(point: &str) -> Option<&'static Action> {
    let armed = armed()?;
    (armed.point == point && armed.hits.fetch_add(1, Ordering::SeqCst) + 1 == armed.k)
        .then_some(&armed.action)
}

/// Whether the operation at `point` is to fail this time (`fail`); any
/// other action is taken as [`hit`] takes it.
pub fn fails(point: &str) -> bool {
    match reached(point) {
        Some(Action::Fail) => true,
        Some(action) => {
            act(point, action);
            false
        }
        None => false,
    }
}

/// Marks that this process reached `point`; acts when it is the armed one
/// and this is its `k`-th hit.
pub fn hit(point: &str) {
    if let Some(action) = reached(point) {
        act(point, action);
    }
}

fn act(point: &str, action: &Action) {
    match action {
        Action::Abort => std::process::abort(),
        Action::Pause(marker) => {
            if std::fs::write(marker, point).is_err() {
                return;
            }
            let until = Instant::now() + PAUSE_LIMIT;
            while marker.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Only an operation asked with `fails` can fail.
        Action::Fail => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms_only() {
        let armed = parse("promote-after-rename:2:abort", None).unwrap();
        assert_eq!(
            (armed.point.as_str(), armed.k, armed.action),
            ("promote-after-rename", 2, Action::Abort)
        );
        let armed = parse("promote-start:1:pause", Some("/tmp/m".into())).unwrap();
        assert_eq!(armed.action, Action::Pause("/tmp/m".into()));
        assert!(parse("promote-start:1:pause", None).is_none());
        assert!(parse("promote-start:0:abort", None).is_none());
        assert!(parse("promote-start:x:abort", None).is_none());
        assert_eq!(
            parse("mirror-enter:2:fail", None).unwrap().action,
            Action::Fail
        );
        assert!(parse("promote-start:1:explode", None).is_none());
        assert!(parse("promote-start", None).is_none());
    }
}
