//! The headless front end: `trellis check`, `repair`, `status` and `ledger`.

pub mod check;
pub mod ledger;
pub mod prompts;
pub mod render;
pub mod repair;
pub mod status;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;
use trellis_engine::sensor::StageStatus;
use trellis_engine::{CheckReport, Engine, Progress, PromptPolicy};

/// Exit status: everything passes.
pub const EXIT_OK: u8 = 0;
/// Exit status: residuals remain.
pub const EXIT_RESIDUALS: u8 = 1;
/// Exit status: usage, configuration or infrastructure error.
pub const EXIT_ERROR: u8 = 2;

/// The exit status of a sensed state: 0 hard pass, 2 when a required stage
/// could not run (missing tool, timeout: infrastructure), else 1.
pub fn verdict_code(report: &CheckReport) -> u8 {
    let unavailable = report
        .stages
        .iter()
        .any(|s| s.required && matches!(s.status, StageStatus::Unavailable { .. }));
    if report.hard_pass {
        EXIT_OK
    } else if unavailable {
        EXIT_ERROR
    } else {
        EXIT_RESIDUALS
    }
}

/// Cancels `token` on Ctrl-C, so the sensors' process groups are killed.
pub fn cancel_on_interrupt(token: &CancellationToken) {
    let token = token.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            token.cancel();
        }
    });
}

/// Prints an error the way cargo does and returns the error exit status.
pub fn fail(message: impl std::fmt::Display) -> u8 {
    eprintln!("error: {message}");
    EXIT_ERROR
}

/// The workspace a command acts on: the given path or the current directory.
pub fn workspace(path: Option<PathBuf>) -> PathBuf {
    path.unwrap_or_else(|| PathBuf::from("."))
}

pub fn open(path: &Path, prompts: PromptPolicy) -> Result<Engine, u8> {
    Engine::open_with(path, None, prompts).map_err(fail)
}

/// A spinner on stderr that shows the running stage; silent when stderr is
/// not a terminal or output is JSON.
pub struct Spinner {
    bar: Mutex<Option<ProgressBar>>,
}

impl Spinner {
    pub fn new(visible: bool) -> Spinner {
        let bar = visible.then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner:.cyan} [{elapsed_precise}] {msg}")
                    .expect("valid template"),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar
        });
        Spinner {
            bar: Mutex::new(bar),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = self.bar.lock().expect("spinner lock").take() {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Spinner {
    fn report(&self, message: &str, _percent: Option<u32>) {
        if let Some(bar) = self.bar.lock().expect("spinner lock").as_ref() {
            bar.set_message(message.to_owned());
        }
    }
}
