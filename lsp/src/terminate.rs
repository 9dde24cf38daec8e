//! What `trellis` does when told to terminate (SIGTERM, SIGHUP), in every
//! mode: kill the process group of every tool still running, then exit with
//! the conventional status 128 + the signal's number.
//!
//! Without this the default action would end `trellis` at once and leave
//! `cargo` and its test binaries running (they sit in their own process
//! groups); the supervisor of each child (`trellis_engine::sensor`) would
//! still kill them, but only after it notices. Ctrl-C (SIGINT) stays with
//! the CLI commands, which cancel their run and report it.

use tokio::signal::unix::{SignalKind, signal};
use trellis_engine::sensor::process::kill_all_groups;

/// Installs the handlers; call once, inside the runtime.
pub fn on_termination_signals() {
    for (kind, number) in [
        (SignalKind::terminate(), libc::SIGTERM),
        (SignalKind::hangup(), libc::SIGHUP),
    ] {
        let Ok(mut signals) = signal(kind) else {
            // Without a handler the default action still ends the process.
            continue;
        };
        tokio::spawn(async move {
            if signals.recv().await.is_some() {
                kill_all_groups();
                std::process::exit(128 + number);
            }
        });
    }
}
